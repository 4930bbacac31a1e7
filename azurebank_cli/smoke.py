"""`azurebank smoke --base-url URL` (docs/cli.md#azurebank-smoke): prove a running instance answers
as it should, one request per step over the standard library's HTTP client (the app's
requirements hold none). A step reports its status and a problem's errorCode, never a body, a
header or a value sent: the function key, the token and the PIN are never printed."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

from azurebank_cli import exits
from azurebank_cli.runtime import checked, user_id
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
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            "must be an http(s) URL, e.g. https://APP.azurewebsites.net"
        )
    # The app's root; a URL ending in the host's route prefix `/api` means the same app.
    path = parts.path.rstrip("/")
    path = path.removesuffix("/api")
    return f"{parts.scheme}://{parts.netloc}{path}"


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


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: Mapping[str, str]  # names lower-cased (HTTP's are case-insensitive)

    def json(self) -> Any:
        """The body as JSON, numbers as Decimal (the API's money has two decimals, every digit
        kept); None when it is not JSON."""
        try:
            return json.loads(self.body, parse_float=Decimal)
        except ValueError:
            return None

    def error_code(self) -> str | None:
        document = self.json()
        code = document.get("errorCode") if isinstance(document, dict) else None
        return code if isinstance(code, str) else None

    def shown(self) -> str:
        code = self.error_code()
        return f"{self.status} {code}" if code else str(self.status)


@dataclass(frozen=True)
class Step:
    name: str
    ok: bool
    answer: str  # "201", "422 DAILY_LIMIT_EXCEEDED", "no answer (URLError)", "not run"
    expected: str
    why: str = ""  # what did not hold, when the status did


@dataclass
class Client:
    """One base URL, the function key and the bearer token sent with every request."""

    base_url: str
    function_key: str | None
    token: str | None
    timeout: float

    def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        authorized: bool = False,
    ) -> Answer:
        sent = {"Accept": "application/json", **(headers or {})}
        if self.function_key:
            # The Functions host's key for the `function`-level HTTP Functions; the anonymous
            # ones and `azurebank serve` ignore it.
            sent["x-functions-key"] = self.function_key
        if authorized and self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body, default=_number).encode()
            sent["Content-Type"] = "application/json"
        request = urllib.request.Request(  # noqa: S310 (the operator's own http(s) base URL)
            self.base_url + path, data=data, headers=sent, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return Answer(response.status, response.read(), _lowered(response.headers))
        except urllib.error.HTTPError as error:
            with error:
                return Answer(error.code, error.read(), _lowered(error.headers))


def _lowered(headers: Message[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _number(value: object) -> object:
    # json.dumps writes no Decimal; a float of two decimals prints its shortest round-trip
    # digits (1.0, 4899.01), which the API reads back exactly.
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(type(value).__name__)


class _Blocked(Exception):
    """A step the later ones need did not hold: they are not run."""


@dataclass
class Journey:
    client: Client
    steps: list[Step] = field(default_factory=list)

    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    def check(
        self,
        name: str,
        expected: int,
        call: Callable[[], Answer],
        holds: Callable[[Answer], str] = lambda _a: "",
        *,
        expected_code: str | None = None,
    ) -> Answer | None:
        """Run one request; it holds when the status (and errorCode) is the expected one and
        `holds` finds nothing wrong (it returns what is wrong, or "")."""
        want = f"{expected} {expected_code}" if expected_code else str(expected)
        try:
            answer = call()
        except (OSError, ValueError) as exc:  # URLError is an OSError; a bad URL a ValueError
            self.steps.append(Step(name, False, f"no answer ({type(exc).__name__})", want))
            return None
        right = answer.status == expected and answer.error_code() == expected_code
        why = holds(answer) if right else ""
        ok = right and not why
        self.steps.append(Step(name, ok, answer.shown(), want, why))
        return answer if ok else None

    def need(
        self, name: str, expected: int, call: Callable[[], Answer], holds: Callable[[Answer], str]
    ) -> Answer:
        """`check` a step the later ones need; raises _Blocked when it does not hold."""
        answer = self.check(name, expected, call, holds)
        if answer is None:
            raise _Blocked(name)
        return answer


def _field(answer: Answer, *names: str) -> Iterator[Any]:
    document = answer.json()
    for name in names:
        yield document.get(name) if isinstance(document, dict) else None


def _has(name: str) -> Callable[[Answer], str]:
    return lambda answer: "" if next(_field(answer, name)) else f"no {name}"


def anonymous_checks(journey: Journey) -> None:
    """Liveness, readiness and the API document: no key or token needed."""
    c = journey.client

    def status_ok(answer: Answer) -> str:
        (status,) = _field(answer, "status")
        return "" if status == "ok" else "the body's status is not ok"

    journey.check("health", 200, lambda: c.send("GET", "/api/health"), status_ok)
    journey.check("ready", 200, lambda: c.send("GET", "/api/health/ready"), status_ok)

    def is_the_api(answer: Answer) -> str:
        version, paths = _field(answer, "openapi", "paths")
        if not (isinstance(version, str) and version.startswith("3.")):
            return "not an OpenAPI 3 document"
        if not (isinstance(paths, dict) and "/api/transactions/transfer" in paths):
            return "the document has no /api/transactions/transfer"
        return ""

    journey.check("openapi", 200, lambda: c.send("GET", "/api/openapi.json"), is_the_api)


@dataclass(frozen=True)
class Payment:
    payee: str  # the payee's AzureTag
    pin: str
    amount: Decimal
    account: str | None  # None: the caller's first open account


def money_journey(journey: Journey, payment: Payment) -> None:
    """The quick start's journey (docs/quickstart.md): the PIN, a mint, a transfer with an
    Idempotency-Key and its replay, the allowance, and a mint over the day's limit."""
    try:
        _pay(journey, payment)
    except _Blocked as blocked:
        (step,) = blocked.args
        for name in MONEY_STEPS[MONEY_STEPS.index(step) + 1 :]:
            journey.steps.append(Step(name, False, "not run", "", f"{step} did not hold"))


def _pay(journey: Journey, payment: Payment) -> None:
    c, pin = journey.client, payment.pin
    body = {
        "accountId": payment.account or _first_open_account(journey),
        "recipientAzureTag": payment.payee,
        "amount": payment.amount,
    }
    # A change to the same PIN: it proves the PIN and writes its audit row and owed notice, as
    # the quick start's change does, and leaves the PIN the operator knows.
    journey.check(
        "pin",
        200,
        lambda: c.send("PUT", "/api/pin", {"currentPin": pin, "newPin": pin}, authorized=True),
        lambda a: "" if next(_field(a, "status")) == "PinChanged" else "not PinChanged",
    )
    minted = journey.need(
        "mint",
        201,
        lambda: c.send("POST", MINT, {**body, "pin": pin}, authorized=True),
        _has("authorizationId"),
    )
    transfer = {**body, "authorizationId": str(next(_field(minted, "authorizationId")))}
    key = {"Idempotency-Key": f"smoke-{uuid.uuid4().hex}"}

    def send_transfer() -> Answer:
        return c.send("POST", "/api/transactions/transfer", transfer, key, authorized=True)

    spent = journey.need("transfer", 201, send_transfer, _has("transactionId"))

    def same_answer(answer: Answer) -> str:
        if answer.headers.get("idempotency-replayed") != "true":
            return "no Idempotency-Replayed: true"
        return "" if answer.body == spent.body else "not the first answer byte for byte"

    journey.check("replay", 201, send_transfer, same_answer)
    remaining = _allowance(journey, payment.amount)
    # One cent over what is left of the day: refused before the PIN is checked (ADR-0050 D4.1).
    over = {**body, "amount": remaining + CENT, "pin": pin}
    journey.check(
        "limit",
        422,
        lambda: c.send("POST", MINT, over, authorized=True),
        expected_code="DAILY_LIMIT_EXCEEDED",
    )


def _first_open_account(journey: Journey) -> str:
    def has_open(answer: Answer) -> str:
        document = answer.json()
        rows = document if isinstance(document, list) else []
        return "" if any(not r.get("closed") for r in rows) else "the caller has no open account"

    answer = journey.need(
        "accounts",
        200,
        lambda: journey.client.send("GET", "/api/accounts", authorized=True),
        has_open,
    )
    return str(next(r["id"] for r in answer.json() if not r.get("closed")))


def _allowance(journey: Journey, spent: Decimal) -> Decimal:
    """The allowance's `remaining`, once its figures add up after a transfer of `spent`."""
    figures: dict[str, Decimal] = {}

    def adds_up(answer: Answer) -> str:
        limit, used, remaining = _field(answer, "limit", "used", "remaining")
        if not all(isinstance(v, Decimal | int) for v in (limit, used, remaining)):
            return "limit, used and remaining are not numbers"
        figures.update(limit=Decimal(limit), used=Decimal(used), remaining=Decimal(remaining))
        if figures["used"] < spent:
            return "used is less than the transfer just made"
        if figures["remaining"] != max(Decimal(0), figures["limit"] - figures["used"]):
            return "remaining is not limit − used"
        return ""

    journey.need(
        "allowance",
        200,
        lambda: journey.client.send("GET", "/api/transactions/allowance", authorized=True),
        adds_up,
    )
    return figures["remaining"]
