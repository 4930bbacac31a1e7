"""docs/database.md: the SQL Server code compiles and generates its T-SQL without pyodbc,
which cannot even be imported where unixODBC is missing, and importing the engine module builds
no Entra credential. Each check runs in a fresh interpreter, so another test's import cannot
hide one here."""

from __future__ import annotations

import textwrap

from tests.support.checkout import run_python

MSSQL_URL = "mssql+pyodbc://u:p@h/db?driver=ODBC+Driver+18+for+SQL+Server"


def _fresh(code: str) -> str:
    """What `code` prints in a fresh interpreter on this checkout's code (it must succeed)."""
    done = run_python("-c", textwrap.dedent(code), check=True)
    return done.stdout.strip()


def test_compiling_the_t_sql_claim_imports_no_odbc_driver() -> None:
    printed = _fresh(
        """
        import sys
        from datetime import UTC, datetime, timedelta
        from sqlalchemy.dialects import mssql
        from shared.notices.claim_sql import claim_statement
        now = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
        statement = claim_statement(
            "mssql", runner="api/h/1/00000000", now=now,
            lease_until=now + timedelta(minutes=2), limit=100,
        )
        str(statement.compile(dialect=mssql.dialect()))
        print("pyodbc" in sys.modules)
        """
    )
    assert printed == "False"


def test_compiling_the_transfer_batch_imports_no_sql_server_driver() -> None:
    printed = _fresh(
        """
        import sys
        from sqlalchemy.dialects import mssql
        from shared.money.transfer_write_sql import mssql_transfer_write
        str(mssql_transfer_write().compile(dialect=mssql.dialect()))
        print("pyodbc" in sys.modules)
        """
    )
    assert printed == "False"


def test_generating_the_sql_server_ddl_never_imports_pyodbc() -> None:
    # `import pyodbc` fails in this interpreter, as it does without unixODBC.
    printed = _fresh(
        f"""
        import sys
        sys.modules["pyodbc"] = None  # any import of it now raises ImportError
        from shared.db.migrate import offline_sql
        ddl = offline_sql({MSSQL_URL!r})
        assert "WHERE [DeliveredAt] IS NULL" in ddl
        print("ok")
        """
    )
    assert printed == "ok"


def test_importing_the_engine_module_builds_no_credential() -> None:
    printed = _fresh(
        """
        import sys, shared.db.engine
        print("azure.identity" in sys.modules)
        """
    )
    assert printed == "False"
