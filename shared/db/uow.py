"""The unit of work: one session on one connection, rolled back unless the boundary commits.
Helpers take the session and never commit: a transaction that must hold a lock, a limit check
and an audit write together is only as good as its one commit (docs/database.md#driver-errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast

from sqlalchemy import Connection, CursorResult, Delete, Engine, Update, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker

from shared.db.engine import DialectName, default_lock_wait, for_dialect, lock_timeout_statement
from shared.errors import (
    CommitOutcomeUnknown,
    DatabaseFault,
    DatabaseUnavailable,
    TransactionRolledBack,
)

SqliteBegin = Literal["DEFERRED", "IMMEDIATE"]
# Closing a session (leaving its `with`) rolls back whatever was not committed.
_session_on = sessionmaker(expire_on_commit=False)


def unit_of_work(engine: Engine) -> AbstractContextManager[Session]:
    """Yield a session whose work is discarded unless `commit_unit(session)` is called: a
    reading unit of work, or one whose writes need no right to write held from its start."""
    return _unit_of_work(engine, "DEFERRED", None)


def commit_unit(
    session: Session, *, unknown: type[CommitOutcomeUnknown] = CommitOutcomeUnknown
) -> None:
    """Commit the unit's work: DatabaseUnavailable from the COMMIT itself, not from the flush
    before it nor the server's TransactionRolledBack, is `unknown` (docs/database.md says why)."""
    session.flush()
    try:
        session.commit()
    except TransactionRolledBack:
        raise
    except DatabaseUnavailable as lost:
        raise unknown(lost.driver_error) from None


@contextmanager
def _unit_of_work(
    engine: Engine, sqlite_begin: SqliteBegin, wait_seconds: int | None, server_waits: bool = True
) -> Iterator[Session]:
    waits, default = for_dialect(engine, _WAITS, what="unit of work"), default_lock_wait(engine)
    # Set on a server only when it differs from the connection's own (the engine's default).
    own_wait = wait_seconds if server_waits and wait_seconds != default else None
    with connected(engine) as connection:
        waits.before_begin(connection, sqlite_begin, wait_seconds)
        try:
            with _session_on(bind=connection) as session:
                if own_wait is not None:
                    waits.set_own(session, own_wait)
                yield session
        finally:
            # After the session closed (its work committed or rolled back), never inside it.
            if own_wait is not None:
                waits.set_back(connection, default)


@contextmanager
def connected(engine: Engine) -> Iterator[Connection]:
    """A connection of `engine` for one unit of work: a pool checkout that timed out is
    DatabaseUnavailable, and no fault carries the driver's error (SQL, values, an address)."""
    try:
        with engine.connect() as connection:
            yield connection
    except PoolTimeout:
        raise DatabaseUnavailable(PoolTimeout.__name__) from None
    except DatabaseFault as fault:
        raise fault from None


def _sqlite_begin(connection: Connection, begin: SqliteBegin, wait_seconds: int | None) -> None:
    # IMMEDIATE takes the database's write lock at BEGIN, waiting at most the busy timeout:
    # that is SQLite's application lock (docs/database.md).
    if wait_seconds is not None:
        connection.exec_driver_sql(f"PRAGMA busy_timeout={int(wait_seconds) * 1000}")
    connection.info["sqlite_begin"] = f"BEGIN {begin}"
    # End the transaction the PRAGMA autobegan, so the session's own begin runs BEGIN IMMEDIATE.
    connection.rollback()


def _postgresql_own_wait(session: Session, seconds: int) -> None:
    # The transaction's setting: it ends with the transaction.
    wait = {"wait": f"{seconds * 1000}ms"}
    session.execute(text("SELECT set_config('lock_timeout', :wait, true)"), wait)


def _mssql_own_wait(session: Session, seconds: int) -> None:
    # The session's setting: set back on the way out (_restore_lock_waits).
    session.connection().exec_driver_sql(lock_timeout_statement(seconds))


def _restore_lock_waits(connection: Connection, seconds: int) -> None:
    # SET is not transactional on SQL Server; the commit only ends SQLAlchemy's autobegin.
    if connection.invalidated or connection.closed:
        return
    try:
        connection.exec_driver_sql(lock_timeout_statement(seconds))
        connection.commit()
    except (DatabaseFault, DBAPIError):
        # Never back in the pool with another unit's wait, nor masking what the unit raised.
        connection.invalidate()


def writing_unit_of_work(
    engine: Engine, *, wait_seconds: int | None = None, caller_bounds_locks: bool = False
) -> AbstractContextManager[Session]:
    """A unit of work holding the right to write from its first statement (SQLite's BEGIN
    IMMEDIATE: no read-then-write meets a stale snapshot), every wait at most `wait_seconds` (None:
    the engine's default); with `caller_bounds_locks`, the caller's first statement sets it."""
    return _unit_of_work(engine, "IMMEDIATE", wait_seconds, server_waits=not caller_bounds_locks)


def one_read(engine: Engine) -> AbstractContextManager[Session]:
    """A unit of work for ONE read statement, its own snapshot on every dialect; on PostgreSQL
    outside a transaction (docs/database.md#connections-and-their-bounds says why)."""
    return for_dialect(engine, _WAITS, what="unit of work").one_read(engine)


@contextmanager
def _autocommit_read(engine: Engine) -> Iterator[Session]:
    with connected(engine) as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        with _session_on(bind=connection) as session:
            yield session


@dataclass(frozen=True)
class _DialectWaits:
    """A unit of work's steps on one dialect: ready the connection, set a lock wait other than the
    engine's default, set the default back where it outlives the transaction, open `one_read`."""

    before_begin: Callable[[Connection, SqliteBegin, int | None], None]
    set_own: Callable[[Session, int], None]
    set_back: Callable[[Connection, int], None]
    one_read: Callable[[Engine], AbstractContextManager[Session]]


def _nothing(*_args: object) -> None:
    """A step this dialect does not take."""


_WAITS: dict[DialectName, _DialectWaits] = {
    "sqlite": _DialectWaits(_sqlite_begin, _nothing, _nothing, unit_of_work),
    "postgresql": _DialectWaits(_nothing, _postgresql_own_wait, _nothing, _autocommit_read),
    "mssql": _DialectWaits(_nothing, _mssql_own_wait, _restore_lock_waits, unit_of_work),
}


def rows_matched(
    session: Session, statement: Update | Delete, params: Mapping[str, Any] | None = None
) -> int:
    """A conditional write (an UPDATE or DELETE whose WHERE is the guard: a concurrency token, a
    state, a limit) run in the session's transaction: how many rows its WHERE matched."""
    return int(cast(CursorResult[Any], session.execute(statement, params)).rowcount)
