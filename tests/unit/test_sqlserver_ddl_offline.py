"""The SQL Server DDL, generated offline for the mssql dialect, carries the
lease check and the filtered index over owed rows (shared/db/schema/) — with no server, and
without pyodbc, which cannot even be imported where unixODBC is missing."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mssql

from shared.db.migrate import offline_sql
from tests.support import tsql_parse

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


def test_every_statement_of_the_sql_server_ddl_parses_as_t_sql(ddl: str) -> None:
    """The migrations' SQL Server DDL parses with sqlglot's T-SQL dialect, statement by
    statement (tests/support/tsql_parse.py counts them with the executed statements)."""
    assert tsql_parse.check_ddl(ddl) >= 20


def _final_definition(ddl: str, table: str, column: str) -> str:
    """The column's definition as the script leaves it: its line in CREATE TABLE, or the last
    ALTER TABLE that adds or alters it."""
    found = ""
    for statement in ddl.split("\nGO\n"):
        lines = [line.strip() for line in statement.splitlines() if line.strip()]
        if any(line.startswith(f"CREATE TABLE [{table}]") for line in lines):
            found = next((line for line in lines if line.startswith(f"[{column}] ")), found)
        for line in lines:
            if line.startswith(
                (
                    f"ALTER TABLE [{table}] ADD [{column}] ",
                    f"ALTER TABLE [{table}] ALTER COLUMN [{column}] ",
                )
            ):
                found = line
    assert found, f"{table}.{column} is not in the DDL"
    return found


@pytest.mark.parametrize(
    ("table", "column"), [("IdempotencyRecords", "Key"), ("SubscriberNotices", "LeasedBy")]
)
def test_the_exact_columns_are_binary_on_sql_server(ddl: str, table: str, column: str) -> None:
    """docs/database.md: the Idempotency-Key and the runner name compare case-sensitively there
    too (the database's default collation would not)."""
    assert "COLLATE Latin1_General_100_BIN2" in _final_definition(ddl, table, column)


def test_the_normalized_tag_is_upper_of_the_tag_computed_on_sql_server(ddl: str) -> None:
    definition = _final_definition(ddl, "AspNetUsers", "NormalizedAzureTag")
    assert "[NormalizedAzureTag] AS (upper([AzureTag])) PERSISTED" in definition
    assert "UNIQUE ([NormalizedAzureTag])" in ddl


def test_every_text_column_is_nvarchar_on_sql_server(ddl: str) -> None:
    """EF's nvarchar: a VARCHAR would compare in the code page, TEXT/NTEXT are deprecated. The one
    exception is Alembic's own alembic_version table."""
    from shared.db.schema import metadata

    mssql_dialect = mssql.dialect()
    for table in metadata().sorted_tables:
        for column in table.columns:
            if column.computed is not None:
                # UPPER of an NVARCHAR column is NVARCHAR.
                assert "AzureTag" in str(column.computed.sqltext), column
                continue
            rendered = column.type.compile(dialect=mssql_dialect)
            if isinstance(column.type.dialect_impl(mssql_dialect), sa.String):
                assert rendered.startswith("NVARCHAR"), f"{table.name}.{column.name}: {rendered}"
    ours = "\n".join(s for s in ddl.split("\nGO\n") if "alembic_version" not in s)
    assert not re.search(r"(?<!N)VARCHAR|\bN?TEXT\b|\bN?CHAR\(", ours)
