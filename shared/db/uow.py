"""The unit of work: one session on one connection, rolled back unless the boundary commits.

Helpers take the session and never commit: a transaction that must hold a lock, a
limit check and an audit write together is only as good as its one commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Literal

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

SqliteBegin = Literal["DEFERRED", "IMMEDIATE"]


def unit_of_work(engine: Engine) -> AbstractContextManager[Session]:
    """Yield a session whose work is discarded unless `session.commit()` is called: a reading
    unit of work, or one whose writes need no right to write held from its start."""
    return _unit_of_work(engine, sqlite_begin="DEFERRED", sqlite_busy_timeout_ms=None)


@contextmanager
def _unit_of_work(
    engine: Engine, *, sqlite_begin: SqliteBegin, sqlite_busy_timeout_ms: int | None
) -> Iterator[Session]:
    # On SQLite, IMMEDIATE takes the database's write lock at BEGIN, waiting at most the busy
    # timeout: that is SQLite's application lock (docs/database.md).
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            if sqlite_busy_timeout_ms is not None:
                connection.exec_driver_sql(f"PRAGMA busy_timeout={int(sqlite_busy_timeout_ms)}")
            connection.info["sqlite_begin"] = f"BEGIN {sqlite_begin}"
            # The PRAGMA above autobegan a transaction on the SQLAlchemy side; end it so the
            # session's own begin is the one that runs BEGIN IMMEDIATE.
            connection.rollback()
        with _session_on(connection) as session:
            yield session


@contextmanager
def _session_on(connection: Connection) -> Iterator[Session]:
    session = Session(bind=connection, expire_on_commit=False, autoflush=True)
    try:
        yield session
    finally:
        session.close()  # rolls back whatever was not committed


def writing_unit_of_work(
    engine: Engine, *, wait_seconds: int | None = None
) -> AbstractContextManager[Session]:
    """A unit of work that will write: it holds the right to write from its first statement,
    waiting at most `wait_seconds` for it (the engine's default wait when None).

    On SQLite that is BEGIN IMMEDIATE under a busy timeout (the database's one writer lock, so a
    read-then-write never meets a stale snapshot and never fails to upgrade); the servers take
    row locks as the statements ask, so there it is a plain unit of work."""
    return _unit_of_work(
        engine,
        sqlite_begin="IMMEDIATE",
        sqlite_busy_timeout_ms=None if wait_seconds is None else wait_seconds * 1000,
    )


def one_read(engine: Engine) -> AbstractContextManager[Session]:
    """A unit of work for ONE read statement, which is its own consistent snapshot on every
    dialect. On PostgreSQL it runs outside a transaction: psycopg sends BEGIN, and the closing
    ROLLBACK, each as a round trip of its own, which would be two of the three round trips the
    read costs. Elsewhere it is a plain unit of work (ODBC and SQLite begin implicitly, with no
    round trip, and leaving SQL Server's isolation level would cost one to restore it)."""
    if engine.dialect.name != "postgresql":
        return unit_of_work(engine)
    return _autocommit_read(engine)


@contextmanager
def _autocommit_read(engine: Engine) -> Iterator[Session]:
    with (
        engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection,
        _session_on(connection) as session,
    ):
        yield session
