"""On SQL Server (opt-in, AZUREBANK_TEST_SQLSERVER) every connection carries its bounds from the
moment it opens: the session's lock wait (SET LOCK_TIMEOUT, Database__LockTimeoutSeconds) and
pyodbc's query timeout (Database__StatementTimeoutSeconds), and pyodbc's own pooling is off. Not
run on this machine (no SQL Server); the mapping of SQL Server's errors is pinned by
tests/unit/test_sqlserver_faults_and_bounds.py."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text

from shared.db.engine import EngineOptions, build_engine

SQLSERVER_URL = os.environ.get("AZUREBANK_TEST_SQLSERVER", "")

pytestmark = [
    pytest.mark.sqlserver,
    pytest.mark.skipif(not SQLSERVER_URL, reason="AZUREBANK_TEST_SQLSERVER is not set (opt-in)"),
]


def test_each_connection_has_its_lock_wait_and_query_timeout_and_pyodbc_does_not_pool() -> None:
    import pyodbc

    engine = build_engine(SQLSERVER_URL, options=EngineOptions(statement_timeout=7, lock_timeout=3))
    try:
        with engine.connect() as conn:
            assert conn.scalar(text("SELECT @@LOCK_TIMEOUT")) == 3000
            assert conn.connection.dbapi_connection.timeout == 7  # type: ignore[union-attr]
        assert pyodbc.pooling is False
    finally:
        engine.dispose()
