"""`azurebank keys generate SETTING`: a new random value for one of the two keys, printed once,
for the deployment's hook to store in Key Vault (infra/hooks/) or an operator rotating a key."""

from __future__ import annotations

import argparse
import base64
import secrets
from collections.abc import Callable
from typing import Any

from azurebank_cli import exits

# 32 random bytes at least, each: the chain key is an HMAC-SHA256 key, decoded from base64 by
# the settings model; the signing key is an HS256 secret, read as text.
GENERATORS: dict[str, Callable[[], str]] = {
    "Audit__ChainKey": lambda: base64.b64encode(secrets.token_bytes(32)).decode(),
    "Auth__SigningKey": lambda: secrets.token_urlsafe(48),
}


def register(sub: Any) -> None:
    keys = sub.add_parser("keys", help="the app's two keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, parser_class=type(keys))
    generate = keys_sub.add_parser(
        "generate", help="print a new random value for Audit__ChainKey or Auth__SigningKey"
    )
    generate.add_argument("setting", choices=sorted(GENERATORS), help="which key")
    generate.set_defaults(run=_generate)


def _generate(args: argparse.Namespace) -> int:
    print(GENERATORS[args.setting]())
    return exits.OK
