"""Driver errors, translated once (docs/database.md: the rest of the code does not know which
database it is on). httpx's `map_exceptions` is the model: a caller names the domain fault each kind
of driver failure becomes, and this module alone knows how each dialect spells that kind.

    DriverFault.LOCK_TIMEOUT  a lock wait ran out: PostgreSQL 55P03 (lock_timeout), SQLite
                              "database is locked" (the busy timeout), SQL Server 1222 or the
                              application lock batch's own error (money.applock_sql)
    DriverFault.TRANSIENT     the server rolled the attempt back: a deadlock (40P01, 1205) or a
                              serialization failure (40001); running it again may succeed
    DriverFault.UNAVAILABLE   no connection at all: refused, gone, or dropped mid-statement
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

# The error number and text the SQL Server daily-limit batch THROWs when sp_getapplock returns
# a negative number (shared.money.applock_sql writes the batch).
MSSQL_APPLOCK_ERROR = 51050
MSSQL_APPLOCK_MESSAGE = "daily-limit lock not granted"


class DriverFault(enum.Enum):
    LOCK_TIMEOUT = "lock timeout"
    TRANSIENT = "transient"
    UNAVAILABLE = "unavailable"


def _sqlstate(error: DBAPIError) -> str | None:
    # psycopg's errors carry the SQLSTATE; compared by code so psycopg need not be imported.
    state = getattr(error.orig, "sqlstate", None)
    return state if isinstance(state, str) else None


def _lock_timeout(error: DBAPIError, dialect: str) -> bool:
    message = str(error.orig)
    if dialect == "postgresql":
        return _sqlstate(error) == "55P03"
    if dialect == "sqlite":
        return "database is locked" in message
    if dialect == "mssql":
        # 1222: a row lock wait hit SET LOCK_TIMEOUT (not set here, but the same meaning).
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


def is_unavailable(error: BaseException) -> bool:
    """A connection-level failure, not a statement's: raised while connecting (SQLAlchemy wraps
    those with no statement), or any driver error on a connection SQLAlchemy judged dead (the
    server went away). The same on every dialect."""
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    return isinstance(error, OperationalError | InterfaceError) and error.statement is None


def driver_fault(error: BaseException, dialect: str) -> DriverFault | None:
    """What kind of driver failure `error` is on `dialect`, or None for any other error."""
    if not isinstance(error, DBAPIError):
        return None
    if _lock_timeout(error, dialect):
        return DriverFault.LOCK_TIMEOUT
    if _transient(error, dialect):
        return DriverFault.TRANSIENT
    if is_unavailable(error):
        return DriverFault.UNAVAILABLE
    return None


@contextmanager
def map_driver_faults(
    dialect: str, faults: Mapping[DriverFault, Callable[[], Exception]]
) -> Iterator[None]:
    """Raise `faults[kind]()` in place of a driver error of that kind (without the driver's
    text, which can carry SQL and bound parameters); any other error passes through."""
    try:
        yield
    except DBAPIError as exc:
        kind = driver_fault(exc, dialect)
        if kind is None or kind not in faults:
            raise
        raise faults[kind]() from None
