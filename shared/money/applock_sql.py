"""ADR-0050 D5: the per-user application lock that serialises one user's external transfers, and
the ONE module holding its SQL, one function per dialect (docs/database.md).

Two transfers from two accounts of one user to two payees share no row, so only a lock on the
user (taken before the sum and before any account row; only the key's claim comes first) stops
both from reading the same committed day and both committing. The wait is bounded by
`DailyLimit__LockTimeoutSeconds`; a timeout is a fault (503 LOCK_TIMEOUT), never the 422.

    SQL Server  sp_getapplock on 'daily-limit:{userId}', Exclusive, owned by the transaction, with
                @LockTimeout; the batch THROWs on a negative return, which the driver would not see
    PostgreSQL  one statement: a transaction-local lock_timeout, then pg_advisory_xact_lock on a
                64-bit hash of 'daily-limit:{userId}' (released at commit or rollback)
    SQLite      one writer at a time: the unit of work BEGINs IMMEDIATE with the busy timeout set
                to the lock timeout, so the database's write lock is the application lock
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import Engine, TextClause, text
from sqlalchemy.orm import Session

# The error number and text the SQL Server batch throws when sp_getapplock returns < 0 (−1
# timeout, −2 cancelled, −3 deadlock victim, −999 bad parameter); shared.db.faults reads them.
from shared.db.dialects import DialectName, for_dialect
from shared.db.faults import MSSQL_APPLOCK_ERROR, MSSQL_APPLOCK_MESSAGE
from shared.db.uow import writing_unit_of_work

LOCK_RESOURCE_PREFIX = "daily-limit:"


def lock_resource(user_id: str) -> str:
    """The lock's name, as the .NET API's TransferService.DailyLimitLockSql names it."""
    return f"{LOCK_RESOURCE_PREFIX}{user_id}"


def mssql_applock_batch() -> TextClause:
    """SQL Server: one batch that takes the lock or raises (ExecuteSqlRaw cannot see a return)."""
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
    """PostgreSQL, one statement: a transaction-local lock_timeout, then a transaction-scoped
    advisory lock on a 64-bit hash of the resource name. `SET LOCAL lock_timeout = $1` is a
    syntax error; set_config(…, true) is the transaction-local form that takes a bound value.
    The timeout is set in a FROM subquery, which PostgreSQL evaluates (and, being
    volatile, never flattens) before the select list waits for the lock; one statement instead
    of two saves every transfer a round trip before the sum."""
    return text(
        "SELECT pg_advisory_xact_lock("
        "hashtextextended('daily-limit:' || CAST(:user_id AS text), 0)) "
        "FROM (SELECT set_config('lock_timeout', :timeout, true)) AS lock_wait"
    )


def _take_mssql(session: Session, user_id: str, timeout_seconds: int) -> None:
    session.execute(
        mssql_applock_batch(),
        {"resource": lock_resource(user_id), "timeout_ms": timeout_seconds * 1000},
    )


def _take_postgresql(session: Session, user_id: str, timeout_seconds: int) -> None:
    session.execute(
        postgresql_advisory_lock(), {"timeout": f"{timeout_seconds * 1000}ms", "user_id": user_id}
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
    """Take the user's lock, before the transfer's first read (after the key's claim, which
    touches only the key's row). On SQLite the lock was taken by BEGIN IMMEDIATE already (see
    DailyLimitLock.unit_of_work)."""
    take = for_dialect(session, _TAKE, what="application lock")
    take(session, user_id, timeout_seconds)


@dataclass(frozen=True)
class DailyLimitLock:
    """The user's lock for one external transfer: its unit of work (on SQLite, BEGIN IMMEDIATE
    under the lock's wait, which is the lock) and the lock itself, taken right after the key's
    claim and before any read."""

    timeout_seconds: int

    def unit_of_work(self, engine: Engine) -> AbstractContextManager[Session]:
        # SQLite: BEGIN IMMEDIATE under the lock's wait is the application lock (docs/database.md).
        # The servers: the lock's own statement bounds its wait (PostgreSQL's lock_timeout
        # then stays for the transaction, SQL Server's @LockTimeout is the lock's alone); the
        # key's claim before it waits the connection's own bound, Database__LockTimeoutSeconds.
        return writing_unit_of_work(
            engine, wait_seconds=self.timeout_seconds, caller_bounds_locks=True
        )

    def take(self, session: Session, user_id: str) -> None:
        take_daily_limit_lock(session, user_id, self.timeout_seconds)
