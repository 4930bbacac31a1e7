"""`azurebank db upgrade`: run the migrations to head on Database__Url."""

from __future__ import annotations

import argparse
from typing import Any

from azurebank_cli import exits
from shared.bootstrap import database_url
from shared.db import migrate
from shared.settings import load_settings


def register(sub: Any) -> None:
    db = sub.add_parser("db", help="the database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True, parser_class=type(db))
    up = db_sub.add_parser("upgrade", help="run the migrations to head on Database__Url")
    up.set_defaults(run=_upgrade)


def _upgrade(args: argparse.Namespace) -> int:
    migrate.upgrade(database_url(load_settings(), local_default=True))
    print("database upgraded to head")
    return exits.OK
