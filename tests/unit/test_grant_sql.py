"""The app identity's grant on SQL Server, offline: the user's exact T-SQL (sqlglot cannot parse
CREATE USER, so this pins it), identifiers quoted, names refused before any SQL, and privileges
that read and write the app's tables and never reach DDL."""

from __future__ import annotations

import uuid

import pytest

from shared.db import grant_sql
from shared.db.schema import metadata
from tests.support.tsql_parse import parse_problem, tsql_text

OBJECT_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")


def test_the_user_of_an_entra_principal_is_created_from_the_external_provider() -> None:
    assert tsql_text(grant_sql.mssql_create_user("id-azurebank-app", OBJECT_ID)) == (
        "CREATE USER [id-azurebank-app] FROM EXTERNAL PROVIDER "
        "WITH OBJECT_ID = '0f0e0d0c-0b0a-0908-0706-050403020100'"
    )
    assert tsql_text(grant_sql.mssql_create_user("app@contoso.example")) == (
        "CREATE USER [app@contoso.example] FROM EXTERNAL PROVIDER"
    )


def test_each_table_grant_parses_as_t_sql_and_names_its_table() -> None:
    grants = [tsql_text(g) for g in grant_sql.mssql_grants("id-azurebank-app")]
    assert grants[0].startswith("GRANT SELECT, INSERT, UPDATE, DELETE ON [")
    assert "GRANT SELECT, INSERT ON [AuditEvents] TO [id-azurebank-app]" in grants
    assert "GRANT SELECT ON [alembic_version] TO [id-azurebank-app]" in grants
    for grant in grants:
        assert parse_problem(grant) is None, grant


def test_the_app_identity_reads_and_writes_every_app_table_and_gets_no_ddl() -> None:
    privileges = grant_sql.table_privileges()
    assert set(privileges) == {t.name for t in metadata().tables.values()} | {"alembic_version"}
    granted = {p for ps in privileges.values() for p in ps}
    assert granted == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    # The chain is appended to, never rewritten; the schema's version is the migrations' own.
    assert privileges["AuditEvents"] == ("SELECT", "INSERT")
    assert privileges["AuditChainTail"] == ("SELECT", "UPDATE")
    assert privileges["alembic_version"] == ("SELECT",)


@pytest.mark.parametrize(
    "name", ["", "x]; DROP TABLE y; --", 'a"b', "-leading", "a b", "n" * 129, "ünïcode"]
)
def test_a_principal_name_outside_the_safe_set_is_refused_before_any_sql(name: str) -> None:
    assert not grant_sql.valid_principal(name)
    with pytest.raises(ValueError):
        grant_sql.mssql_create_user(name)
    with pytest.raises(ValueError):
        grant_sql.postgresql_create_role(name)


def test_postgresql_grants_qualify_each_table_by_the_schema_read_first() -> None:
    statements = grant_sql.postgresql_grants("azurebank_app", "bank", "app")
    assert statements[0] == 'GRANT CONNECT ON DATABASE "bank" TO "azurebank_app"'
    assert 'GRANT SELECT, INSERT ON TABLE "app"."AuditEvents" TO "azurebank_app"' in statements
    assert statements[-1] == (
        'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "app" TO "azurebank_app"'
    )
