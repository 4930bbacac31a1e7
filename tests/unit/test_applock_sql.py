"""ADR-0050 D5 / docs/database.md: the application lock's SQL, pinned per dialect by compiling it
(no server, no pyodbc import). Which driver errors count as its timeout: test_driver_faults.py."""

from __future__ import annotations

import sys

import pytest
from sqlalchemy.dialects import mssql, postgresql

from shared.money.applock_sql import (
    lock_resource,
    mssql_applock_batch,
    postgresql_advisory_lock,
)

pytestmark = pytest.mark.adr("0050", "D5")


def test_sql_server_takes_sp_getapplock_for_the_transaction_and_throws_when_refused() -> None:
    """D5: Exclusive, @LockOwner='Transaction', a bounded @LockTimeout, and a batch that raises on
    a negative return (which ExecuteSqlRaw — or a driver's rowcount — cannot see)."""
    compiled = str(mssql_applock_batch().compile(dialect=mssql.dialect()))
    assert compiled == (
        "SET NOCOUNT ON;\n"
        "DECLARE @result int;\n"
        "EXEC @result = sp_getapplock @Resource = :resource, @LockMode = 'Exclusive', "
        "@LockOwner = 'Transaction', @LockTimeout = :timeout_ms;\n"
        "IF @result < 0\n"
        "BEGIN\n"
        "    DECLARE @message nvarchar(200) = CONCAT(N'daily-limit lock not granted: "
        "sp_getapplock returned ', @result);\n"
        "    THROW 51050, @message, 1;\n"
        "END;"
    )
    assert "pyodbc" not in sys.modules


def test_the_lock_is_named_daily_limit_colon_user_id() -> None:
    assert lock_resource("8d1c0b9e-user") == "daily-limit:8d1c0b9e-user"


def test_postgresql_sets_a_transaction_local_lock_timeout_then_takes_an_xact_advisory_lock() -> (
    None
):
    dialect = postgresql.dialect()
    # `SET LOCAL lock_timeout = $1` is a syntax error; set_config(..., true) is local.
    assert str(postgresql_advisory_lock().compile(dialect=dialect)) == (
        "SELECT pg_advisory_xact_lock("
        "hashtextextended('daily-limit:' || CAST(%(user_id)s AS text), 0)) "
        "FROM (SELECT set_config('lock_timeout', %(timeout)s, true)) AS lock_wait"
    )
