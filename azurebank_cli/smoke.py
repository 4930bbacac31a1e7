"""`azurebank smoke` (docs/cli.md#azurebank-smoke): one request per step over the standard
library's HTTP client (the app's requirements hold none). A step shows its status and a problem's
errorCode only: never a body, a header or a value sent (the function key, the token, the PIN)."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from azurebank_cli import exits
from azurebank_cli.runtime import checked, command, fail, print_report, user_id
from shared.clock import SystemClock
from shared.identity.tokens import TokenSigningUnavailable, issue_token
from shared.settings import MONEY_MAX, load_settings

# The command's own variables (not app settings): docs/cli.md.
FUNCTION_KEY_VARIABLE = "AZUREBANK_FUNCTION_KEY"
TOKEN_VARIABLE = "AZUREBANK_TOKEN"  # noqa: S105 (the variable's name, not a token)
PIN_VARIABLE = "AZUREBANK_PIN"
CENT = Decimal("0.01")
MINT = "/api/transactions/transfer/authorizations"
# The money journey's steps in order; a step whose input an earlier one did not give is not run.
MONEY_STEPS = ("accounts", "pin", "mint", "transfer", "replay", "allowance", "limit")


def _base_url(text: str) -> str:
    refused = argparse.ArgumentTypeError(
        "must be an http(s) URL, e.g. https://APP.azurewebsites.net"
    )
    try:
        parts = urlsplit(text.strip())
    except ValueError:  # an unclosed IPv6 bracket
        raise refused from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refused
    # The app's root; a URL ending in the host's route prefix `/api` means the same app.
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/').removesuffix('/api')}"


def register(sub: Any) -> None:
    what = "check a running instance: health, readiness, the API, the money journey"
    smoke = command(sub, "smoke", _smoke, with_json=True, help=what)
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
        "--amount",
        type=checked(
            Decimal,
            f"must be an amount above 0 and at most {MONEY_MAX}, with at most two decimals",
            lambda v: v.is_finite() and 0 < v <= MONEY_MAX and v == v.quantize(CENT),
        ),
        default=Decimal("1.00"),
        help="the transfer (default 1.00)",
    )
    smoke.add_argument(
        "--timeout",
        type=checked(float, "must be a number of seconds from 1 to 300", lambda v: 1 <= v <= 300),
        default=30.0,
        help="seconds per request (default 30)",
    )


def _smoke(args: argparse.Namespace) -> int:
    if (args.user is None) != (args.payee is None):
        return fail(exits.USAGE, "azurebank smoke: --user and --payee go together")
    token = args.token or os.environ.get(TOKEN_VARIABLE) or None
    pin = args.pin or os.environ.get(PIN_VARIABLE) or None
    if args.user is not None:
        if pin is None:
            return fail(
                exits.USAGE,
                f"azurebank smoke: the journey needs the payer's PIN: --pin or ${PIN_VARIABLE}",
            )
        if token is None:
            try:
                token = issue_token(load_settings(), SystemClock(), args.user, minutes=15)
            except TokenSigningUnavailable as exc:
                return fail(exits.CONFIG, f"{exc} (or pass --token, or set ${TOKEN_VARIABLE})")
    key = args.function_key or os.environ.get(FUNCTION_KEY_VARIABLE) or None
    journey = Journey(args.base_url, key, token, args.timeout)
    anonymous_checks(journey)
    if args.user is not None:
        assert pin is not None
        try:
            _pay(journey, args.payee, pin, args.amount, args.account)
        except _Blocked as blocked:
            (step,) = blocked.args
            for name in MONEY_STEPS[MONEY_STEPS.index(step) + 1 :]:
                journey.steps.append(Step(name, False, "not run", "", f"{step} did not hold"))
    ok = all(step.ok for step in journey.steps)
    document = {"ok": ok, "steps": [asdict(s) for s in journey.steps]}
    print_report(args.json, document, _lines(journey.steps))
    return exits.OK if ok else exits.FAILURE


def _lines(steps: list[Step]) -> Iterator[str]:
    for step in steps:
        missed = not step.ok and step.answer not in ("not run", step.expected)
        expected = f" (expected {step.expected})" if missed else ""
        why = f": {step.why}" if step.why else ""
        yield f"{'✓' if step.ok else '✗'} {step.name}: {step.answer}{expected}{why}"
    failed = [s.name for s in steps if not s.ok]
    held = f"smoke: {len(steps) - len(failed)} of {len(steps)} steps held"
    yield held + (f"; failed: {', '.join(failed)}" if failed else "")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    authorized: bool = True  # with the bearer token


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: Mapping[str, str]  # names lower-cased (HTTP's are case-insensitive)

    def json(self) -> Any:
        """The body as JSON, numbers as Decimal (every digit of money kept); None if not JSON."""
        try:
            return json.loads(self.body, parse_float=Decimal)
        except ValueError:
            return None

    def get(self, name: str) -> Any:
        """The body's field `name`; None when the body is no JSON object or has no such field."""
        document = self.json()
        return document.get(name) if isinstance(document, dict) else None

    def shown(self) -> str:
        """`201`, or `422 DAILY_LIMIT_EXCEEDED` when the body names an errorCode (one of
        printable characters: the line is an operator's terminal's, whatever the server sent)."""
        code = self.get("errorCode")
        named = isinstance(code, str) and code.strip() and code.isprintable()
        return f"{self.status} {code}" if named else str(self.status)


Holds = Callable[[Answer], str]  # what did not hold, or "" when all did


@dataclass(frozen=True)
class Step:
    name: str
    ok: bool
    answer: str  # "201", "422 DAILY_LIMIT_EXCEEDED", "no answer (URLError)", "not run"
    expected: str
    why: str = ""  # what did not hold, when the status did


class _Blocked(Exception):
    """A step the later ones need did not hold: they are not run."""


@dataclass
class Journey:
    """The steps taken against one base URL, with the function key and the bearer token."""

    base_url: str
    function_key: str | None
    token: str | None
    timeout: float
    steps: list[Step] = field(default_factory=list)

    def send(self, request: Request) -> Answer:
        headers = {"Accept": "application/json", **request.headers}
        if self.function_key:
            # For the host's `function`-level Functions; the anonymous ones and serve ignore it.
            headers["x-functions-key"] = self.function_key
        if request.authorized and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if request.body is not None:
            # json.dumps writes no Decimal; a float of two decimals prints its shortest
            # round-trip digits (1.0, 4899.01), which the API reads back exactly.
            data = json.dumps(request.body, default=float).encode()
            headers["Content-Type"] = "application/json"
        sent = urllib.request.Request(  # noqa: S310 (the operator's own http(s) base URL)
            self.base_url + request.path, data=data, headers=headers, method=request.method
        )
        try:
            response = urllib.request.urlopen(sent, timeout=self.timeout)  # noqa: S310
        except urllib.error.HTTPError as error:  # a 4xx or 5xx answer is an answer too
            response = error
        with response:
            lowered = {name.lower(): value for name, value in response.headers.items()}
            return Answer(response.status, response.read(), lowered)

    def check(
        self, name: str, expected: str, request: Request, holds: Holds = lambda _a: ""
    ) -> Answer | None:
        """One request: it holds when it answers as `expected` shows and `holds` returns ""."""
        try:
            answer = self.send(request)
        except (OSError, ValueError) as exc:  # URLError is an OSError; a bad URL a ValueError
            self.steps.append(Step(name, False, f"no answer ({type(exc).__name__})", expected))
            return None
        right = answer.shown() == expected
        why = holds(answer) if right else ""
        ok = right and not why
        self.steps.append(Step(name, ok, answer.shown(), expected, why))
        return answer if ok else None

    def need(self, name: str, expected: str, request: Request, holds: Holds) -> Answer:
        """`check` a step the later ones need; raises _Blocked when it does not hold."""
        answer = self.check(name, expected, request, holds)
        if answer is None:
            raise _Blocked(name)
        return answer


def _has(name: str) -> Holds:
    return lambda answer: "" if answer.get(name) else f"no {name}"


def _equals(name: str, value: str, problem: str) -> Holds:
    return lambda answer: "" if answer.get(name) == value else problem


def anonymous_checks(journey: Journey) -> None:
    """Liveness, readiness and the API document: no key or token needed."""
    status_ok = _equals("status", "ok", "the body's status is not ok")
    journey.check("health", "200", Request("GET", "/api/health", authorized=False), status_ok)
    journey.check("ready", "200", Request("GET", "/api/health/ready", authorized=False), status_ok)

    def is_api(answer: Answer) -> str:
        version, paths = answer.get("openapi"), answer.get("paths")
        if not (isinstance(version, str) and version.startswith("3.")):
            return "not an OpenAPI 3 document"
        if not (isinstance(paths, dict) and "/api/transactions/transfer" in paths):
            return "the document has no /api/transactions/transfer"
        return ""

    journey.check("openapi", "200", Request("GET", "/api/openapi.json", authorized=False), is_api)


def _pay(journey: Journey, payee: str, pin: str, amount: Decimal, account: str | None) -> None:
    """The quick start's journey (docs/quickstart.md), step by step as MONEY_STEPS names them."""
    body = {
        "accountId": account or _first_open_account(journey),
        "recipientAzureTag": payee,
        "amount": amount,
    }
    # A change to the same PIN: it proves the PIN and writes its audit row and owed notice, as
    # the quick start's change does, and leaves the PIN the operator knows.
    change = Request("PUT", "/api/pin", {"currentPin": pin, "newPin": pin})
    journey.check("pin", "200", change, _equals("status", "PinChanged", "not PinChanged"))
    mint = Request("POST", MINT, {**body, "pin": pin})
    minted = journey.need("mint", "201", mint, _has("authorizationId"))
    transfer = {**body, "authorizationId": str(minted.get("authorizationId"))}
    key = {"Idempotency-Key": f"smoke-{uuid.uuid4().hex}"}
    send = Request("POST", "/api/transactions/transfer", transfer, key)
    spent = journey.need("transfer", "201", send, _has("transactionId"))

    def same_answer(answer: Answer) -> str:
        if answer.headers.get("idempotency-replayed") != "true":
            return "no Idempotency-Replayed: true"
        return "" if answer.body == spent.body else "not the first answer byte for byte"

    journey.check("replay", "201", send, same_answer)
    remaining = _allowance(journey, amount)
    # One cent over what is left of the day: refused before the PIN is checked (ADR-0050 D4.1).
    over = Request("POST", MINT, {**body, "amount": remaining + CENT, "pin": pin})
    journey.check("limit", "422 DAILY_LIMIT_EXCEEDED", over)


def _first_open_account(journey: Journey) -> str:
    def has_open(answer: Answer) -> str:
        document = answer.json()
        rows = document if isinstance(document, list) else []
        return "" if any(not r.get("closed") for r in rows) else "the caller has no open account"

    answer = journey.need("accounts", "200", Request("GET", "/api/accounts"), has_open)
    return str(next(r["id"] for r in answer.json() if not r.get("closed")))


def _allowance(journey: Journey, spent: Decimal) -> Decimal:
    """The allowance's `remaining`, once its figures add up after a transfer of `spent`."""

    def adds_up(answer: Answer) -> str:
        limit, used, remaining = (answer.get(name) for name in ("limit", "used", "remaining"))
        if not all(isinstance(v, Decimal | int) for v in (limit, used, remaining)):
            return "limit, used and remaining are not numbers"
        if used < spent:
            return "used is less than the transfer just made"
        return "" if remaining == max(0, limit - used) else "remaining is not limit − used"

    read = Request("GET", "/api/transactions/allowance")
    answer = journey.need("allowance", "200", read, adds_up)
    return Decimal(answer.get("remaining"))
