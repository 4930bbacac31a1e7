"""Driver errors are translated once, in shared.db.faults, per dialect: a lock wait that
ran out (ADR-0050 D5: the 503 LOCK_TIMEOUT, never the 422), a race the server rolled back (the
money retry's), and a database that cannot be reached; every other error is none of them. Each
kind reaching its caller as its domain fault, on real databases:
tests/integration/faults/test_driver_errors_reach_callers_as_faults.py."""

from __future__ import annotations

import sqlite3

import psycopg.errors
import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from shared.db.faults import driver_fault
from shared.errors import DatabaseUnavailable, LockTimeout, TransactionRolledBack


def _wrapped(orig: BaseException, statement: str | None = "SELECT 1") -> DBAPIError:
    return OperationalError(statement, {}, orig)


MSSQL_APPLOCK_REFUSED = Exception(
    "('42000', '[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]daily-limit "
    "lock not granted: sp_getapplock returned -1 (51050) (SQLExecDirectW)')"
)


@pytest.mark.adr("0050", "D5")
def test_lock_timeouts_are_recognised_per_dialect_and_nothing_else_is() -> None:
    lock = LockTimeout
    assert driver_fault(_wrapped(psycopg.errors.LockNotAvailable()), "postgresql") is lock
    assert driver_fault(_wrapped(psycopg.errors.DeadlockDetected()), "postgresql") is not lock
    assert driver_fault(_wrapped(sqlite3.OperationalError("database is locked")), "sqlite") is lock
    assert driver_fault(_wrapped(sqlite3.OperationalError("no such table: x")), "sqlite") is None
    assert driver_fault(_wrapped(MSSQL_APPLOCK_REFUSED), "mssql") is lock
    assert driver_fault(_wrapped(Exception("Invalid object name (208)")), "mssql") is None


def test_deadlocks_and_serialization_failures_are_transactions_rolled_back() -> None:
    back = TransactionRolledBack
    assert driver_fault(_wrapped(psycopg.errors.DeadlockDetected()), "postgresql") is back
    assert driver_fault(_wrapped(psycopg.errors.SerializationFailure()), "postgresql") is back
    victim = Exception("Transaction was deadlocked ... Rerun the transaction. (1205)")
    assert driver_fault(_wrapped(victim), "mssql") is back


def test_a_failure_to_connect_is_unavailable_and_a_statements_own_error_is_not() -> None:
    refused = sqlite3.OperationalError("unable to open database file")
    assert driver_fault(_wrapped(refused, statement=None), "sqlite") is DatabaseUnavailable
    assert driver_fault(IntegrityError("INSERT", {}, Exception("unique")), "sqlite") is None
