"""The relay tests' clock: a FakeClock at the moment their notices are created from."""

from __future__ import annotations

import pytest

from shared.clock import FakeClock
from tests.support.notices import START


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)
