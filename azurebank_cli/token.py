"""`azurebank token`: a local bearer token (only with Auth__SigningKey). `azurebank keys generate`:
a new value for one of the two keys, printed once, for infra/hooks/ or an operator rotating it."""

from __future__ import annotations

import argparse
import base64
import secrets
from collections.abc import Callable
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import command, commands, user_id, whole_number
from shared.clock import SystemClock
from shared.identity.tokens import issue_token
from shared.settings import load_settings

# 32 random bytes at least, each: the chain key is an HMAC-SHA256 key, decoded from base64 by
# the settings model; the signing key is an HS256 secret, read as text.
GENERATORS: dict[str, Callable[[], str]] = {
    "Audit__ChainKey": lambda: base64.b64encode(secrets.token_bytes(32)).decode(),
    "Auth__SigningKey": lambda: secrets.token_urlsafe(48),
}


def register(sub: Any) -> None:
    what = "print a bearer token for a user (Auth__SigningKey only)"
    tok = command(sub, "token", _token, help=what)
    tok.add_argument("--user", type=user_id, required=True, help="the AspNetUsers.Id")
    tok.add_argument(
        "--minutes",
        type=whole_number(1, 1440),
        default=60,
        help="lifetime, 1 to 1440 minutes (default 60)",
    )
    keys = commands(sub, "keys", "the app's two keys")
    what = "print a new random value for Audit__ChainKey or Auth__SigningKey"
    generate = command(keys, "generate", _generate, help=what)
    generate.add_argument("setting", choices=sorted(GENERATORS), help="which key")


def _token(args: argparse.Namespace) -> int:
    # TokenSigningUnavailable → exit 78, as a settings refusal (azurebank_cli.main).
    print(issue_token(load_settings(), SystemClock(), args.user, minutes=args.minutes))
    return exits.OK


def _generate(args: argparse.Namespace) -> int:
    print(GENERATORS[args.setting]())
    return exits.OK
