"""`azurebank users add`: a user with K open accounts holding N each."""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal, InvalidOperation
from typing import Any

from shared.cli import exits
from shared.cli.runtime import database_url, whole_number
from shared.clock import SystemClock
from shared.db.engine import get_engine
from shared.db.uow import unit_of_work
from shared.identity.users import UserExists, add_user
from shared.settings import load_settings


def _amount(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError("must be a number, e.g. 250.00") from None
    if not value.is_finite() or value < 0 or value != value.quantize(Decimal("0.01")):
        raise argparse.ArgumentTypeError("must be zero or more, with at most two decimals")
    return value


def register(sub: Any) -> None:
    users = sub.add_parser("users", help="users of the bank")
    users_sub = users.add_subparsers(dest="users_command", required=True, parser_class=type(users))
    add = users_sub.add_parser("add", help="add a user with open accounts")
    add.add_argument("--email", required=True)
    add.add_argument("--password", required=True)
    add.add_argument("--azure-tag", required=True)
    add.add_argument("--balance", type=_amount, default=Decimal(0), help="each account's balance")
    add.add_argument(
        "--accounts", type=whole_number(1, 100), default=1, help="how many accounts (default 1)"
    )
    add.set_defaults(run=_add)


def _add(args: argparse.Namespace) -> int:
    settings = load_settings()
    with unit_of_work(get_engine(database_url(settings))) as session:
        try:
            user = add_user(
                session,
                SystemClock(),
                email=args.email,
                password=args.password,
                azure_tag=args.azure_tag,
                balance=args.balance,
                accounts=args.accounts,
            )
        except UserExists as exc:
            print(f"azurebank users add: {exc.title}", file=sys.stderr)
            return exits.FAILURE
        session.commit()
    print(json.dumps({"userId": user.user_id, "accountIds": [str(a) for a in user.account_ids]}))
    return exits.OK
