"""`azurebank db grant`: give the app's identity its database user and the table privileges of
shared/db/grant_sql.py, in one transaction, as the identity that ran the migrations. Running it
again creates nothing twice and grants the same privileges."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import Engine

from shared.db import grant_sql


class GrantUnsupported(Exception):
    """The database has no users to grant (SQLite), or the option does not apply to it."""


@dataclass(frozen=True)
class GrantReport:
    principal: str
    dialect: str
    created: bool  # False: the user (role) already existed
    privileges: dict[str, tuple[str, ...]]


def grant_app_identity(
    engine: Engine, principal: str, *, object_id: uuid.UUID | None = None
) -> GrantReport:
    """Create `principal`'s user unless it exists, then grant it the app's table privileges."""
    dialect = engine.dialect.name
    if dialect == "mssql":
        created = _grant_mssql(engine, principal, object_id)
    elif dialect == "postgresql":
        if object_id is not None:
            raise GrantUnsupported("--object-id names an Entra principal: SQL Server only")
        created = _grant_postgresql(engine, principal)
    else:
        raise GrantUnsupported(f"{dialect} has no database users to grant")
    return GrantReport(principal, dialect, created, grant_sql.table_privileges())


def _grant_mssql(engine: Engine, principal: str, object_id: uuid.UUID | None) -> bool:
    with engine.begin() as conn:
        exists = conn.execute(grant_sql.mssql_user_exists(), {"name": principal}).scalar()
        if exists is None:
            conn.execute(grant_sql.mssql_create_user(principal, object_id))
        for grant in grant_sql.mssql_grants(principal):
            conn.execute(grant)
    return exists is None


def _grant_postgresql(engine: Engine, principal: str) -> bool:
    with engine.begin() as conn:
        exists = conn.execute(grant_sql.postgresql_role_exists(), {"name": principal}).first()
        if exists is None:
            conn.exec_driver_sql(grant_sql.postgresql_create_role(principal))
        database, schema = conn.execute(grant_sql.postgresql_where()).one()
        for grant in grant_sql.postgresql_grants(principal, database, schema):
            conn.exec_driver_sql(grant)
    return exists is None
