"""ADR-0050 D5 on SQL Server (opt-in, AZUREBANK_TEST_SQLSERVER): sp_getapplock is granted to one
transaction per user, a second waits at most the lock timeout and is refused by the batch's THROW
(recognised as a lock timeout), and another user's lock is independent. Not run on this machine
(no SQL Server); the batch's text is pinned by tests/unit/test_applock_sql.py."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from sqlalchemy.orm import Session

from shared.db.engine import build_engine
from shared.errors import LockTimeout
from shared.money.applock_sql import take_daily_limit_lock

SQLSERVER_URL = os.environ.get("AZUREBANK_TEST_SQLSERVER", "")

pytestmark = [
    pytest.mark.sqlserver,
    pytest.mark.skipif(not SQLSERVER_URL, reason="AZUREBANK_TEST_SQLSERVER is not set (opt-in)"),
    pytest.mark.adr("0050", "D5"),
]


def test_sp_getapplock_serialises_one_user_and_times_out_into_a_recognised_error() -> None:
    engine = build_engine(SQLSERVER_URL)
    user, other = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        with Session(engine) as holder, Session(engine) as waiter, Session(engine) as neighbour:
            take_daily_limit_lock(holder, user, 1)
            take_daily_limit_lock(neighbour, other, 1)  # another user: granted at once
            started = time.monotonic()
            with pytest.raises(LockTimeout):
                take_daily_limit_lock(waiter, user, 1)
            elapsed = time.monotonic() - started
            assert 0.9 <= elapsed < 15, elapsed
            waiter.rollback()
            holder.rollback()  # the lock is the transaction's: released here
            take_daily_limit_lock(waiter, user, 1)
            waiter.rollback()
            neighbour.rollback()
    finally:
        engine.dispose()
