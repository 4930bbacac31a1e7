"""SQL Server's bounds on every wait, as pyodbc and ODBC Driver 18 take them
(docs/database.md#connections-and-their-bounds, docs/settings.md#waits-on-the-database): the
login timeout, the driver's keepalive, the query timeout, the session's LOCK_TIMEOUT, and the
bounded retry of a connect the server refused with a transient error.

pyodbc is imported only by an engine for a SQL Server URL, and its own pooling is turned off
first, as SQLAlchemy's documentation for mssql+pyodbc advises: otherwise a connection SQLAlchemy
closes goes back to the ODBC driver manager's pool, and a later connect can be handed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from shared.db.faults import is_mssql_transient

T = TypeVar("T")
log = logging.getLogger("azurebank.db")

# Connect attempts in all, and the pause before each retry: a refused connect costs a request at
# most three login timeouts and three seconds before it answers 503.
CONNECT_ATTEMPTS = 3
CONNECT_BACKOFF_SECONDS = (1.0, 2.0)


def turn_off_pyodbc_pooling() -> None:
    """Before the first connect: pyodbc reads `pooling` when it allocates its ODBC environment."""
    import pyodbc

    pyodbc.pooling = False


def odbc_keywords(*, keepalive: int) -> dict[str, str]:
    """Connection-string keywords of ODBC Driver 18 (17.4 and later): idle seconds before the
    first keepalive probe, and seconds between probes."""
    return {"KeepAlive": str(keepalive), "KeepAliveInterval": str(max(1, keepalive // 3))}


def lock_timeout_statement(seconds: int) -> str:
    """T-SQL: the session's lock wait, in milliseconds (SET takes no parameter)."""
    return f"SET LOCK_TIMEOUT {int(seconds) * 1000}"


def bound_session(dbapi_connection: Any, *, statement_timeout: int, lock_timeout: int) -> None:
    """Set a new pyodbc connection's query timeout and its session's lock wait."""
    dbapi_connection.timeout = statement_timeout
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(lock_timeout_statement(lock_timeout))
    finally:
        cursor.close()


def connect_with_retry(
    connect: Callable[[], T],
    *,
    attempts: int = CONNECT_ATTEMPTS,
    backoff: tuple[float, ...] = CONNECT_BACKOFF_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`connect()`, tried again after a transient refusal (shared.db.faults) at most `attempts`
    times in all; any other error, and the last transient one, is raised as it came."""
    for attempt in range(1, attempts + 1):
        try:
            return connect()
        except Exception as exc:
            if attempt == attempts or not is_mssql_transient(exc):
                raise
            # By type only: the driver's text names the server.
            log.warning(
                "SQL Server refused a connection for now (%s); retrying (attempt %d of %d)",
                type(exc).__name__,
                attempt,
                attempts,
            )
            sleep(backoff[min(attempt, len(backoff)) - 1])
    raise AssertionError("unreachable")  # pragma: no cover
