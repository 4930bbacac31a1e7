"""ADR-0050 D5 on PostgreSQL: the application lock's one statement, run. Its wait bound is the
transaction's own (a pooled connection goes back with the server's lock_timeout), and the lock
is the transaction's: refused while another transaction of the same user holds it, granted once
that one commits. Through the API: tests/integration/money/test_transfer_concurrency.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from shared.db.engine import build_engine
from shared.errors import LockTimeout
from shared.money.applock_sql import take_daily_limit_lock

pytestmark = [pytest.mark.postgres, pytest.mark.adr("0050", "D5")]


@pytest.fixture
def pg(postgres_url: str) -> Iterator[Engine]:
    engine = build_engine(postgres_url)
    yield engine
    engine.dispose()


def _lock_timeout(conn: Connection) -> str:
    """The connection's lock_timeout, read in a transaction of its own."""
    with conn.begin():
        return str(conn.execute(text("SHOW lock_timeout")).scalar_one())


def test_the_wait_bound_ends_with_the_transaction_that_set_it(pg: Engine) -> None:
    with pg.connect() as conn:
        before = _lock_timeout(conn)
        with conn.begin():
            take_daily_limit_lock(Session(bind=conn), str(uuid.uuid4()), 2)
            during = str(conn.execute(text("SHOW lock_timeout")).scalar_one())
        after = _lock_timeout(conn)
    assert (during, after) == ("2s", before)


def test_the_lock_is_refused_while_another_transaction_holds_it_and_granted_after_its_commit(
    pg: Engine,
) -> None:
    user = str(uuid.uuid4())
    with pg.connect() as holder, pg.connect() as waiter:
        holding = holder.begin()
        take_daily_limit_lock(Session(bind=holder), user, 1)
        with pytest.raises(LockTimeout), waiter.begin():
            take_daily_limit_lock(Session(bind=waiter), user, 1)
        holding.commit()
        with waiter.begin():
            take_daily_limit_lock(Session(bind=waiter), user, 1)  # granted: no wait, no error
