"""The PostgreSQL engine's bounds, each against the real server (through the suite's fault
proxy where the network must misbehave): a statement the server cancels at statement_timeout,
a server that stops answering, and a pool with no connection free are each DATABASE_UNAVAILABLE
within their bound; every session carries the settings that bound it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from sqlalchemy import Engine, text

from shared.db.engine import EngineOptions, build_engine
from shared.db.uow import unit_of_work
from shared.errors import DatabaseUnavailable
from tests.support.fault_proxy import FaultProxy, Mode

pytestmark = pytest.mark.postgres

BOUNDS = EngineOptions(
    pool_size=1,
    max_overflow=0,
    pool_timeout=1,
    connect_timeout=2,
    statement_timeout=2,
    lock_timeout=1,
    keepalive=6,
)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.in_front_of(postgres_url) as running:
        yield running


@pytest.fixture
def engine(proxy: FaultProxy, postgres_url: str) -> Iterator[Engine]:
    bounded = build_engine(proxy.url(postgres_url), options=BOUNDS)
    yield bounded
    bounded.dispose()


def _fails_unavailable_within(engine: Engine, sql: str, bound: float) -> float:
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable), engine.connect() as conn:
        conn.execute(text(sql))
    took = time.monotonic() - started
    assert took < bound, took
    return took


def test_every_session_carries_its_bounds(engine: Engine) -> None:
    with engine.connect() as conn:
        shown = {
            name: conn.scalar(text(f"SHOW {name}"))
            for name in (
                "statement_timeout",
                "lock_timeout",
                "idle_in_transaction_session_timeout",
                "tcp_keepalives_idle",
                "tcp_keepalives_interval",
                "tcp_keepalives_count",
            )
        }
    assert shown == {
        "statement_timeout": "2s",
        "lock_timeout": "1s",
        "idle_in_transaction_session_timeout": "2s",
        "tcp_keepalives_idle": "6",
        "tcp_keepalives_interval": "2",
        "tcp_keepalives_count": "3",
    }


def test_a_statement_past_the_statement_timeout_is_cancelled_and_unavailable(
    engine: Engine,
) -> None:
    took = _fails_unavailable_within(engine, "SELECT pg_sleep(10)", bound=2 + 1)
    assert took >= 1.8  # the server's cancel, at its statement_timeout


def test_a_server_that_stops_answering_is_unavailable_within_the_statement_bound(
    engine: Engine, proxy: FaultProxy
) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))  # a pooled connection, alive
    proxy.set_mode(Mode.BLACK_HOLE)
    # The pooled connection's ping waits the statement bound and its grace second, then a new
    # connection waits the connect timeout.
    _fails_unavailable_within(engine, "SELECT 1", bound=2 + 1 + 2 + 1.5)
    proxy.set_mode(Mode.PASS)
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT 1")) == 1


def test_no_pooled_connection_free_within_the_pool_timeout_is_unavailable(engine: Engine) -> None:
    with ExitStack() as held:
        held.enter_context(engine.connect())  # the pool's one connection, taken
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as raised, unit_of_work(engine):
            pass
        took = time.monotonic() - started
    assert raised.value.driver_error == "TimeoutError"
    assert 0.9 <= took < 2, took
