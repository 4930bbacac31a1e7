"""Least privilege for the app's identity in its database, and the ONE module holding that SQL,
one form per dialect: the app's identity reads and writes the app's tables and takes the daily
limit's application lock, and nothing more: no DDL. Migrations run as the deploying identity.

    SQL Server  CREATE USER [name] FROM EXTERNAL PROVIDER (an Entra principal: the app's managed
                identity), unless the user exists; then GRANT on each of the app's tables.
                sp_getapplock needs nothing more: its permission is membership in `public`,
                which every database user has.
    PostgreSQL  CREATE ROLE "name" LOGIN unless the role exists; CONNECT on the database, USAGE
                on the tables' schema, the same table privileges, USAGE and SELECT on the
                schema's sequences.
                Advisory locks (pg_advisory_xact_lock) need no grant.
    SQLite      no users: nothing to grant.

Table names are the schema's own (shared/db/schema.py). On SQL Server they are unqualified: the
grant runs as the identity that ran the migrations, so they resolve where the migrations created
them; on PostgreSQL they are qualified by that identity's current schema, read first.

The PostgreSQL role and grants are text for the driver (exec_driver_sql), with no bound value:
an identifier cannot be bound, and they have no SQL Server form to parse (their SQL Server
counterparts, above, are parsed offline as T-SQL by the suite).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

from sqlalchemy import TextClause, text

from shared.db.schema import AuditChainTail, AuditEvent, Base

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


def valid_principal(name: str) -> bool:
    """Whether `name` is a principal this module will quote into a statement."""
    return _PRINCIPAL.fullmatch(name) is not None


def table_privileges() -> dict[str, tuple[str, ...]]:
    """Each of the app's tables and the privileges its identity gets on it, in creation order."""
    names = [t.name for t in Base.metadata.sorted_tables] + [VERSION_TABLE]
    return {name: _NARROWER.get(name, READ_WRITE) for name in names}


def _checked(name: str) -> str:
    if not valid_principal(name):
        raise ValueError(f"not a principal name: {name!r}")
    return name


def _bracketed(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


def _double_quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- SQL Server ---------------------------------------------------------------------------------


def mssql_user_exists() -> TextClause:
    """One row: the principal's id in this database, or NULL."""
    return text("SELECT DATABASE_PRINCIPAL_ID(:name) AS principal_id")


def mssql_create_user(name: str, object_id: uuid.UUID | None = None) -> TextClause:
    """The contained user of an Entra principal. With its object id (a managed identity's
    principal id), the server need not look the name up in the directory, and the user is bound
    to that one principal even if another shares its display name."""
    clause = f" WITH OBJECT_ID = '{object_id}'" if object_id is not None else ""
    return text(f"CREATE USER {_bracketed(_checked(name))} FROM EXTERNAL PROVIDER{clause}")


def mssql_grants(name: str) -> list[TextClause]:
    """One GRANT per table (a GRANT on a table parses, and names exactly what is granted)."""
    grantee = _bracketed(_checked(name))
    return [
        text(f"GRANT {', '.join(privileges)} ON {_bracketed(table)} TO {grantee}")
        for table, privileges in table_privileges().items()
    ]


# --- PostgreSQL ---------------------------------------------------------------------------------


def postgresql_role_exists() -> TextClause:
    """One row when the role exists."""
    return text("SELECT 1 FROM pg_roles WHERE rolname = :name")


def postgresql_create_role(name: str) -> str:
    """A login role with no password and no attribute beyond LOGIN: how it authenticates (an
    Entra principal on Azure, trust or a password elsewhere) is the server's configuration."""
    return f"CREATE ROLE {_double_quoted(_checked(name))} LOGIN"


def postgresql_where() -> TextClause:
    """One row: the database and the schema the migrations created the tables in (the grant
    runs as the identity that ran them, with the same search path)."""
    return text("SELECT current_database() AS database, current_schema() AS schema")


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
