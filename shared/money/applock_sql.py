"""The per-user lock serialising one user's external transfers, its SQL per dialect
(docs/decisions.md#adr-0050-d5). A timeout is a fault (503 LOCK_TIMEOUT), never the 422."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import Engine, TextClause, text
from sqlalchemy.orm import Session

from shared.db.engine import DialectName, for_dialect
from shared.db.faults import MSSQL_APPLOCK_ERROR, MSSQL_APPLOCK_MESSAGE
from shared.db.uow import writing_unit_of_work


def lock_resource(user_id: str) -> str:
    """The lock's name, as the .NET API's TransferService.DailyLimitLockSql names it."""
    return f"daily-limit:{user_id}"


def mssql_applock_batch() -> TextClause:
    """SQL Server: one batch that takes the lock or raises, since a driver cannot see the return
    (< 0: timeout, cancelled, deadlock victim); shared.db.faults knows what it throws."""
    return text(
        "SET NOCOUNT ON;\n"
        "DECLARE @result int;\n"
        "EXEC @result = sp_getapplock @Resource = :resource, @LockMode = 'Exclusive', "
        "@LockOwner = 'Transaction', @LockTimeout = :timeout_ms;\n"
        "IF @result < 0\n"
        "BEGIN\n"
        "    DECLARE @message nvarchar(200) = CONCAT("
        f"N'{MSSQL_APPLOCK_MESSAGE}: sp_getapplock returned ', @result);\n"
        f"    THROW {MSSQL_APPLOCK_ERROR}, @message, 1;\n"
        "END;"
    )


def postgresql_advisory_lock() -> TextClause:
    """PostgreSQL in one statement (a round trip fewer): the FROM subquery (volatile, never
    flattened) sets the transaction's lock_timeout before the select list waits for the lock."""
    return text(
        "SELECT pg_advisory_xact_lock("
        "hashtextextended(CAST(:resource AS text), 0)) "
        "FROM (SELECT set_config('lock_timeout', :timeout, true)) AS lock_wait"
    )


def _take_mssql(session: Session, user_id: str, timeout_seconds: int) -> None:
    session.execute(
        mssql_applock_batch(),
        {"resource": lock_resource(user_id), "timeout_ms": timeout_seconds * 1000},
    )


def _take_postgresql(session: Session, user_id: str, timeout_seconds: int) -> None:
    session.execute(
        postgresql_advisory_lock(),
        {"timeout": f"{timeout_seconds * 1000}ms", "resource": lock_resource(user_id)},
    )


def _take_sqlite(session: Session, _user_id: str, _timeout_seconds: int) -> None:
    # Start the transaction now, so BEGIN IMMEDIATE (the lock) precedes the sum.
    session.connection()


_TAKE: dict[DialectName, Callable[[Session, str, int], None]] = {
    "postgresql": _take_postgresql,
    "mssql": _take_mssql,
    "sqlite": _take_sqlite,
}


def take_daily_limit_lock(session: Session, user_id: str, timeout_seconds: int) -> None:
    """Take the user's lock, after the key's claim and before the transfer's first read."""
    for_dialect(session, _TAKE, what="application lock")(session, user_id, timeout_seconds)


@dataclass(frozen=True)
class DailyLimitLock:
    timeout_seconds: int

    def unit_of_work(self, engine: Engine) -> AbstractContextManager[Session]:
        # SQLite: BEGIN IMMEDIATE under the lock's wait is the lock. The servers: the lock's own
        # statement bounds its wait; the key's claim before it waits the connection's bound.
        wait = self.timeout_seconds
        return writing_unit_of_work(engine, wait_seconds=wait, caller_bounds_locks=True)

    def take(self, session: Session, user_id: str) -> None:
        take_daily_limit_lock(session, user_id, self.timeout_seconds)
