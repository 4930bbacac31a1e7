"""The opt-in SQL Server ring (docs/database.md): runs only when AZUREBANK_TEST_SQLSERVER holds a
SQLAlchemy URL of a database this suite may create and drop tables in. SQL Server is opt-in, so
its skip stays a skip under CI=true (the PostgreSQL and Azurite rings fail instead)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, inspect, text

from shared.db import migrate
from shared.db.engine import build_engine

SQLSERVER_URL = os.environ.get("AZUREBANK_TEST_SQLSERVER", "")

pytestmark = [
    pytest.mark.sqlserver,
    pytest.mark.skipif(not SQLSERVER_URL, reason="AZUREBANK_TEST_SQLSERVER is not set (opt-in)"),
]

TABLES = {
    "AspNetUsers",
    "Accounts",
    "Transactions",
    "TransferAuthorizations",
    "AuditEvents",
    "AuditChainTail",
    "SubscriberNotices",
    "IdempotencyRecords",
}


@pytest.fixture
def sqlserver() -> Iterator[Engine]:
    engine = build_engine(SQLSERVER_URL)
    migrate.downgrade(SQLSERVER_URL)
    yield engine
    engine.dispose()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) & TABLES


def test_migrations_go_up_down_and_up_again_on_sql_server(sqlserver: Engine) -> None:
    assert _tables(sqlserver) == set()
    migrate.upgrade(SQLSERVER_URL)
    assert _tables(sqlserver) == TABLES
    migrate.downgrade(SQLSERVER_URL)
    assert _tables(sqlserver) == set()
    migrate.upgrade(SQLSERVER_URL)
    assert _tables(sqlserver) == TABLES


def test_the_owed_notices_index_is_filtered_on_sql_server(sqlserver: Engine) -> None:
    migrate.upgrade(SQLSERVER_URL)
    with sqlserver.connect() as conn:
        where = conn.scalar(
            text(
                "SELECT filter_definition FROM sys.indexes "
                "WHERE name = 'IX_SubscriberNotices_Owed_CreatedAt'"
            )
        )
    assert where is not None and "DeliveredAt" in where and "NULL" in where.upper()
