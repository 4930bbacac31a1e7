"""DESIGN §3, §6: the SQL Server DDL, generated offline for the mssql dialect, carries the
lease check and the filtered index over owed rows (DESIGN §6) — with no server, and without
pyodbc, which cannot even be imported where unixODBC is missing (FACTS)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shared.db.migrate import offline_sql

ROOT = Path(__file__).resolve().parents[2]
MSSQL_URL = "mssql+pyodbc://u:p@h/db?driver=ODBC+Driver+18+for+SQL+Server"


@pytest.fixture(scope="module")
def ddl() -> str:
    return offline_sql(MSSQL_URL)


def test_the_lease_check_is_in_the_sql_server_ddl(ddl: str) -> None:
    create = ddl[ddl.index("CREATE TABLE [SubscriberNotices]") :].split("GO", 1)[0]
    assert "CONSTRAINT [CK_SubscriberNotices_Lease] CHECK" in create


def test_the_owed_notices_index_is_filtered_on_sql_server(ddl: str) -> None:
    index = next(
        line for line in ddl.splitlines() if "[IX_SubscriberNotices_Owed_CreatedAt]" in line
    )
    assert index.startswith("CREATE INDEX [IX_SubscriberNotices_Owed_CreatedAt]")
    assert "ON [SubscriberNotices] ([CreatedAt]) WHERE [DeliveredAt] IS NULL" in index


def test_money_is_numeric_18_4_on_sql_server(ddl: str) -> None:
    assert "[Balance] NUMERIC(18, 4) NOT NULL" in ddl
    assert "[Amount] NUMERIC(18, 4) NOT NULL" in ddl


def test_the_offline_ddl_is_returned_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    offline_sql(MSSQL_URL)
    assert "CREATE TABLE" not in capsys.readouterr().out


def test_generating_the_sql_server_ddl_never_imports_pyodbc() -> None:
    # A fresh interpreter in which `import pyodbc` fails, as it does without unixODBC.
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["pyodbc"] = None  # any import of it now raises ImportError
        from shared.db.migrate import offline_sql
        ddl = offline_sql({MSSQL_URL!r})
        assert "WHERE [DeliveredAt] IS NULL" in ddl
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
