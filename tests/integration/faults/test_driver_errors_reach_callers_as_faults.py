"""Each kind of driver failure reaches the code that ran the unit of work as its domain fault
(shared/errors.py), translated where the engine raised it (shared/db/faults.py), on real SQLite
and PostgreSQL: a lock wait run out is LockTimeout, a deadlock's victim TransactionRolledBack, a
database that cannot be reached (a closed port, a missing file, no pooled connection free)
DatabaseUnavailable. Each names the driver error's type and carries none of its text, not even
down its chain; an error of no such kind stays SQLAlchemy's; and the pool still replaces a
connection the server closed while it sat there."""

from __future__ import annotations

import threading
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from shared.db.engine import EngineOptions, build_engine
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.errors import (
    DatabaseFault,
    DatabaseUnavailable,
    LockTimeout,
    TransactionRolledBack,
)
from tests.support.connections import unused_port

BOUNDS = EngineOptions(pool_size=1, max_overflow=0, pool_timeout=1, lock_timeout=1)


@pytest.fixture
def sqlite(sqlite_url: str) -> Iterator[Engine]:
    engine = build_engine(sqlite_url, options=BOUNDS)
    yield engine
    engine.dispose()


@pytest.fixture
def postgres(postgres_url: str) -> Iterator[Engine]:
    engine = build_engine(postgres_url, options=BOUNDS)
    yield engine
    engine.dispose()


def _reads_nothing_of_the_driver(fault: DatabaseFault, *driver_text: str) -> None:
    assert fault.__cause__ is None and fault.__suppress_context__
    printed = "".join(traceback.format_exception(fault))
    for said in driver_text:
        assert said not in printed


def _advisory_lock(key: int) -> str:
    return f"SELECT pg_advisory_xact_lock({key})"


# --- SQLite -----------------------------------------------------------------------------------


def test_on_sqlite_a_write_lock_wait_that_runs_out_is_a_lock_timeout(sqlite: Engine) -> None:
    with writing_unit_of_work(sqlite) as holder:
        holder.execute(text("SELECT 1"))  # BEGIN IMMEDIATE: the database's one write lock
        with pytest.raises(LockTimeout) as raised, writing_unit_of_work(sqlite) as waiter:
            waiter.execute(text("SELECT 1"))
    assert raised.value.driver_error == "OperationalError"
    _reads_nothing_of_the_driver(raised.value, "database is locked")


def test_on_sqlite_a_database_file_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    engine = build_engine(f"sqlite:///{tmp_path}/no-such-directory/azurebank.db")
    try:
        with pytest.raises(DatabaseUnavailable) as raised, unit_of_work(engine) as session:
            session.execute(text("SELECT 1"))
    finally:
        engine.dispose()
    assert type(raised.value) is DatabaseUnavailable
    assert raised.value.driver_error == "OperationalError"
    _reads_nothing_of_the_driver(raised.value, "unable to open", str(tmp_path))


def test_on_sqlite_an_error_of_no_named_kind_stays_sqlalchemys(sqlite: Engine) -> None:
    with pytest.raises(SQLAlchemyError), unit_of_work(sqlite) as session:
        session.execute(text('SELECT 1 FROM "NoSuchTable"'))


# --- PostgreSQL -------------------------------------------------------------------------------


@pytest.mark.postgres
def test_on_postgresql_a_lock_wait_that_runs_out_is_a_lock_timeout(
    postgres: Engine, postgres_url: str
) -> None:
    key = uuid.uuid4().int % 2**62
    holder = build_engine(postgres_url)
    try:
        with writing_unit_of_work(holder) as holding:
            holding.execute(text(_advisory_lock(key)))
            with pytest.raises(LockTimeout) as raised, writing_unit_of_work(postgres) as waiter:
                waiter.execute(text(_advisory_lock(key)))
    finally:
        holder.dispose()
    assert raised.value.driver_error == "OperationalError"
    _reads_nothing_of_the_driver(raised.value, "lock timeout", "pg_advisory_xact_lock")


@pytest.mark.postgres
def test_on_postgresql_a_deadlocks_victim_is_a_transaction_rolled_back(postgres_url: str) -> None:
    engine = build_engine(postgres_url)  # the default lock wait outlasts the deadlock check
    first, second = (uuid.uuid4().int % 2**62 for _ in range(2))
    both_hold_one = threading.Barrier(2, timeout=10)
    raised: dict[str, BaseException | None] = {}

    def take(name: str, keys: tuple[int, int]) -> None:
        try:
            with writing_unit_of_work(engine) as session:
                session.execute(text(_advisory_lock(keys[0])))
                both_hold_one.wait()
                session.execute(text(_advisory_lock(keys[1])))
                session.commit()
            raised[name] = None
        except BaseException as exc:
            raised[name] = exc

    threads = [
        threading.Thread(target=take, args=("a", (first, second))),
        threading.Thread(target=take, args=("b", (second, first))),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    finally:
        engine.dispose()
    victims = [exc for exc in raised.values() if exc is not None]
    assert len(raised) == 2 and len(victims) == 1, raised
    (victim,) = victims
    assert isinstance(victim, TransactionRolledBack), victim
    assert victim.driver_error == "OperationalError"
    _reads_nothing_of_the_driver(victim, "deadlock detected", "pg_advisory_xact_lock")


@pytest.mark.postgres
def test_on_postgresql_a_closed_port_is_unavailable() -> None:
    port = unused_port()
    engine = build_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/azurebank")
    try:
        with pytest.raises(DatabaseUnavailable) as raised, unit_of_work(engine) as session:
            session.execute(text("SELECT 1"))
    finally:
        engine.dispose()
    assert type(raised.value) is DatabaseUnavailable
    assert raised.value.driver_error == "OperationalError"
    _reads_nothing_of_the_driver(raised.value, "refused", str(port))


@pytest.mark.postgres
def test_on_postgresql_no_pooled_connection_free_in_time_is_unavailable(postgres: Engine) -> None:
    with unit_of_work(postgres) as held:
        held.execute(text("SELECT 1"))  # the pool's one connection, taken
        with pytest.raises(DatabaseUnavailable) as raised, unit_of_work(postgres):
            pass
    assert raised.value.driver_error == "TimeoutError"
    _reads_nothing_of_the_driver(raised.value, "QueuePool", "overflow")


@pytest.mark.postgres
def test_on_postgresql_an_error_of_no_named_kind_stays_sqlalchemys(postgres: Engine) -> None:
    with pytest.raises(SQLAlchemyError), unit_of_work(postgres) as session:
        session.execute(text('SELECT 1 FROM "NoSuchTable"'))


@pytest.mark.postgres
def test_on_postgresql_a_pooled_connection_the_server_closed_is_replaced_not_a_fault(
    postgres: Engine, postgres_url: str
) -> None:
    """The pool's pre-ping meets the closed connection's error first: it stays SQLAlchemy's, so
    the pool replaces the connection and the unit runs."""
    with unit_of_work(postgres) as session:
        pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    killer = build_engine(postgres_url)
    try:
        with unit_of_work(killer) as session:
            session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        killer.dispose()
    with unit_of_work(postgres) as session:
        assert session.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid
