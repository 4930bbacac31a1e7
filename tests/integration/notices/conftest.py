"""The relay tests' clock: a FakeClock at the moment their notices are created from. CONTACT and
owed_notices are re-exported under the name the CLI contract test, which stays as written,
imports them by; they live in tests/support/."""

from __future__ import annotations

import pytest

from tests.support.clock import FakeClock
from tests.support.hosts import CONTACT
from tests.support.notices import START, owed_notices

__all__ = ["CONTACT", "owed_notices"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)
