"""The chain's tail lock (docs/architecture.md#the-audit-chain), the one place its dialect-specific
SQL lives (docs/database.md#sql-that-differs-by-dialect)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Row, Select, Update, select, update
from sqlalchemy.orm import Session

from shared.db.engine import DialectName, for_dialect
from shared.db.schema import AuditChainTail

TAIL_ID = 1
_tail = AuditChainTail.__table__


def tail_unlocked_read() -> Select[int, bytes]:
    """The tail without a lock: for `audit verify`, which only reads, and for SQLite's read
    under its writer lock."""
    return select(AuditChainTail.LastSequence, AuditChainTail.LastHash).where(
        AuditChainTail.Id == TAIL_ID
    )


def postgresql_tail_lock() -> Select[int, bytes]:
    # Held to commit; a waiter re-reads the committed row once granted (READ COMMITTED).
    return tail_unlocked_read().with_for_update()


def mssql_tail_lock() -> Select[int, bytes]:
    # SQLAlchemy drops with_for_update on mssql silently: UPDLOCK, held to the end of the
    # transaction, is the lock; ROWLOCK keeps it to the one row.
    return tail_unlocked_read().with_hint(_tail, "WITH (UPDLOCK, ROWLOCK)", dialect_name="mssql")


def sqlite_writer_lock() -> Update:
    """SQLite's one writer lock is the tail lock: a no-op write takes it (within the busy
    timeout) before the tail is read, so the read is not stale; free under BEGIN IMMEDIATE."""
    return (
        update(AuditChainTail)
        .where(AuditChainTail.Id == TAIL_ID)
        .values(LastSequence=AuditChainTail.LastSequence)
    )


def _sqlite_lock_and_read(session: Session) -> Row[int, bytes] | None:
    session.execute(sqlite_writer_lock())
    return session.execute(tail_unlocked_read()).first()


_LOCK_AND_READ: dict[DialectName, Callable[[Session], Row[int, bytes] | None]] = {
    "postgresql": lambda session: session.execute(postgresql_tail_lock()).first(),
    "mssql": lambda session: session.execute(mssql_tail_lock()).first(),
    "sqlite": _sqlite_lock_and_read,
}


def lock_and_read_tail(session: Session) -> Row[int, bytes] | None:
    """Take the tail lock (held to commit) and read the tail under it; None when it is missing."""
    return for_dialect(session, _LOCK_AND_READ, what="audit tail lock")(session)
