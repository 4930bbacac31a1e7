"""Every lock wait on a server is bounded: by Database__LockTimeoutSeconds, which each connection
carries from the moment it opens, or by the wait a writing unit of work asks for, on PostgreSQL
and SQL Server alike (not only SQLite's busy wait). A lock held by another session (the audit
chain's tail, which every audited write takes first) is a LOCK_TIMEOUT after the bound, never a
wait without end; and the unit's own wait does not outlive it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from shared.audit.tail_sql import lock_and_read_tail
from shared.db.engine import EngineOptions, build_engine
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.errors import LockTimeout

DEFAULT_WAIT = 2  # Database__LockTimeoutSeconds of the waiting engine


@pytest.fixture
def waiting(server_url: str) -> Iterator[Engine]:
    engine = build_engine(server_url, options=EngineOptions(lock_timeout=DEFAULT_WAIT))
    yield engine
    engine.dispose()


@pytest.fixture
def tail_held(server_url: str) -> Iterator[None]:
    """Another session holds the chain's tail lock until the test ends."""
    holder = build_engine(server_url)
    release = threading.Event()
    locked = threading.Event()

    def hold() -> None:
        with writing_unit_of_work(holder) as session:
            lock_and_read_tail(session)
            locked.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(10)
    yield
    release.set()
    thread.join(10)
    holder.dispose()


def _wait_on_the_tail(
    engine: Engine, wait_seconds: int | None
) -> tuple[BaseException | None, float]:
    """Take the tail in a writing unit of work on a thread, watched: (what it raised, seconds),
    or AssertionError when it is still waiting well past every bound here."""
    outcome: list[BaseException | None] = []
    started = time.monotonic()

    def wait() -> None:
        try:
            with writing_unit_of_work(engine, wait_seconds=wait_seconds) as session:
                lock_and_read_tail(session)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    thread.join(DEFAULT_WAIT + 6)
    assert outcome, "the lock wait is not bounded: still waiting on the tail"
    return outcome[0], time.monotonic() - started


@pytest.mark.usefixtures("tail_held")
@pytest.mark.parametrize("wait_seconds", [None, 1], ids=["the-engines-default", "the-units-own"])
def test_a_lock_wait_on_a_held_tail_runs_out_at_its_bound_as_a_lock_timeout(
    waiting: Engine, wait_seconds: int | None
) -> None:
    raised, took = _wait_on_the_tail(waiting, wait_seconds)
    assert isinstance(raised, LockTimeout), raised
    bound = DEFAULT_WAIT if wait_seconds is None else wait_seconds
    assert bound - 0.2 <= took < bound + 2, took


def test_a_units_own_wait_ends_with_the_unit(waiting: Engine) -> None:
    """PostgreSQL's is the transaction's; SQL Server's is the session's, set back on the way out,
    so the pooled connection's next unit waits the default again."""
    with writing_unit_of_work(waiting, wait_seconds=1) as session:
        session.execute(text("SELECT 1"))
    with unit_of_work(waiting) as session:
        if waiting.dialect.name == "postgresql":
            assert session.scalar(text("SHOW lock_timeout")) == f"{DEFAULT_WAIT}s"
        else:
            assert session.scalar(text("SELECT @@LOCK_TIMEOUT")) == DEFAULT_WAIT * 1000
