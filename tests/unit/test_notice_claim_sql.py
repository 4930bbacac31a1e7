"""The claim's SQL per dialect, pinned by compiling it (no server, no driver).

The SQL Server text is compiled on `sqlalchemy.dialects.mssql.dialect()`, which needs no pyodbc:
the T-SQL is pinned on every machine even though the SQL Server suite is opt-in.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.dialects import mssql, postgresql, sqlite

from shared.notices.claim_sql import MSSQL_CLAIM_HINT, claim_statement

NOW = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


def _sql(dialect_name: str, dialect: object) -> str:
    statement = claim_statement(
        dialect_name,
        runner="api/h/1/00000000",
        now=NOW,
        lease_until=NOW + timedelta(minutes=2),
        limit=100,
    )
    return " ".join(str(statement.compile(dialect=dialect)).split())  # type: ignore[arg-type]


def test_the_sql_server_claim_reads_past_locked_rows_under_update_locks_in_one_update() -> None:
    sql = _sql("mssql", mssql.dialect())
    assert sql.startswith(
        "UPDATE [SubscriberNotices] SET [LeasedUntil]=:lease_until, [LeasedBy]=:LeasedBy"
    )
    assert "OUTPUT inserted.[Id]" in sql
    assert (
        "WHERE [SubscriberNotices].[Id] IN (SELECT TOP __[POSTCOMPILE_param_1] free.[Id] "
        "FROM [SubscriberNotices] AS free WITH (UPDLOCK, READPAST, ROWLOCK) "
        "WHERE free.[DeliveredAt] IS NULL AND (free.[LeasedUntil] IS NULL OR "
        "free.[LeasedUntil] <= :now) ORDER BY free.[CreatedAt], free.[Id])"
    ) in sql
    assert MSSQL_CLAIM_HINT == "WITH (UPDLOCK, READPAST, ROWLOCK)"
    # with_for_update renders nothing on mssql; the hint is the only lock clause.
    assert "FOR UPDATE" not in sql


def test_the_postgresql_claim_picks_once_for_update_skip_locked_then_updates() -> None:
    sql = _sql("postgresql", postgresql.dialect())
    assert sql.startswith(
        'WITH picked AS MATERIALIZED (SELECT free."Id" AS "Id" FROM "SubscriberNotices" AS free '
        'WHERE free."DeliveredAt" IS NULL AND (free."LeasedUntil" IS NULL OR free."LeasedUntil" <= '
    )
    assert (
        'ORDER BY free."CreatedAt", free."Id" LIMIT %(param_1)s::INTEGER FOR UPDATE SKIP LOCKED)'
        in sql
    )
    assert 'UPDATE "SubscriberNotices" SET "LeasedUntil"=' in sql
    assert 'WHERE "SubscriberNotices"."Id" IN (SELECT picked."Id" FROM picked)' in sql
    assert sql.endswith('RETURNING "SubscriberNotices"."Id"')


def test_the_sqlite_claim_needs_no_lock_clause() -> None:
    sql = _sql("sqlite", sqlite.dialect())
    assert "FOR UPDATE" not in sql and "UPDLOCK" not in sql
    assert (
        'WHERE "SubscriberNotices"."Id" IN (SELECT free."Id" FROM "SubscriberNotices" AS free'
        in sql
    )
    assert 'RETURNING "Id"' in sql


def test_a_dialect_without_a_claim_is_refused_rather_than_claiming_without_a_lock() -> None:
    with pytest.raises(ValueError, match="no claim statement for dialect 'oracle'"):
        claim_statement("oracle", runner="r", now=NOW, lease_until=NOW, limit=1)
