"""The unit of work: one session on one connection, rolled back unless the boundary commits.

Helpers take the session and never commit (DESIGN §2): a transaction that must hold a lock, a
limit check and an audit write together is only as good as its one commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Literal

from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from shared.db.engine import default_lock_wait
from shared.db.mssql_bounds import lock_timeout_statement

SqliteBegin = Literal["DEFERRED", "IMMEDIATE"]


def unit_of_work(engine: Engine) -> AbstractContextManager[Session]:
    """Yield a session whose work is discarded unless `session.commit()` is called: a reading
    unit of work, or one whose writes need no right to write held from its start."""
    return _unit_of_work(engine, sqlite_begin="DEFERRED", wait_seconds=None)


@contextmanager
def _unit_of_work(
    engine: Engine,
    *,
    sqlite_begin: SqliteBegin,
    wait_seconds: int | None,
    server_waits: bool = True,
) -> Iterator[Session]:
    # On SQLite, IMMEDIATE takes the database's write lock at BEGIN, waiting at most the busy
    # timeout: that is SQLite's application lock (DESIGN §3).
    dialect = engine.dialect.name
    bound = (
        server_waits
        and dialect != "sqlite"
        and wait_seconds is not None
        and wait_seconds != default_lock_wait(engine)
    )
    with engine.connect() as connection:
        if dialect == "sqlite":
            if wait_seconds is not None:
                connection.exec_driver_sql(f"PRAGMA busy_timeout={int(wait_seconds) * 1000}")
            connection.info["sqlite_begin"] = f"BEGIN {sqlite_begin}"
            # The PRAGMA above autobegan a transaction on the SQLAlchemy side; end it so the
            # session's own begin is the one that runs BEGIN IMMEDIATE.
            connection.rollback()
        try:
            with _session_on(connection) as session:
                if bound:
                    assert wait_seconds is not None
                    _bound_lock_waits(session, dialect, wait_seconds)
                yield session
        finally:
            # After the session closed (its work committed or rolled back), never inside it.
            if bound and dialect == "mssql":
                _restore_lock_waits(connection, default_lock_wait(engine))


def _bound_lock_waits(session: Session, dialect: str, seconds: int) -> None:
    """Every lock wait of this unit of work at most `seconds` (the connection's own bound, set
    when it opened, is the engine's default; shared.db.engine). PostgreSQL's setting is the
    transaction's and ends with it; SQL Server's is the session's, restored on the way out."""
    if dialect == "postgresql":
        session.execute(
            text("SELECT set_config('lock_timeout', :wait, true)"), {"wait": f"{seconds * 1000}ms"}
        )
    elif dialect == "mssql":
        session.connection().exec_driver_sql(lock_timeout_statement(seconds))


def _restore_lock_waits(connection: Connection, seconds: int) -> None:
    # SET is not transactional on SQL Server; the commit only ends SQLAlchemy's autobegin.
    if connection.invalidated or connection.closed:
        return
    connection.exec_driver_sql(lock_timeout_statement(seconds))
    connection.commit()


@contextmanager
def _session_on(connection: Connection) -> Iterator[Session]:
    session = Session(bind=connection, expire_on_commit=False, autoflush=True)
    try:
        yield session
    finally:
        session.close()  # rolls back whatever was not committed


def writing_unit_of_work(
    engine: Engine, *, wait_seconds: int | None = None, caller_bounds_locks: bool = False
) -> AbstractContextManager[Session]:
    """A unit of work that will write: it holds the right to write from its first statement,
    and waits at most `wait_seconds` for it and for every lock it takes (the engine's default,
    Database__LockTimeoutSeconds, when None).

    On SQLite that is BEGIN IMMEDIATE under a busy timeout (the database's one writer lock, so a
    read-then-write never meets a stale snapshot and never fails to upgrade); the servers take
    row locks as the statements ask, and a wait other than the engine's default costs one
    statement to set. `caller_bounds_locks`: the caller's first statement sets the servers'
    lock wait itself (the daily-limit lock does, saving that round trip), so only SQLite's is
    set here."""
    return _unit_of_work(
        engine,
        sqlite_begin="IMMEDIATE",
        wait_seconds=wait_seconds,
        server_waits=not caller_bounds_locks,
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
