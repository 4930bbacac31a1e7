"""`azurebank db upgrade`: run the migrations to head on Database__Url; `azurebank db grant`:
give the app's identity its user and the table privileges it needs, and no DDL."""

from __future__ import annotations

import argparse
import uuid
from dataclasses import asdict
from typing import Any

from sqlalchemy.engine import make_url

from azurebank_cli import exits
from azurebank_cli.runtime import checked, command, commands, fail, print_report
from shared.bootstrap import database_url
from shared.db import grant_sql, migrate
from shared.db.engine import build_engine
from shared.settings import fix_for, load_settings


def register(sub: Any) -> None:
    db = commands(sub, "db", "the database schema")
    command(db, "upgrade", _upgrade, help="run the migrations to head on Database__Url")
    what = "create the app identity's database user and grant it the app's tables (no DDL)"
    grant = command(db, "grant", _grant, with_json=True, help=what)
    grant.add_argument(
        "--principal",
        type=checked(
            str,
            "must be 1 to 128 letters, digits or . _ @ -, starting with a letter or digit",
            grant_sql.valid_principal,
        ),
        required=True,
        help="the app identity's name (SQL Server: the managed identity's Entra name; "
        "PostgreSQL: the role)",
    )
    grant.add_argument(
        "--object-id",
        type=checked(uuid.UUID, "must be a GUID (the identity's principal id)"),
        help="SQL Server only: the identity's principal (object) id, so the server binds the "
        "user to it without a directory look-up",
    )


def _upgrade(args: argparse.Namespace) -> int:
    migrate.upgrade(database_url(load_settings(), local_default=True))
    print("database upgraded to head")
    return exits.OK


def _grant(args: argparse.Namespace) -> int:
    # No local default: a grant on a SQLite file in the working directory would mean nothing.
    url = database_url(load_settings(), local_default=False)
    backend = make_url(url).get_backend_name()
    if backend not in ("mssql", "postgresql"):
        return fail(
            exits.CONFIG,
            f"Database__Url: {backend} has no database users to grant. Fix: "
            f"{fix_for('Database__Url')}, naming the SQL Server or PostgreSQL database.",
        )
    if backend != "mssql" and args.object_id is not None:
        return fail(exits.USAGE, "azurebank db grant: --object-id is for SQL Server only")
    engine = build_engine(url)
    try:
        report = grant_sql.grant_app_identity(engine, args.principal, object_id=args.object_id)
    finally:
        engine.dispose()
    print_report(args.json, asdict(report), _lines(report))
    return exits.OK


def _lines(report: grant_sql.GrantReport) -> list[str]:
    state = "created" if report.created else "already there"
    return [
        f"user {report.principal} ({report.dialect}): {state}",
        *(f"granted {', '.join(ps)} on {table}" for table, ps in report.privileges.items()),
    ]
