"""ADR-0050 D5: the application lock's SQL Server batch, read for what it does — with no server
and no pyodbc (the SQL Server suite runs it when AZUREBANK_TEST_SQLSERVER is set; sqlglot cannot
parse the batch, tests/support/tsql_parse.py). Which driver errors count as its timeout:
test_driver_faults.py. The PostgreSQL statement runs on PostgreSQL:
tests/integration/money/test_application_lock_on_postgresql.py."""

from __future__ import annotations

import re
import sys

import pytest
from sqlalchemy.dialects import mssql

from shared.money.applock_sql import lock_resource, mssql_applock_batch

pytestmark = pytest.mark.adr("0050", "D5")


def _batch() -> str:
    return " ".join(str(mssql_applock_batch().compile(dialect=mssql.dialect())).split())


def test_sql_server_asks_sp_getapplock_for_an_exclusive_lock_owned_by_the_transaction() -> None:
    """Exclusive, owned by the caller's transaction (released at its commit or rollback), on the
    bound resource, waiting at most the bound timeout; the return value is kept."""
    call = re.search(r"EXEC (@\w+) = sp_getapplock (.*?);", _batch())
    assert call is not None
    arguments = dict(re.findall(r"(@\w+) = ('[^']*'|:\w+)", call.group(2)))
    assert arguments == {
        "@Resource": ":resource",
        "@LockMode": "'Exclusive'",
        "@LockOwner": "'Transaction'",
        "@LockTimeout": ":timeout_ms",
    }
    assert "pyodbc" not in sys.modules


def test_sql_server_raises_when_the_lock_is_not_granted_and_leaves_the_transaction_alone() -> None:
    """sp_getapplock answers a refusal (timeout, deadlock) with a negative return, not an error,
    which a driver's rowcount cannot see: the batch raises on it. It neither begins, commits nor
    rolls back, since the lock belongs to the caller's transaction."""
    batch = _batch()
    result = re.search(r"EXEC (@\w+) = sp_getapplock", batch).group(1)  # type: ignore[union-attr]
    assert re.search(rf"IF {result} < 0 BEGIN .*THROW \d+, .*END;", batch)
    words = set(batch.upper().replace(";", " ").split())
    assert not words & {"COMMIT", "ROLLBACK", "TRAN", "TRANSACTION", "XACT_ABORT"}


def test_the_lock_is_named_daily_limit_colon_user_id() -> None:
    assert lock_resource("8d1c0b9e-user") == "daily-limit:8d1c0b9e-user"
