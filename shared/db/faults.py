"""Driver errors, translated once, here, into the domain's faults (shared/errors.py): no other
module knows how a dialect spells a failure (docs/database.md#driver-errors: what each code means).
Read by SQLSTATE and number, importing neither psycopg nor pyodbc: a host without unixODBC works."""

from __future__ import annotations

import re

from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

from shared.errors import DatabaseFault, DatabaseUnavailable, LockTimeout, TransactionRolledBack

# What the SQL Server daily-limit batch (shared.money.applock_sql) THROWs when refused its lock.
MSSQL_APPLOCK_ERROR = 51050
MSSQL_APPLOCK_MESSAGE = "daily-limit lock not granted"

# SQL Server's errors after which a later try may succeed (Microsoft's Azure SQL transient list).
MSSQL_TRANSIENT_NUMBERS = frozenset(
    {4060, 4221, 40143, 40197, 40540, 40501, 40613}  # the database cannot take a session now
    | {42108, 42109, 49918, 49919, 49920, 10928, 10929}  # a paused pool, resource limits
    | {10053, 10054, 10060, 64, 233}  # the network dropped the connection
)
# pyodbc's SQLSTATEs for a connection that failed or dropped (08…) and for a wait that ran out.
MSSQL_UNAVAILABLE_SQLSTATES = frozenset(
    {"08001", "08003", "08004", "08007", "08S01", "HYT00", "HYT01"}
)
# PostgreSQL's SQLSTATEs of a statement past its bound or a server that cannot take it (and 08…).
_PG_UNAVAILABLE_SQLSTATES = frozenset({"57014", "57P01", "57P02", "57P03", "53300"})
# An error number in a SQL Server driver message: `... (40613) (SQLDriverConnect)`.
_MSSQL_NUMBER = re.compile(r"\((\d{1,6})\)")
# SQL Server's lock timeouts: the daily-limit batch's, and 1222 (SET LOCK_TIMEOUT ran out).
_MSSQL_LOCK_MARKS = (str(MSSQL_APPLOCK_ERROR), MSSQL_APPLOCK_MESSAGE, "(1222)")


def is_mssql_transient(orig: BaseException | None) -> bool:
    """A SQL Server driver error (pyodbc raises (sqlstate, message)) that says the server or the
    network cannot take the work now."""
    args = getattr(orig, "args", ())
    sqlstate = args[0] if args and isinstance(args[0], str) and len(args[0]) == 5 else None
    numbers = {int(n) for n in _MSSQL_NUMBER.findall(str(orig))}
    return sqlstate in MSSQL_UNAVAILABLE_SQLSTATES or bool(numbers & MSSQL_TRANSIENT_NUMBERS)


def driver_fault(error: DBAPIError, dialect: str) -> type[DatabaseFault] | None:
    """The fault `error` is on `dialect`, or None for any other error."""
    message, state = str(error.orig), getattr(error.orig, "sqlstate", None)
    state = state if isinstance(state, str) else ""
    locked = rolled_back = unavailable = False
    if dialect == "postgresql":
        locked, rolled_back = state == "55P03", state in {"40P01", "40001"}
        unavailable = state in _PG_UNAVAILABLE_SQLSTATES or state.startswith("08")
    elif dialect == "mssql":
        locked = any(mark in message for mark in _MSSQL_LOCK_MARKS)
        rolled_back, unavailable = "(1205)" in message, is_mssql_transient(error.orig)
    elif dialect == "sqlite":
        locked = "database is locked" in message
    # On every dialect, any error on a connection SQLAlchemy judged dead, and a failed connect
    # (wrapped with no statement), is unavailable too.
    connecting = isinstance(error, OperationalError | InterfaceError) and error.statement is None
    if locked:
        return LockTimeout
    if rolled_back:
        return TransactionRolledBack
    if unavailable or error.connection_invalidated or connecting:
        return DatabaseUnavailable
    return None


def translate_driver_error(context: ExceptionContext) -> None:
    """Every engine's `handle_error` hook. Raising ends SQLAlchemy's chain of hooks, so a listener
    that must see the driver's error (a test counting deadlocks) is registered before it."""
    error = context.sqlalchemy_exception
    # A pre-ping's error stays SQLAlchemy's: the pool reads it to replace a dead connection.
    if context.is_pre_ping or not isinstance(error, DBAPIError):
        return
    fault = driver_fault(error, context.dialect.name)
    if fault is not None:
        raise fault(type(error).__name__)


def driver_error_name(error: DatabaseFault | SQLAlchemyError) -> str:
    """The type of the driver error behind `error`, by name: all a message may say of it."""
    return error.driver_error if isinstance(error, DatabaseFault) else type(error).__name__
