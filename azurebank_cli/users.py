"""`azurebank users add`: a user with K open accounts holding N each."""

from __future__ import annotations

import argparse
import json
from decimal import Decimal
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import checked, command, commands, fail, whole_number
from shared.bootstrap import bootstrap
from shared.db.uow import unit_of_work
from shared.identity.users import UserExists, add_user
from shared.notices.render import address_problem
from shared.settings import load_settings

# A quick-start figure, far inside Numeric(18,4) (14 integer digits): a balance near the column's
# capacity would make a later deposit overflow it.
MAX_BALANCE = Decimal("1000000000")
# AspNetUsers.Email (256) and the notice's To (RFC 5321: 254); AzureTag as the API's payee field.
MAX_TAG = 64
# POST /api/pin refuses a longer password, so a longer one could never enrol a PIN.
MAX_PASSWORD = 1024


def _amount(text: str) -> Decimal:
    value = checked(Decimal, "must be a number, e.g. 250.00")(text)
    # Compared before quantize: 1e400 would raise InvalidOperation there.
    if not value.is_finite() or not 0 <= value <= MAX_BALANCE:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_BALANCE}")
    if value != value.quantize(Decimal("0.01")):
        raise argparse.ArgumentTypeError("must have at most two decimals")
    return value


# The address every notice of this user goes to: refuse one the renderer cannot write.
_email = checked(
    str,
    "must be one plain address (name@example.com), at most 254 characters",
    lambda text: address_problem(text) is None and text == text.strip(),
)
_tag = checked(
    str,
    f"must be 1 to {MAX_TAG} characters, no leading or trailing spaces",
    lambda text: 0 < len(text) <= MAX_TAG and text == text.strip(),
)
_password = checked(
    str, f"must be 1 to {MAX_PASSWORD} characters", lambda text: 0 < len(text) <= MAX_PASSWORD
)


def register(sub: Any) -> None:
    add = command(
        commands(sub, "users", "users of the bank"),
        "add",
        _add,
        help="add a user with open accounts",
        description='Add a user with open accounts; prints {"userId": …, "accountIds": […]}. '
        "Exit 0; 1 when the email or AzureTag is taken or the database failed; 64; 78.",
    )
    add.add_argument("--email", type=_email, required=True, help="the sign-in and notice address")
    add.add_argument(
        "--password", type=_password, required=True, help=f"1 to {MAX_PASSWORD} characters"
    )
    add.add_argument(
        "--azure-tag", type=_tag, required=True, help=f"the payee name, 1 to {MAX_TAG} characters"
    )
    add.add_argument(
        "--balance",
        type=_amount,
        default=Decimal(0),
        help=f"each account's balance, 0 to {MAX_BALANCE}, at most two decimals (default 0)",
    )
    add.add_argument(
        "--accounts",
        type=whole_number(1, 100),
        default=1,
        help="how many accounts, 1 to 100 (default 1)",
    )


def _add(args: argparse.Namespace) -> int:
    services = bootstrap(load_settings())
    with unit_of_work(services.engine) as session:
        try:
            user = add_user(
                session,
                services.clock,
                email=args.email,
                password=args.password,
                azure_tag=args.azure_tag,
                balance=args.balance,
                accounts=args.accounts,
            )
        except UserExists as exc:
            return fail(exits.FAILURE, f"azurebank users add: {exc.title}")
        session.commit()
    print(json.dumps({"userId": user.user_id, "accountIds": [str(a) for a in user.account_ids]}))
    return exits.OK
