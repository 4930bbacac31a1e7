"""Driver errors, translated once, here, into the domain's database faults (shared/errors.py), so
no other module knows how each dialect spells each kind of failure (docs/database.md):

    LockTimeout            a lock wait ran out: PostgreSQL 55P03 (lock_timeout), SQLite "database
                           is locked" (the busy timeout), SQL Server 1222 (SET LOCK_TIMEOUT) or
                           the application lock batch's own error (money.applock_sql)
    TransactionRolledBack  the server rolled the attempt back: a deadlock (40P01, 1205) or a
                           serialization failure (40001); running it again may succeed
    DatabaseUnavailable    the database cannot take the work now: no connection (refused, gone,
                           dropped mid-statement, half-open and found by a keepalive), no answer
                           within the statement's bound (PostgreSQL 57014, the client's own
                           bound, SQL Server HYT00), no pooled connection free within
                           Database__PoolTimeoutSeconds, or SQL Server's and Azure SQL's
                           transient errors (below)

Every engine shared/db/engine.py builds raises these through SQLAlchemy's `handle_error` hook in
place of a statement's, a COMMIT's or a connect's error, once SQLAlchemy has judged the connection
(a dead one is still invalidated). The pool's checkout timeout is no driver error: `connected`,
which opens every unit of work's connection, raises it as DatabaseUnavailable, and cuts each fault
from the driver's error it was raised from, whose text (SQL, values, an address) then reaches no
traceback. Any other error stays SQLAlchemy's.

Neither psycopg nor pyodbc is imported here: errors are read by their SQLSTATE and their number,
so a host without unixODBC can still translate PostgreSQL's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from shared.errors import DatabaseFault, DatabaseUnavailable, LockTimeout, TransactionRolledBack

# The error number and text the SQL Server daily-limit batch THROWs when sp_getapplock returns
# a negative number (shared.money.applock_sql writes the batch).
MSSQL_APPLOCK_ERROR = 51050
MSSQL_APPLOCK_MESSAGE = "daily-limit lock not granted"

# SQL Server and Azure SQL errors that say the server cannot take the work now and a later try
# may succeed (Microsoft's list of transient faults for Azure SQL): 4060 cannot open the database,
# 4221 a secondary's login timed out, 40143/40197/40540 the service failed the request, 40501
# the service is busy, 40613 the database is unavailable (a serverless database resuming from
# auto-pause, a failover), 42108/42109 a paused serverless pool, 49918/49919/49920 not enough
# resources, 10928/10929 resource limits; and the TCP provider's codes for a connection the
# network dropped (10053, 10054, 10060) and the named-pipe ones (64, 233).
MSSQL_TRANSIENT_NUMBERS = frozenset(
    {
        64,
        233,
        4060,
        4221,
        10053,
        10054,
        10060,
        10928,
        10929,
        40143,
        40197,
        40501,
        40540,
        40613,
        42108,
        42109,
        49918,
        49919,
        49920,
    }
)
# The SQLSTATEs pyodbc and ODBC Driver 18 report for a connection that failed or dropped, and
# for a wait that ran out: 08001 cannot connect, 08003 not open, 08004 refused by the server,
# 08007 failed during a transaction, 08S01 the communication link failed, HYT00 the query
# timeout (Database__StatementTimeoutSeconds), HYT01 the connection timeout.
MSSQL_UNAVAILABLE_SQLSTATES = frozenset(
    {"08001", "08003", "08004", "08007", "08S01", "HYT00", "HYT01"}
)
# PostgreSQL: 57014 a statement cancelled at statement_timeout (the app cancels nothing else),
# class 08 a connection exception, 57P01-57P03 a server shutting down or starting up, 53300 too
# many connections.
_PG_UNAVAILABLE_SQLSTATES = frozenset({"57014", "57P01", "57P02", "57P03", "53300"})
# An error number in a SQL Server driver message: `... (40613) (SQLDriverConnect)`.
_MSSQL_NUMBER = re.compile(r"\((\d{1,6})\)")


def _sqlstate(error: DBAPIError) -> str | None:
    # psycopg's errors carry the SQLSTATE; compared by code so psycopg need not be imported.
    state = getattr(error.orig, "sqlstate", None)
    return state if isinstance(state, str) else None


def _mssql_sqlstate(orig: BaseException | None) -> str | None:
    """The SQLSTATE of a pyodbc error: its first argument (pyodbc raises (sqlstate, message))."""
    args = getattr(orig, "args", ())
    return args[0] if args and isinstance(args[0], str) and len(args[0]) == 5 else None


def _mssql_numbers(orig: BaseException | None) -> set[int]:
    """The error numbers a SQL Server driver message names, `(40613)`."""
    return {int(n) for n in _MSSQL_NUMBER.findall(str(orig))}


def is_mssql_transient(orig: BaseException | None) -> bool:
    """A SQL Server driver error that says the server or the network cannot take the work now:
    a transient number, or a SQLSTATE of a failed or dropped connection or of a timeout."""
    return _mssql_sqlstate(orig) in MSSQL_UNAVAILABLE_SQLSTATES or bool(
        _mssql_numbers(orig) & MSSQL_TRANSIENT_NUMBERS
    )


def _lock_timeout(error: DBAPIError, dialect: str) -> bool:
    message = str(error.orig)
    if dialect == "postgresql":
        return _sqlstate(error) == "55P03"
    if dialect == "sqlite":
        return "database is locked" in message
    if dialect == "mssql":
        # 1222: a row lock wait hit SET LOCK_TIMEOUT (Database__LockTimeoutSeconds).
        return any(
            mark in message for mark in (str(MSSQL_APPLOCK_ERROR), MSSQL_APPLOCK_MESSAGE, "(1222)")
        )
    return False


def _transient(error: DBAPIError, dialect: str) -> bool:
    if dialect == "postgresql":
        return _sqlstate(error) in {"40P01", "40001"}
    if dialect == "mssql":
        return "(1205)" in str(error.orig)
    return False


def _unavailable(error: DBAPIError, dialect: str) -> bool:
    # A connection-level failure (raised while connecting, which SQLAlchemy wraps with no
    # statement, or any driver error on a connection SQLAlchemy judged dead), a statement the
    # server or the client gave up waiting on, or one of the dialect's transient errors.
    if error.connection_invalidated:
        return True
    if isinstance(error, OperationalError | InterfaceError) and error.statement is None:
        return True
    if dialect == "postgresql":
        state = _sqlstate(error) or ""
        return state in _PG_UNAVAILABLE_SQLSTATES or state.startswith("08")
    if dialect == "mssql":
        return is_mssql_transient(error.orig)
    return False


def driver_fault(error: DBAPIError, dialect: str) -> type[DatabaseFault] | None:
    """The fault `error` is on `dialect` (the module docstring), or None for any other error."""
    if _lock_timeout(error, dialect):
        return LockTimeout
    if _transient(error, dialect):
        return TransactionRolledBack
    if _unavailable(error, dialect):
        return DatabaseUnavailable
    return None


def translate_driver_errors(engine: Engine) -> None:
    """Raise each driver error of a kind the domain names that `engine` meets as its fault."""
    event.listen(engine, "handle_error", translate_driver_error)


def translate_driver_error(context: ExceptionContext) -> None:
    """The engine's `handle_error` hook. Raising ends SQLAlchemy's chain of hooks, so a listener
    that must see the driver's error (a test counting deadlocks) is registered before it."""
    error = context.sqlalchemy_exception
    # A pre-ping's error stays SQLAlchemy's: the pool reads it to replace a dead connection.
    if context.is_pre_ping or not isinstance(error, DBAPIError):
        return
    fault = driver_fault(error, context.dialect.name)
    if fault is not None:
        raise fault(type(error).__name__)


@contextmanager
def connected(engine: Engine) -> Iterator[Connection]:
    """A connection of `engine` for one unit of work, closed after it: a checkout that found no
    pooled connection free in time is DatabaseUnavailable, and no fault raised while it is open
    carries the driver's error with it."""
    try:
        with engine.connect() as connection:
            yield connection
    except PoolTimeout:
        raise DatabaseUnavailable(PoolTimeout.__name__) from None
    except DatabaseFault as fault:
        raise fault from None


def driver_error_name(error: DatabaseFault | SQLAlchemyError) -> str:
    """The type of the driver error behind `error`, by name: all a message may say of it."""
    return error.driver_error if isinstance(error, DatabaseFault) else type(error).__name__
