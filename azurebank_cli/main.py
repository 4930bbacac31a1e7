"""`azurebank`: one parser, the commands its modules register, exit codes in azurebank_cli.exits."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from sqlalchemy.exc import SQLAlchemyError

from azurebank_cli import audit, db, exits, notices, serve, smoke, token, users
from azurebank_cli.runtime import fail
from shared.db.faults import driver_error_name
from shared.errors import DatabaseFault
from shared.identity.tokens import TokenSigningUnavailable
from shared.settings import SettingsError

# In help's order: token registers `token` then `keys`, notices `notify` then `notices`.
COMMAND_MODULES = (db, users, token, serve, smoke, notices, audit)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(exits.USAGE, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = _Parser(prog="azurebank", description="AzureBank Functions: operator tools.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (SettingsError, TokenSigningUnavailable) as exc:  # this host cannot mint tokens
        return fail(exits.CONFIG, str(exc))
    except (DatabaseFault, SQLAlchemyError) as exc:
        # The driver error's type only (its message can carry the host or the SQL), no traceback.
        return fail(
            exits.FAILURE,
            f"azurebank {args.command}: the database failed ({driver_error_name(exc)}). Fix: check "
            "that Database__Url names a reachable database, migrated by `azurebank db upgrade`.",
        )
