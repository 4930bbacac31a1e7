"""The unit of work: one session on one connection, rolled back unless the boundary commits.

Helpers take the session and never commit (DESIGN §2): a transaction that must hold a lock, a
limit check and an audit write together is only as good as its one commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from sqlalchemy import Engine
from sqlalchemy.orm import Session

SqliteBegin = Literal["DEFERRED", "IMMEDIATE"]


@contextmanager
def unit_of_work(
    engine: Engine,
    *,
    sqlite_begin: SqliteBegin = "DEFERRED",
    sqlite_busy_timeout_ms: int | None = None,
) -> Iterator[Session]:
    """Yield a session whose work is discarded unless `session.commit()` is called.

    On SQLite, `sqlite_begin="IMMEDIATE"` takes the database's write lock at BEGIN, waiting at
    most `sqlite_busy_timeout_ms`: that is SQLite's application lock (DESIGN §3).
    """
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            if sqlite_busy_timeout_ms is not None:
                connection.exec_driver_sql(f"PRAGMA busy_timeout={int(sqlite_busy_timeout_ms)}")
            connection.info["sqlite_begin"] = f"BEGIN {sqlite_begin}"
            # The PRAGMA above autobegan a transaction on the SQLAlchemy side; end it so the
            # session's own begin is the one that runs BEGIN IMMEDIATE.
            connection.rollback()
        session = Session(bind=connection, expire_on_commit=False, autoflush=True)
        try:
            yield session
        finally:
            session.close()  # rolls back whatever was not committed
