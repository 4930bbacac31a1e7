"""`azurebank token`: a local bearer token for a user (only with Auth__SigningKey)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import user_id, whole_number
from shared.clock import SystemClock
from shared.identity.tokens import TokenSigningUnavailable, issue_token
from shared.settings import load_settings


def register(sub: Any) -> None:
    tok = sub.add_parser("token", help="print a bearer token for a user (Auth__SigningKey only)")
    tok.add_argument("--user", type=user_id, required=True, help="the AspNetUsers.Id")
    tok.add_argument(
        "--minutes",
        type=whole_number(1, 1440),
        default=60,
        help="lifetime, 1 to 1440 minutes (default 60)",
    )
    tok.set_defaults(run=_token)


def _token(args: argparse.Namespace) -> int:
    try:
        print(issue_token(load_settings(), SystemClock(), args.user, minutes=args.minutes))
    except TokenSigningUnavailable as exc:
        print(exc, file=sys.stderr)
        return exits.CONFIG
    return exits.OK
