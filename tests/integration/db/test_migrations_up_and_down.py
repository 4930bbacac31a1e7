"""One schema, migrated up and down by Alembic on SQLite and PostgreSQL, and
the migration builds exactly what shared/db/schema/ declares."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, insert, inspect
from sqlalchemy.exc import IntegrityError

from shared.db import migrate
from shared.db.engine import build_engine, dispose_engines
from shared.db.schema import AspNetUser, SubscriberNotice, metadata
from tests.support.services import sqlserver_param

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


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), sqlserver_param()]
)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema yet: a new SQLite file, or a PostgreSQL or SQL Server database
    of this test's own taken down to base (the fixture hands it over migrated)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    server = "fresh_sqlserver_url" if request.param == "sqlserver" else "fresh_postgres_url"
    url = str(request.getfixturevalue(server))
    migrate.downgrade(url)
    yield url


@pytest.fixture
def url_engine(empty_db_url: str) -> Iterator[tuple[str, Engine]]:
    engine = build_engine(empty_db_url)
    yield empty_db_url, engine
    engine.dispose()
    dispose_engines()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def test_migrations_go_up_down_and_up_again(url_engine: tuple[str, Engine]) -> None:
    url, engine = url_engine
    assert _tables(engine) == set()

    migrate.upgrade(url)
    assert _tables(engine) == TABLES
    assert _revision(engine) is not None

    migrate.downgrade(url)
    assert _tables(engine) == set()
    assert _revision(engine) is None

    migrate.upgrade(url)
    assert _tables(engine) == TABLES


def test_the_migrated_database_matches_the_declared_schema(url_engine: tuple[str, Engine]) -> None:
    url, engine = url_engine
    migrate.upgrade(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": False})
        diff = compare_metadata(ctx, metadata())
    assert diff == []


def test_the_owed_notices_index_is_partial_and_the_lease_check_is_named(
    url_engine: tuple[str, Engine],
) -> None:
    url, engine = url_engine
    migrate.upgrade(url)
    inspector = inspect(engine)
    owed = next(
        ix
        for ix in inspector.get_indexes("SubscriberNotices")
        if ix["name"] == "IX_SubscriberNotices_Owed_CreatedAt"
    )
    assert owed["column_names"] == ["CreatedAt"]
    where = str(owed.get("dialect_options", {}).get(f"{engine.dialect.name}_where", ""))
    assert "DeliveredAt" in where and "NULL" in where.upper()
    checks = {c["name"] for c in inspector.get_check_constraints("SubscriberNotices")}
    assert "CK_SubscriberNotices_Lease" in checks


def test_the_lease_check_refuses_a_half_set_lease(url_engine: tuple[str, Engine]) -> None:
    # ADR-0048 D2: LeasedUntil and LeasedBy are set together or not at all.
    url, engine = url_engine
    migrate.upgrade(url)
    # Bound values, so each dialect writes its own booleans and uuids.
    with engine.begin() as conn:
        conn.execute(
            insert(AspNetUser.__table__).values(
                Id="u1",
                EmailConfirmed=False,
                PhoneNumberConfirmed=False,
                TwoFactorEnabled=False,
                LockoutEnabled=True,
                AccessFailedCount=0,
                AzureTag="tag1",
                PinAccessFailedCount=0,
            )
        )
    with pytest.raises(IntegrityError, match="CK_SubscriberNotices_Lease"), engine.begin() as conn:
        conn.execute(
            insert(SubscriberNotice.__table__).values(
                Id=uuid.UUID(int=1),
                UserId="u1",
                Kind="PinEnrolled",
                CreatedAt=datetime.now(UTC),
                LeasedBy="verb/host/1/deadbeef",
            )
        )
