"""Least privilege for the app's identity (`azurebank db grant`: docs/cli.md#azurebank-db-grant),
in one transaction, creating nothing twice. An identifier cannot be bound, so names are checked
and quoted into the text; tables are qualified by the current schema on PostgreSQL."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, TextClause, text

from shared.db.engine import DialectName, for_dialect
from shared.db.schema import AuditChainTail, AuditEvent, metadata

READ_WRITE = ("SELECT", "INSERT", "UPDATE", "DELETE")
# The migrations' own record: the readiness check reads it, only `azurebank db upgrade` writes it.
VERSION_TABLE = "alembic_version"
# The audit chain is appended to, never rewritten (the tail row is the migration's, moved by
# UPDATE): the app's identity cannot change or delete a sealed row even if it wanted to.
_NARROWER: Mapping[str, tuple[str, ...]] = {
    AuditEvent.__tablename__: ("SELECT", "INSERT"),
    AuditChainTail.__tablename__: ("SELECT", "UPDATE"),
    VERSION_TABLE: ("SELECT",),
}
# An Entra display name or user principal name, or a PostgreSQL role: letters, digits and
# `. _ @ -`, at most 128 characters (SQL Server's sysname). Quoted as an identifier all the same.
_PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")


@dataclass(frozen=True)
class GrantReport:
    principal: str
    dialect: str
    created: bool  # False: the user (role) already existed
    privileges: dict[str, tuple[str, ...]]


def valid_principal(name: str) -> bool:
    """Whether `name` is a principal this module will quote into a statement."""
    return _PRINCIPAL.fullmatch(name) is not None


def table_privileges() -> dict[str, tuple[str, ...]]:
    """Each of the app's tables and the privileges its identity gets on it, in creation order."""
    names = [t.name for t in metadata().sorted_tables] + [VERSION_TABLE]
    return {name: _NARROWER.get(name, READ_WRITE) for name in names}


def _checked(name: str) -> str:
    if not valid_principal(name):
        raise ValueError(f"not a principal name: {name!r}")
    return name


def _bracketed(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


def _double_quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def mssql_user_exists() -> TextClause:
    return text("SELECT DATABASE_PRINCIPAL_ID(:name) AS principal_id")


def mssql_create_user(name: str, object_id: uuid.UUID | None = None) -> TextClause:
    """The contained user of an Entra principal; with its object id, bound to that one principal
    without a directory look-up."""
    clause = f" WITH OBJECT_ID = '{object_id}'" if object_id is not None else ""
    return text(f"CREATE USER {_bracketed(_checked(name))} FROM EXTERNAL PROVIDER{clause}")


def mssql_grants(name: str) -> list[TextClause]:
    """One GRANT per table (a GRANT on a table parses, and names exactly what is granted)."""
    grantee = _bracketed(_checked(name))
    return [
        text(f"GRANT {', '.join(privileges)} ON {_bracketed(table)} TO {grantee}")
        for table, privileges in table_privileges().items()
    ]


def postgresql_create_role(name: str) -> str:
    """A login role with no password: how it authenticates is the server's configuration."""
    return f"CREATE ROLE {_double_quoted(_checked(name))} LOGIN"


def postgresql_grants(name: str, database: str, schema: str) -> list[str]:
    """CONNECT, USAGE on the schema, the table privileges and the sequences' USAGE."""
    grantee = _double_quoted(_checked(name))
    in_schema = _double_quoted(schema)
    return [
        f"GRANT CONNECT ON DATABASE {_double_quoted(database)} TO {grantee}",
        f"GRANT USAGE ON SCHEMA {in_schema} TO {grantee}",
        *(
            f"GRANT {', '.join(privileges)} ON TABLE {in_schema}.{_double_quoted(table)} "
            f"TO {grantee}"
            for table, privileges in table_privileges().items()
        ),
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {in_schema} TO {grantee}",
    ]


def _grant_mssql(conn: Connection, principal: str, object_id: uuid.UUID | None) -> bool:
    exists = conn.execute(mssql_user_exists(), {"name": principal}).scalar()
    if exists is None:
        conn.execute(mssql_create_user(principal, object_id))
    for grant in mssql_grants(principal):
        conn.execute(grant)
    return exists is None


def _grant_postgresql(conn: Connection, principal: str, object_id: uuid.UUID | None) -> bool:
    if object_id is not None:
        raise ValueError("an object id names an Entra principal: SQL Server only")
    exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :name"), {"name": principal})
    created = exists.first() is None
    if created:
        conn.exec_driver_sql(postgresql_create_role(principal))
    # Where the migrations created the tables (the same search path).
    where = text("SELECT current_database() AS database, current_schema() AS schema")
    database, schema = conn.execute(where).one()
    for grant in postgresql_grants(principal, database, schema):
        conn.exec_driver_sql(grant)
    return created


_GRANTS: dict[DialectName, Callable[[Connection, str, uuid.UUID | None], bool]] = {
    "mssql": _grant_mssql,
    "postgresql": _grant_postgresql,
}


def grant_app_identity(
    engine: Engine, principal: str, *, object_id: uuid.UUID | None = None
) -> GrantReport:
    """Create `principal`'s user unless it exists, then grant it the app's table privileges."""
    grant = for_dialect(engine, _GRANTS, what="database user to grant")
    with engine.begin() as conn:
        created = grant(conn, principal, object_id)
    return GrantReport(principal, engine.dialect.name, created, table_privileges())
