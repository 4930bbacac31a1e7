"""SQL Server's and Azure SQL's transient errors are DATABASE_UNAVAILABLE (503 with Retry-After),
never a 500, and a connect they refuse is tried again a bounded number of times; the SQL Server
engine bounds its login, its statements and its lock waits, keeps connections alive, and leaves
pooling to SQLAlchemy alone.

No SQL Server here: each error is built exactly as pyodbc raises it (the exception class its
SQLSTATE maps to, args `(sqlstate, message)`, the message `[SQLSTATE] [driver]text (number)
(function)`) and wrapped as SQLAlchemy wraps it; that tests the mapping, not a database."""

from __future__ import annotations

import ctypes.util
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError

from shared.db.engine import (
    EngineOptions,
    build_engine,
    connect_with_retry,
    lock_timeout_statement,
)
from shared.db.faults import (
    MSSQL_TRANSIENT_NUMBERS,
    MSSQL_UNAVAILABLE_SQLSTATES,
    driver_fault,
)
from shared.errors import DatabaseUnavailable, LockTimeout, TransactionRolledBack
from tests.support.services import service_missing
from tests.support.tsql_parse import parse_problem

DRIVER = "[Microsoft][ODBC Driver 18 for SQL Server]"


@pytest.fixture(scope="module")
def pyodbc() -> Any:
    # pyodbc needs unixODBC's libodbc.so.2 (scripts/test.sh installs it as root when missing).
    if ctypes.util.find_library("odbc") is None:
        service_missing("unixODBC (libodbc.so.2, for pyodbc)")
    import pyodbc as module

    return module


def _pyodbc_error(pyodbc: Any, sqlstate: str, text: str, number: int, function: str) -> Any:
    """An error as pyodbc raises it: the class its SQLSTATE maps to (pyodbc's errors.cpp)."""
    if sqlstate.startswith(("08", "HYT")):
        cls = pyodbc.OperationalError
    elif sqlstate.startswith("42"):
        cls = pyodbc.ProgrammingError
    else:
        cls = pyodbc.Error
    return cls(sqlstate, f"[{sqlstate}] {DRIVER}{text} ({number}) ({function})")


def _wrapped(pyodbc: Any, orig: Any, statement: str | None = "SELECT 1") -> DBAPIError:
    """As SQLAlchemy wraps a driver error: the same-named class of its own."""
    return DBAPIError.instance(statement, {}, orig, pyodbc.Error)


# (SQLSTATE, message as the driver words it) for each of Azure SQL's transient numbers.
TRANSIENT: dict[int, tuple[str, str]] = {
    40613: (
        "42000",
        "[SQL Server]Database 'azurebank' on server 'srv' is not currently available.  Please "
        "retry the connection later.",
    ),
    40197: ("42000", "[SQL Server]The service has encountered an error processing your request."),
    40501: ("42000", "[SQL Server]The service is currently busy. Retry the request after 10 s."),
    49918: ("42000", "[SQL Server]Cannot process request. Not enough resources to process it."),
    49919: ("42000", "[SQL Server]Cannot process create or update request. Too many operations."),
    49920: ("42000", "[SQL Server]Cannot process request. Too many operations in progress."),
    4060: ("42000", '[SQL Server]Cannot open database "azurebank" requested by the login.'),
    4221: ("42000", "[SQL Server]Login to read-secondary failed due to long wait."),
    10928: ("42000", "[SQL Server]Resource ID : 1. The request limit for the database is 60."),
    10929: ("42000", "[SQL Server]Resource ID : 1. The min guarantee is 0, max limit is 60."),
    40143: ("42000", "[SQL Server]The service has encountered an error processing your request."),
    40540: ("42000", "[SQL Server]The service has encountered an error processing your request."),
    42108: ("42000", "[SQL Server]Can not connect to the SQL pool since it is paused."),
    42109: ("42000", "[SQL Server]The SQL pool is warming up. Please try again."),
    10053: ("08S01", "TCP Provider: An established connection was aborted by the software."),
    10054: ("08S01", "TCP Provider: Error code 0x2746"),
    10060: ("08001", "TCP Provider: A connection attempt failed (timed out)."),
    64: ("08S01", "TCP Provider: The specified network name is no longer available."),
    233: ("08S01", "Shared Memory Provider: No process is on the other end of the pipe."),
}
# The SQLSTATEs of a failed or dropped connection, and of the driver's timeouts.
STATES: dict[str, str] = {
    "08S01": "Communication link failure",
    "08001": "Client unable to establish connection",
    "08003": "Connection not open",
    "08004": "Server rejected the connection",
    "08007": "Connection failure during transaction",
    "HYT00": "Query timeout expired",
    "HYT01": "Login timeout expired",
}


def test_every_transient_number_and_state_has_a_case_here() -> None:
    assert set(TRANSIENT) == MSSQL_TRANSIENT_NUMBERS
    assert set(STATES) == MSSQL_UNAVAILABLE_SQLSTATES


@pytest.mark.parametrize("number", sorted(TRANSIENT))
@pytest.mark.parametrize("statement", ["SELECT 1", None], ids=["mid-statement", "connecting"])
def test_each_transient_sql_server_error_is_unavailable(
    pyodbc: Any, number: int, statement: str | None
) -> None:
    sqlstate, text = TRANSIENT[number]
    orig = _pyodbc_error(pyodbc, sqlstate, text, number, "SQLExecDirectW")
    assert driver_fault(_wrapped(pyodbc, orig, statement), "mssql") is DatabaseUnavailable


@pytest.mark.parametrize("sqlstate", sorted(STATES))
def test_each_dropped_connection_or_timeout_state_is_unavailable(
    pyodbc: Any, sqlstate: str
) -> None:
    orig = _pyodbc_error(pyodbc, sqlstate, STATES[sqlstate], 0, "SQLExecDirectW")
    assert driver_fault(_wrapped(pyodbc, orig), "mssql") is DatabaseUnavailable


def test_a_statements_own_error_and_the_lock_errors_are_not_unavailable(pyodbc: Any) -> None:
    missing = _pyodbc_error(
        pyodbc, "42S02", "[SQL Server]Invalid object name 'Nope'.", 208, "SQLExecDirectW"
    )
    assert driver_fault(_wrapped(pyodbc, missing), "mssql") is None
    unique = _pyodbc_error(
        pyodbc, "23000", "[SQL Server]Cannot insert duplicate key row.", 2601, "SQLExecDirectW"
    )
    assert driver_fault(_wrapped(pyodbc, unique), "mssql") is None
    lock = _pyodbc_error(
        pyodbc, "HY000", "[SQL Server]Lock request time out period exceeded.", 1222, "SQLExecute"
    )
    assert driver_fault(_wrapped(pyodbc, lock), "mssql") is LockTimeout
    deadlock = _pyodbc_error(
        pyodbc, "40001", "[SQL Server]Transaction was deadlocked.", 1205, "SQLExecDirectW"
    )
    assert driver_fault(_wrapped(pyodbc, deadlock), "mssql") is TransactionRolledBack


def test_a_connect_refused_while_the_database_resumes_is_tried_again_and_succeeds(
    pyodbc: Any,
) -> None:
    resuming = _pyodbc_error(pyodbc, "42000", TRANSIENT[40613][1], 40613, "SQLDriverConnect")
    outcomes: list[Any] = [resuming, resuming, "connection"]
    slept: list[float] = []

    def connect() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    assert connect_with_retry(connect, sleep=slept.append) == "connection"
    assert slept == [1.0, 2.0]


def test_the_connect_retry_is_bounded_and_raises_the_last_refusal(pyodbc: Any) -> None:
    busy = _pyodbc_error(pyodbc, "42000", TRANSIENT[40501][1], 40501, "SQLDriverConnect")
    calls: list[int] = []

    def connect() -> str:
        calls.append(1)
        raise busy

    with pytest.raises(type(busy)) as raised:
        connect_with_retry(connect, sleep=lambda _s: None)
    assert raised.value is busy
    assert len(calls) == 3


def test_a_login_failure_is_not_retried(pyodbc: Any) -> None:
    denied = pyodbc.InterfaceError(
        "28000",
        f"[28000] {DRIVER}[SQL Server]Login failed for user 'x'. (18456) (SQLDriverConnect)",
    )
    calls: list[int] = []

    def connect() -> str:
        calls.append(1)
        raise denied

    with pytest.raises(type(denied)):
        connect_with_retry(connect, sleep=lambda _s: None)
    assert calls == [1]


def test_the_lock_wait_statement_is_t_sql_in_milliseconds() -> None:
    assert lock_timeout_statement(5) == "SET LOCK_TIMEOUT 5000"
    assert parse_problem(lock_timeout_statement(5)) is None


class _Stop(Exception):
    pass


def test_a_sql_server_engine_bounds_its_login_keeps_alive_and_leaves_pooling_to_sqlalchemy(
    pyodbc: Any,
) -> None:
    pyodbc.pooling = True
    options = EngineOptions(
        pool_size=3, max_overflow=2, pool_timeout=4, connect_timeout=6, keepalive=12
    )
    engine = build_engine("mssql+pyodbc://sa:dev-only@sql.example/azurebank", options=options)
    seen: list[tuple[list[Any], dict[str, Any]]] = []

    @event.listens_for(engine, "do_connect")
    def _record(_d: Any, _r: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
        seen.append((list(cargs), dict(cparams)))
        raise _Stop

    try:
        assert pyodbc.pooling is False
        with pytest.raises(_Stop):
            engine.connect()
        [(cargs, cparams)] = seen
        assert cparams["timeout"] == 6  # pyodbc's login timeout
        assert "KeepAlive=12;KeepAliveInterval=4" in cargs[0]
        pool: Any = engine.pool
        assert (pool.size(), pool._max_overflow, pool._timeout) == (3, 2, 4)
    finally:
        engine.dispose()
