"""Fixtures of the identity, PIN and audit-chain tests."""

from __future__ import annotations

import logging

import pytest

from tests.leak_watch import LeakWatch


@pytest.fixture
def leak_watch(caplog: pytest.LogCaptureFixture) -> LeakWatch:
    """DESIGN §2 security: every log record at DEBUG on the root logger, and every response
    the test hands to `saw`, are checked for the secrets it names (`assert_clean`)."""
    caplog.set_level(logging.DEBUG)
    return LeakWatch(caplog)
