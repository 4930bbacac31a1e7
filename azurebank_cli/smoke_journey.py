"""The steps of `azurebank smoke` (docs/cli.md#azurebank-smoke), each one request and what its
answer must be, over the standard library's HTTP client (the app's requirements hold none). A
step reports its status and a problem's errorCode, never a body, a header or a value sent."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from email.message import Message
from typing import Any

CENT = Decimal("0.01")


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
        """What the report says of the answer: the status, and a problem's errorCode."""
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


@dataclass
class Journey:
    """The steps in order; each records its Step, and a step whose input an earlier one did not
    give is `not run`."""

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

    def not_run(self, *names: str, because: str) -> None:
        for name in names:
            self.steps.append(Step(name, False, "not run", "", f"{because} did not hold"))


def _field(answer: Answer, *names: str) -> Iterator[Any]:
    document = answer.json()
    for name in names:
        yield document.get(name) if isinstance(document, dict) else None


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
    account = payment.account or _first_open_account(journey)
    if account is None:
        journey.not_run(
            "pin", "mint", "transfer", "replay", "allowance", "limit", because="accounts"
        )
        return
    body: dict[str, Any] = {
        "accountId": account,
        "recipientAzureTag": payment.payee,
        "amount": payment.amount,
    }
    authorization = _pin_and_mint(journey, body, payment.pin)
    if authorization is None:
        journey.not_run("transfer", "replay", "allowance", "limit", because="mint")
        return
    if _transfer_and_replay(journey, {**body, "authorizationId": authorization}):
        _allowance_and_limit(journey, body, payment)


def _pin_and_mint(journey: Journey, body: dict[str, Any], pin: str) -> str | None:
    """The PIN step, then the mint; the authorization's id, or None when the mint failed."""
    c = journey.client
    # A change to the same PIN: it proves the PIN and writes its audit row and owed notice, as
    # the quick start's change does, and leaves the PIN the operator knows.
    journey.check(
        "pin",
        200,
        lambda: c.send("PUT", "/api/pin", {"currentPin": pin, "newPin": pin}, authorized=True),
        lambda a: "" if next(_field(a, "status")) == "PinChanged" else "not PinChanged",
    )
    minted = journey.check(
        "mint",
        201,
        lambda: c.send(
            "POST",
            "/api/transactions/transfer/authorizations",
            {**body, "pin": pin},
            authorized=True,
        ),
        lambda a: "" if next(_field(a, "authorizationId")) else "no authorizationId",
    )
    return None if minted is None else str(next(_field(minted, "authorizationId")))


def _transfer_and_replay(journey: Journey, transfer: dict[str, Any]) -> bool:
    """The transfer under a new Idempotency-Key, then the same request again; whether the
    transfer held (the replay's answer is its own step)."""
    key = {"Idempotency-Key": f"smoke-{uuid.uuid4().hex}"}

    def send_transfer() -> Answer:
        return journey.client.send(
            "POST", "/api/transactions/transfer", transfer, key, authorized=True
        )

    spent = journey.check(
        "transfer",
        201,
        send_transfer,
        lambda a: "" if next(_field(a, "transactionId")) else "no transactionId",
    )
    if spent is None:
        journey.not_run("replay", "allowance", "limit", because="transfer")
        return False

    def same_answer(answer: Answer) -> str:
        if answer.headers.get("idempotency-replayed") != "true":
            return "no Idempotency-Replayed: true"
        return "" if answer.body == spent.body else "not the first answer byte for byte"

    journey.check("replay", 201, send_transfer, same_answer)
    return True


def _first_open_account(journey: Journey) -> str | None:
    def has_open(answer: Answer) -> str:
        document = answer.json()
        rows = document if isinstance(document, list) else []
        return "" if any(not r.get("closed") for r in rows) else "the caller has no open account"

    answer = journey.check(
        "accounts",
        200,
        lambda: journey.client.send("GET", "/api/accounts", authorized=True),
        has_open,
    )
    if answer is None:
        return None
    return str(next(r["id"] for r in answer.json() if not r.get("closed")))


def _allowance_and_limit(journey: Journey, body: dict[str, Any], payment: Payment) -> None:
    c = journey.client
    figures: dict[str, Decimal] = {}

    def adds_up(answer: Answer) -> str:
        limit, used, remaining = _field(answer, "limit", "used", "remaining")
        if not all(isinstance(v, Decimal | int) for v in (limit, used, remaining)):
            return "limit, used and remaining are not numbers"
        figures.update(limit=Decimal(limit), used=Decimal(used), remaining=Decimal(remaining))
        if figures["used"] < payment.amount:
            return "used is less than the transfer just made"
        if figures["remaining"] != max(Decimal(0), figures["limit"] - figures["used"]):
            return "remaining is not limit − used"
        return ""

    allowance = journey.check(
        "allowance",
        200,
        lambda: c.send("GET", "/api/transactions/allowance", authorized=True),
        adds_up,
    )
    if allowance is None:
        journey.not_run("limit", because="allowance")
        return
    # One cent over what is left of the day: refused before the PIN is checked (ADR-0050 D4.1).
    over = {**body, "amount": figures["remaining"] + CENT, "pin": payment.pin}
    journey.check(
        "limit",
        422,
        lambda: c.send("POST", "/api/transactions/transfer/authorizations", over, authorized=True),
        expected_code="DAILY_LIMIT_EXCEEDED",
    )
