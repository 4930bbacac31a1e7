"""docs/database.md: no unique index disagrees with the comparison the code makes on
its columns, on any dialect. Read from each dialect's own DDL: SQL Server's and PostgreSQL's as
the migrations generate it offline, SQLite's as the migrated file stores it.

A unique index that folded case where the lookup is exact would refuse a legitimate second value
(`ABC` after `abc`); one exact where the lookup folds would admit two rows one lookup finds."""

from __future__ import annotations

import re
import sqlite3

import pytest
from sqlalchemy import PrimaryKeyConstraint, String, UniqueConstraint
from sqlalchemy.dialects import mssql

from shared.db.migrate import offline_sql
from shared.db.schema import metadata

MSSQL_URL = "mssql+pyodbc://u:p@h/db?driver=ODBC+Driver+18+for+SQL+Server"
POSTGRES_URL = "postgresql+psycopg://u@h/db"

# The comparison the code makes on each text column of a unique index (docs/database.md).
COMPARISON = {
    ("AspNetUsers", "Id"): "exact",  # the bearer check: exact_equals (shared/db/exact.py)
    ("AspNetUsers", "AzureTag"): "case-insensitive",  # through NormalizedAzureTag
    ("AspNetUsers", "NormalizedAzureTag"): "case-insensitive",  # = UPPER(:tag)
    # Identity's user name, uppercased by the writer and looked up by an uppercased input: on
    # folded values an exact and a case-insensitive comparison give the same answer.
    ("AspNetUsers", "NormalizedUserName"): "folded by the writer",
    ("IdempotencyRecords", "UserId"): "exact",
    ("IdempotencyRecords", "Operation"): "exact",
    ("IdempotencyRecords", "Key"): "exact",
}
# Exact columns whose values never differ only in case or trailing spaces, so a case-folding
# index on them refuses nothing the exact comparison would admit: ids minted as lowercase uuid4
# text (AspNetUsers.Id keeps the API's collation on SQL Server: the API's own Identity tables
# reference it), and the code's own operation names.
NEVER_DIFFER_IN_CASE = {
    ("AspNetUsers", "Id"),
    ("IdempotencyRecords", "UserId"),
    ("IdempotencyRecords", "Operation"),
}
# A case-insensitive column may carry an exact unique index where a case-folding one over a
# computed column folded from it exists as well: the folded one refuses first.
FOLDED_BY = {("AspNetUsers", "AzureTag"): "NormalizedAzureTag"}


@pytest.fixture(scope="module")
def ddl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from shared.db import migrate

    path = tmp_path_factory.mktemp("ddl") / "ddl.db"
    migrate.upgrade(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        sqlite_ddl = "\n".join(row[0] for row in rows)
    return {
        "mssql": offline_sql(MSSQL_URL),
        "postgresql": offline_sql(POSTGRES_URL),
        "sqlite": sqlite_ddl,
    }


def _definitions(ddl: str, column: str) -> list[str]:
    quoted = re.escape(f"[{column}]") + "|" + re.escape(f'"{column}"')
    return [
        line.strip()
        for line in ddl.splitlines()
        if re.search(rf"^\s*({quoted}) |ADD (COLUMN )?({quoted}) |ALTER COLUMN ({quoted}) ", line)
    ]


def _comparison(dialect: str, ddl: str, table: str, column: str) -> str:
    """How the dialect compares the column, from its DDL (the last definition wins)."""
    definitions = [d for d in _definitions(ddl, column) if table in d or not d.startswith("ALTER")]
    assert definitions, f"{table}.{column} not in the {dialect} DDL"
    last = definitions[-1]
    if re.search(r"(AS|GENERATED ALWAYS AS) \(upper\(", last):
        return "case-insensitive"  # holds folded values: a lookup folds its input alike
    if dialect == "mssql":
        # Without COLLATE, the database's default: SQL_Latin1_General_CP1_CI_AS.
        return "exact" if "_BIN2" in last else "case-insensitive"
    if dialect == "sqlite" and "COLLATE NOCASE" in last:
        return "case-insensitive"
    return "exact"


def _unique_text_columns() -> list[tuple[str, str, str]]:
    found = []
    for table in metadata().sorted_tables:
        uniques = [
            c for c in table.constraints if isinstance(c, UniqueConstraint | PrimaryKeyConstraint)
        ]
        uniques += [i for i in table.indexes if i.unique]
        for unique in uniques:
            for column in unique.columns:
                impl = column.type.dialect_impl(mssql.dialect())
                if isinstance(impl, String):
                    found.append((str(unique.name), table.name, column.name))
    return found


def test_every_text_column_of_a_unique_index_has_a_decided_comparison() -> None:
    undecided = {(t, c) for _, t, c in _unique_text_columns()} - set(COMPARISON)
    assert not undecided, f"decide and document how these compare: {sorted(undecided)}"


@pytest.mark.parametrize("dialect", ["mssql", "postgresql", "sqlite"])
def test_no_unique_index_disagrees_with_its_comparison(ddl: dict[str, str], dialect: str) -> None:
    for index, table, column in _unique_text_columns():
        assert index in ddl[dialect], f"{index} is not in the {dialect} DDL"
        wanted = COMPARISON[(table, column)]
        actual = _comparison(dialect, ddl[dialect], table, column)
        if actual == wanted or wanted == "folded by the writer":
            continue
        if wanted == "exact" and (table, column) in NEVER_DIFFER_IN_CASE:
            continue
        folded = FOLDED_BY.get((table, column))
        if wanted == "case-insensitive" and folded is not None:
            assert _comparison(dialect, ddl[dialect], table, folded) == "case-insensitive"
            continue
        pytest.fail(f"{dialect}: {index} compares {table}.{column} {actual}, the code {wanted}")


@pytest.mark.parametrize("dialect", ["mssql", "postgresql", "sqlite"])
def test_the_exact_lookups_are_exact_in_each_dialects_ddl(
    ddl: dict[str, str], dialect: str
) -> None:
    for table, column in [("IdempotencyRecords", "Key"), ("SubscriberNotices", "LeasedBy")]:
        assert _comparison(dialect, ddl[dialect], table, column) == "exact", (table, column)
