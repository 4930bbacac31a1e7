"""`azurebank smoke --base-url URL` (docs/cli.md#azurebank-smoke): prove a running instance answers
as it should. The function key, the token and the PIN are never printed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from azurebank_cli import exits
from azurebank_cli.runtime import user_id
from azurebank_cli.smoke_journey import Client, Journey, Payment, anonymous_checks, money_journey
from shared.clock import SystemClock
from shared.identity.tokens import TokenSigningUnavailable, issue_token
from shared.settings import MONEY_MAX, load_settings

# The command's own variables (not app settings): docs/cli.md.
FUNCTION_KEY_VARIABLE = "AZUREBANK_FUNCTION_KEY"
TOKEN_VARIABLE = "AZUREBANK_TOKEN"  # noqa: S105 (the variable's name, not a token)
PIN_VARIABLE = "AZUREBANK_PIN"


def _base_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            "must be an http(s) URL, e.g. https://APP.azurewebsites.net"
        )
    # The app's root; a URL ending in the host's route prefix `/api` means the same app.
    path = parts.path.rstrip("/")
    path = path.removesuffix("/api")
    return f"{parts.scheme}://{parts.netloc}{path}"


def _amount(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal(-1)
    if (
        not value.is_finite()
        or value <= 0
        or value > MONEY_MAX
        or value != value.quantize(Decimal("0.01"))
    ):
        raise argparse.ArgumentTypeError(
            f"must be an amount above 0 and at most {MONEY_MAX}, with at most two decimals"
        )
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 1 <= value <= 300:
        raise argparse.ArgumentTypeError("must be a number of seconds from 1 to 300")
    return value


def register(sub: Any) -> None:
    smoke = sub.add_parser(
        "smoke", help="check a running instance: health, readiness, the API, the money journey"
    )
    smoke.add_argument("--base-url", type=_base_url, required=True, help="the app's root URL")
    smoke.add_argument(
        "--function-key", help=f"the Functions host's key (default ${FUNCTION_KEY_VARIABLE})"
    )
    smoke.add_argument(
        "--token",
        help=f"the payer's bearer token (default ${TOKEN_VARIABLE}; else one minted for --user "
        "with Auth__SigningKey)",
    )
    smoke.add_argument("--user", type=user_id, help="the payer's AspNetUsers.Id: runs the journey")
    smoke.add_argument("--payee", help="the payee's AzureTag (with --user)")
    smoke.add_argument("--pin", help=f"the payer's PIN (default ${PIN_VARIABLE})")
    smoke.add_argument("--account", help="the payer's account (default: its first open one)")
    smoke.add_argument(
        "--amount", type=_amount, default=Decimal("1.00"), help="the transfer (default 1.00)"
    )
    smoke.add_argument(
        "--timeout", type=_seconds, default=30.0, help="seconds per request (default 30)"
    )
    smoke.add_argument("--json", action="store_true", help="one JSON object on stdout")
    smoke.set_defaults(run=_smoke)


def _smoke(args: argparse.Namespace) -> int:
    if (args.user is None) != (args.payee is None):
        print("azurebank smoke: --user and --payee go together", file=sys.stderr)
        return exits.USAGE
    token = args.token or os.environ.get(TOKEN_VARIABLE) or None
    pin = args.pin or os.environ.get(PIN_VARIABLE) or None
    if args.user is not None:
        if pin is None:
            print(
                f"azurebank smoke: the journey needs the payer's PIN: --pin or ${PIN_VARIABLE}",
                file=sys.stderr,
            )
            return exits.USAGE
        if token is None:
            try:
                token = issue_token(load_settings(), SystemClock(), args.user, minutes=15)
            except TokenSigningUnavailable as exc:
                print(f"{exc} (or pass --token, or set ${TOKEN_VARIABLE})", file=sys.stderr)
                return exits.CONFIG
    client = Client(
        args.base_url,
        args.function_key or os.environ.get(FUNCTION_KEY_VARIABLE) or None,
        token,
        args.timeout,
    )
    journey = Journey(client)
    anonymous_checks(journey)
    if args.user is not None:
        assert pin is not None
        money_journey(journey, Payment(args.payee, pin, args.amount, args.account))
    _report(journey, as_json=args.json)
    return exits.OK if journey.ok() else exits.FAILURE


def _report(journey: Journey, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"ok": journey.ok(), "steps": [asdict(s) for s in journey.steps]}))
        return
    for step in journey.steps:
        mark = "✓" if step.ok else "✗"
        line = f"{mark} {step.name}: {step.answer}"
        if not step.ok and step.answer != "not run" and step.answer != step.expected:
            line += f" (expected {step.expected})"
        if step.why:
            line += f": {step.why}"
        print(line)
    failed = [s.name for s in journey.steps if not s.ok]
    print(
        f"smoke: {len(journey.steps) - len(failed)} of {len(journey.steps)} steps held"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
