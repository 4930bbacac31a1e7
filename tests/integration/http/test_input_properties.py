"""docs/http.md, over every string and amount input of every operation with one, on SQLite and
PostgreSQL (`db_url`): hypothesis sends arbitrary text (lone surrogates, NUL, RTL and combining
marks, zero-width characters, up to 10,000 characters; and near misses of the right value) for
each string field and the Idempotency-Key header, and arbitrary JSON numbers (huge and tiny
exponents, -0, the NaN and Infinity literals, 30 digits) for each amount, as raw bytes so the
server parses them itself. Every answer must be:
  - a success only for valid input (and, the rest of the request being right, valid input is
    a success or one of the money rules' refusals);
  - otherwise a 4xx problem whose errorCode the operation declares in /api/openapi.json for that
    status, one of the refusals of the field sent, and, for VALIDATION_FAILED, naming the field;
  - never a 5xx; and money moves only by a success (balances checked around every request,
    and every balance reconciled with its ledger at the end).
Bounded: a fixed number of examples per operation, derandomized under CI=true (tests/conftest)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from api_funcs.decimal_json import loads_decimal
from shared.db.engine import get_engine
from shared.db.schema import Account, AspNetUser, Transaction, TransactionType
from shared.db.uow import unit_of_work
from shared.identity.passwords import hash_secret
from shared.identity.pins import is_valid_pin
from tests.support.money import (
    DEPOSIT,
    INTERNAL,
    MINT,
    TRANSFER,
    WITHDRAWAL,
    Bank,
    open_bank,
    unique_key,
)
from tests.support.users import FAST_HASH, PIN, User

PASSWORD = "correct horse battery staple"  # tests.support.make_user's default
NEW_PIN = "602817"
CENT = Decimal("0.01")
MAX_AMOUNT = Decimal(100000)
# Per operation and database: about 12 s for the whole module on this machine's two cores.
EXAMPLES = 40

# --- what hypothesis sends --------------------------------------------------------------------

# Characters that have broken text handling somewhere: NUL, lone surrogates (and a pair, which
# JSON's escapes join into one character), RTL and bidi controls, a combining mark, zero-width
# characters, a BOM, a line separator, DEL, fullwidth digits, case-folding surprises.
PIECES = [
    "\x00",
    "\ud800",
    "\udfff",
    "\ud83d\ude00",
    "\u202e",
    "\u200f",
    "\u0301",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u2028",
    "\x7f",
    " ",
    "\t",
    "\U0001f600",
    "\uff14",
    "\u0130",
    "\u00df",
    "\U0010ffff",
]
ANY_CHARACTER = st.characters(exclude_categories=())  # every code point, surrogates included
HOSTILE = st.one_of(st.sampled_from(PIECES), ANY_CHARACTER)
SHORT_TEXT = st.lists(HOSTILE, max_size=24).map("".join)
# Long text by repetition: cheap to draw, up to 10,000 characters.
LONG_TEXT = st.tuples(
    st.lists(HOSTILE, min_size=1, max_size=4).map("".join), st.integers(1, 10_000)
)
ANY_TEXT = st.one_of(SHORT_TEXT, LONG_TEXT.map(lambda t: (t[0] * t[1])[:10_000]))


def near(valid: str) -> st.SearchStrategy[str]:
    """The right value, or one edit away from it by a hostile piece, a case or a space."""
    inserted = st.tuples(st.integers(0, len(valid)), st.lists(HOSTILE, min_size=1, max_size=3))
    return st.one_of(
        st.just(valid),
        inserted.map(lambda t: valid[: t[0]] + "".join(t[1]) + valid[t[0] :]),
        st.sampled_from([valid.upper(), valid.lower(), valid + " ", " " + valid, valid[:-1]]),
    )


def text_for(valid: str) -> st.SearchStrategy[str]:
    return st.one_of(near(valid), ANY_TEXT)


def id_for(valid: uuid.UUID, *others: uuid.UUID) -> st.SearchStrategy[str]:
    """An id field: the right one in other spellings, another real one, a random one, or text."""
    spellings = [str(valid), str(valid).upper(), valid.hex, f"{{{valid}}}", f"urn:uuid:{valid}"]
    return st.one_of(
        st.sampled_from(spellings + [str(o) for o in others] + [str(uuid.uuid4())]),
        near(str(valid)),
        ANY_TEXT,
    )


_SIGN = st.sampled_from(["", "-"])
_MANTISSA = st.builds(
    lambda whole, fraction: whole + fraction,
    st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,29}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,30}", fullmatch=True)),
)
_SMALL_EXPONENT = st.builds(
    lambda e, sign, n: f"{e}{sign}{n}",
    st.sampled_from("eE"),
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 12),
)
# Around and past the decimal module's exponent limit (999999999999999999 on 64 bits).
_HUGE_EXPONENT = st.builds(
    lambda sign, n: f"e{sign}{n}",
    st.sampled_from(["", "+", "-"]),
    st.sampled_from([400, 999_999, 10**6, 999_999_999_999_999_999, 10**18, 10**19, 10**30]),
)
_LITERALS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "-0",
    "-0.0",
    "0",
    "0.00",
    "0e0",
    "0.005",
    "0.01",
    "1E-2",
    "1e5",
    "100000",
    "100000.00",
    "100000.01",
    "5000",
    "5000.01",
    "1" + "0" * 5000,
    "1e1000000000000000000",
]
AMOUNT = st.one_of(
    st.decimals(min_value=CENT, max_value=MAX_AMOUNT, places=2).map(str),
    st.sampled_from(_LITERALS),
    st.builds(
        lambda *parts: "".join(parts), _SIGN, _MANTISSA, st.one_of(st.just(""), _SMALL_EXPONENT)
    ),
    st.builds(lambda *parts: "".join(parts), _SIGN, _MANTISSA, _HUGE_EXPONENT),
)


def amount_value(text: str) -> Decimal | None:
    """The amount a JSON number's text is, when docs/http.md allows it: above 0, at most 100000,
    at most two decimals (of its value: 1.000 is 1)."""
    if text in ("NaN", "Infinity", "-Infinity"):
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite() or not Decimal(0) < value <= MAX_AMOUNT:
        return None
    return value if value == value.quantize(CENT) else None


# --- how it is sent ---------------------------------------------------------------------------


def raw_json(body: dict[str, Any], amount: str | None) -> bytes:
    """The body as bytes: lone surrogates as JSON escapes (UTF-8 cannot carry them), the amount's
    text spliced in as the client wrote it (so NaN, 1e999999 and 30 digits reach the server)."""
    text = json.dumps(body, ensure_ascii=False)
    text = re.sub(r"[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    if amount is not None:
        text = text[:-1] + (", " if body else "") + f'"amount": {amount}' + "}"
    return text.encode("utf-8")


def server_view(raw: bytes, name: str) -> Any:
    """What the server reads for a field, by the server's own parser (a surrogate pair sent as
    two escapes arrives as one character)."""
    return loads_decimal(raw)[name]


def header_view(sent: bytes) -> str:
    """What the server reads for a header: Starlette decodes its bytes as latin-1."""
    return sent.decode("latin-1")


# --- the world each example runs in -----------------------------------------------------------


@dataclass
class World:
    bank: Bank
    declared: dict[str, dict[int, set[str]]]
    alice: User  # the caller: two accounts, a PIN
    bob: User  # the payee
    carol: User  # a caller with no PIN yet (pin_enrol)
    initial: dict[uuid.UUID, Decimal] = field(default_factory=dict)
    keys: dict[str, set[str]] = field(default_factory=dict)  # per operation, as the server read

    def keys_of(self, operation: str) -> set[str]:
        return self.keys.setdefault(operation, set())

    def balances(self) -> dict[uuid.UUID, Decimal]:
        ids = [*self.alice.account_ids, self.bob.primary]
        with unit_of_work(get_engine(self.bank.db_url)) as session:
            rows = session.execute(select(Account.Id, Account.Balance).where(Account.Id.in_(ids)))
            return {row.Id: row.Balance for row in rows}

    def reset_pins(self) -> None:
        """Alice's PIN as enrolled with no failure counted; Carol with none (so one example's
        lockout, change or enrolment never decides the next)."""
        with unit_of_work(get_engine(self.bank.db_url)) as session:
            session.execute(
                update(AspNetUser)
                .where(AspNetUser.Id == self.alice.user_id)
                .values(
                    PinHash=hash_secret(PIN, iterations=FAST_HASH),
                    PinAccessFailedCount=0,
                    PinLockoutEnd=None,
                )
            )
            session.execute(
                update(AspNetUser).where(AspNetUser.Id == self.carol.user_id).values(PinHash=None)
            )
            session.commit()

    def next_day(self) -> None:
        # A fresh daily allowance for each example (DailyLimit__Amount is 5000 by default).
        self.bank.clock.advance(timedelta(days=1))


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    with open_bank(db_url) as bank:
        document = bank.client.get("/api/openapi.json").json()
        declared = {
            op["operationId"]: {
                int(status): set(response.get("x-error-codes", []))
                for status, response in op["responses"].items()
            }
            for path in document["paths"].values()
            for op in path.values()
        }
        alice = bank.customer(balance=10**9, accounts=2)
        bob, carol = bank.customer(), bank.customer(pin=None)
        made = World(bank, declared, alice, bob, carol)
        made.initial = made.balances()
        yield made
        reconcile(made)


def reconcile(world: World) -> None:
    """Every balance is its starting balance plus its ledger: no money moved off the books."""
    with unit_of_work(get_engine(world.bank.db_url)) as session:
        rows = session.execute(
            select(Transaction.AccountId, Transaction.Type, Transaction.Amount)
        ).all()
    ledger: dict[uuid.UUID, Decimal] = {}
    for account_id, kind, amount in rows:
        sign = 1 if kind in (TransactionType.DEPOSIT, TransactionType.TRANSFER_IN) else -1
        ledger[account_id] = ledger.get(account_id, Decimal(0)) + sign * amount
    for account_id, balance in world.balances().items():
        assert balance == world.initial[account_id] + ledger.get(account_id, Decimal(0))


# --- one operation, one field, one value --------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """A request as sent, and what the test knows of it."""

    operation: str
    field: str
    valid: bool  # the input may succeed: it is valid and the rest of the request is right
    codes: frozenset[str]  # the refusals that input may meet, besides VALIDATION_FAILED
    moves: dict[uuid.UUID, Decimal] = field(default_factory=dict)  # a first success, per account
    must_succeed: bool = False  # valid, in its plain spelling, and no rule can refuse it
    named: frozenset[str] = frozenset()  # the fields a VALIDATION_FAILED may name


def check(world: World, sent: Sent, response: Any) -> None:
    status = response.status_code
    assert status < 500, (sent, response.text[:500])
    if status >= 400:
        assert response.headers["content-type"] == "application/problem+json", response.text
        problem: dict[str, Any] = response.json()
        code = problem["errorCode"]
        assert code in world.declared[sent.operation].get(status, set()), (sent, status, code)
        if code == "VALIDATION_FAILED":
            named = {e["field"] for e in problem["errors"]}
            assert named and named <= (sent.named or {sent.field}), (sent, problem)
        else:
            assert code in sent.codes, (sent, problem)
    else:
        assert sent.valid, (sent, status)
    if sent.must_succeed:
        assert status < 300, (sent, response.text[:500])


def run(world: World, send: Callable[[], tuple[Sent, Any]]) -> None:
    """Send one request; check its answer and that money moved only by a first success."""
    before = world.balances()
    sent, response = send()
    check(world, sent, response)
    after = world.balances()
    first_success = response.status_code < 300 and "Idempotency-Replayed" not in response.headers
    expected = {
        account: before[account] + (sent.moves.get(account, 0) if first_success else 0)
        for account in before
    }
    assert after == expected, (sent, response.status_code)


PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Header text: anything a header's bytes can carry (no lone surrogate: it has no UTF-8; no CR or
# LF: they end the header), sent as UTF-8.
KEY = st.one_of(near("key-of-this-test"), ANY_TEXT).map(
    lambda s: re.sub(r"[\ud800-\udfff\r\n]", "", s)
)
PIN_LIKE = st.one_of(text_for(PIN), st.from_regex(r"[0-9]{3,7}", fullmatch=True))


def _uuid(text: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _plain(text: Any, valid: uuid.UUID) -> bool:
    return text in (str(valid), str(valid).upper())


def _post(world: World, path: str, raw: bytes, key: bytes | None = None) -> Any:
    headers: dict[str, str | bytes] = {
        **world.bank.headers(world.alice),
        "content-type": "application/json",
    }
    if key is not None:
        headers["Idempotency-Key"] = key
    return world.bank.client.post(path, content=raw, headers=headers)


@dataclass(frozen=True)
class Draw:
    """The one field an example fuzzes and the request's other values."""

    field: str
    values: dict[str, str]
    amount: str
    key: bytes


def draw(data: st.DataObject, defaults: dict[str, str], strategies: dict[str, Any]) -> Draw:
    name = data.draw(st.sampled_from(sorted(strategies)), label="field")
    values = dict(defaults)
    amount, key = "1", unique_key().encode()
    value = data.draw(strategies[name], label=name)
    if name == "amount":
        amount = value
    elif name == "Idempotency-Key":
        key = value.encode("utf-8")
    else:
        values[name] = value
    return Draw(name, values, amount, key)


def same_payee(sent: Any, tag: str) -> bool:
    """docs/database.md: a payee's AzureTag is resolved case-insensitively on every database
    (ASCII case is the fold all three agree on); the transfer then names the minted spelling."""
    return isinstance(sent, str) and (
        sent == tag or (sent.isascii() and sent.upper() == tag.upper())
    )


def key_sent(sent_key: bytes, used: set[str]) -> tuple[bool, bool]:
    """(valid, first use) of the key as the server reads it."""
    view = header_view(sent_key)
    # docs/database.md: a key that begins or ends with a space is refused (SQL Server's `=`
    # would match it to the key without the space).
    valid = bool(view.strip()) and view == view.strip() and len(view) <= 255 and "\x00" not in view
    first = view not in used
    if valid:
        used.add(view)
    return valid, first


KEY_CODES = frozenset({"IDEMPOTENCY_KEY_REQUIRED", "IDEMPOTENCY_KEY_REUSED"})


def send_rail(path: str, operation: str, sign: int) -> Callable[[World, Any], tuple[Sent, Any]]:
    def send(world: World, data: Any) -> tuple[Sent, Any]:
        alice = world.alice
        own, other = alice.account_ids
        d = draw(
            data,
            {"accountId": str(own)},
            {
                "accountId": id_for(own, other, world.bob.primary),
                "amount": AMOUNT,
                "Idempotency-Key": KEY,
            },
        )
        raw = raw_json(d.values, d.amount)
        account = _uuid(server_view(raw, "accountId"))
        value = amount_value(d.amount)
        key_valid, first = key_sent(d.key, world.keys_of(operation))
        valid = account in alice.account_ids and value is not None and key_valid
        funds = frozenset({"INSUFFICIENT_FUNDS"} if sign < 0 else set())
        codes = {
            "accountId": frozenset({"ACCOUNT_NOT_FOUND", "ACCOUNT_FORBIDDEN"}),
            "amount": funds,
            "Idempotency-Key": KEY_CODES,
        }[d.field]
        sent = Sent(
            operation,
            d.field,
            valid,
            codes,
            {account: sign * value.quantize(CENT)} if valid and account and value else {},
            must_succeed=valid and first and _plain(server_view(raw, "accountId"), account),
        )
        return sent, _post(world, path, raw, d.key)

    return send


def send_internal(world: World, data: Any) -> tuple[Sent, Any]:
    source, target = world.alice.account_ids
    d = draw(
        data,
        {"fromAccountId": str(source), "toAccountId": str(target)},
        {
            "fromAccountId": id_for(source, target, world.bob.primary),
            "toAccountId": id_for(target, source, world.bob.primary),
            "amount": AMOUNT,
            "Idempotency-Key": KEY,
        },
    )
    raw = raw_json(d.values, d.amount)
    got_from = _uuid(server_view(raw, "fromAccountId"))
    got_to = _uuid(server_view(raw, "toAccountId"))
    value = amount_value(d.amount)
    key_valid, first = key_sent(d.key, world.keys_of("internal_transfer"))
    valid = got_from == source and got_to == target and value is not None and key_valid
    ids = frozenset({"ACCOUNT_NOT_FOUND", "ACCOUNT_FORBIDDEN"})
    codes = {
        "fromAccountId": ids,
        "toAccountId": ids,
        "amount": frozenset({"INSUFFICIENT_FUNDS"}),
        "Idempotency-Key": KEY_CODES,
    }[d.field]
    moves = {source: -value.quantize(CENT), target: value.quantize(CENT)} if valid and value else {}
    plain = all(
        _plain(server_view(raw, n), a)
        for n, a in (("fromAccountId", source), ("toAccountId", target))
    )
    # The same account twice is VALIDATION_FAILED naming toAccountId, whichever was sent wrong.
    named = frozenset({"fromAccountId", "toAccountId"}) if "AccountId" in d.field else frozenset()
    sent = Sent("internal_transfer", d.field, valid, codes, moves, valid and first and plain, named)
    return sent, _post(world, INTERNAL, raw, d.key)


def send_mint(world: World, data: Any) -> tuple[Sent, Any]:
    world.reset_pins()
    world.next_day()
    alice, bob = world.alice, world.bob
    own, other = alice.account_ids
    d = draw(
        data,
        {"accountId": str(own), "recipientAzureTag": bob.tag, "pin": PIN},
        {
            "accountId": id_for(own, other, bob.primary),
            "recipientAzureTag": st.one_of(text_for(bob.tag), st.just(alice.tag)),
            "amount": AMOUNT,
            "pin": PIN_LIKE,
        },
    )
    raw = raw_json(d.values, d.amount)
    account = _uuid(server_view(raw, "accountId"))
    value = amount_value(d.amount)
    valid = (
        account in alice.account_ids
        and same_payee(server_view(raw, "recipientAzureTag"), bob.tag)
        and value is not None
        and server_view(raw, "pin") == PIN
    )
    codes = {
        "accountId": frozenset({"ACCOUNT_NOT_FOUND", "ACCOUNT_FORBIDDEN"}),
        "recipientAzureTag": frozenset({"PAYEE_NOT_FOUND", "PAYEE_INVALID"}),
        "amount": frozenset({"DAILY_LIMIT_EXCEEDED"}),
        "pin": frozenset({"PIN_REQUIRED", "INVALID_PIN"}),
    }[d.field]
    within_limit = value is not None and value <= 5000
    plain = account is not None and _plain(server_view(raw, "accountId"), account)
    sent = Sent("mint", d.field, valid, codes, must_succeed=valid and within_limit and plain)
    return sent, _post(world, MINT, raw)


def send_transfer(world: World, data: Any) -> tuple[Sent, Any]:
    world.next_day()
    alice, bob = world.alice, world.bob
    own, other = alice.account_ids
    d = draw(
        data,
        {"accountId": str(own), "recipientAzureTag": bob.tag},
        {
            "accountId": id_for(own, other, bob.primary),
            "recipientAzureTag": st.one_of(text_for(bob.tag), st.just(alice.tag)),
            "amount": AMOUNT,
            "authorizationId": st.just("drawn once the authorization is minted"),
            "Idempotency-Key": KEY,
        },
    )
    # An authorization to spend: for the amount sent when it is one the mint can grant.
    value = amount_value(d.amount)
    granted = d.amount if value is not None and value <= 5000 else "1"
    minted = _post(
        world,
        MINT,
        raw_json({"accountId": str(own), "recipientAzureTag": bob.tag, "pin": PIN}, granted),
    )
    assert minted.status_code == 201, minted.text
    authorization = uuid.UUID(minted.json()["authorizationId"])
    values = dict(d.values)
    if d.field == "authorizationId":
        values["authorizationId"] = data.draw(id_for(authorization), label="authorization")
    else:
        values["authorizationId"] = str(authorization)
    raw = raw_json(values, d.amount)
    account = _uuid(server_view(raw, "accountId"))
    key_valid, first = key_sent(d.key, world.keys_of("transfer"))
    valid = (
        account == own
        and server_view(raw, "recipientAzureTag") == bob.tag
        and value == Decimal(granted)
        and _uuid(server_view(raw, "authorizationId")) == authorization
        and key_valid
    )
    codes = {
        "accountId": frozenset({"AUTHORIZATION_INVALID"}),
        "recipientAzureTag": frozenset(
            {"PAYEE_NOT_FOUND", "PAYEE_INVALID", "AUTHORIZATION_INVALID"}
        ),
        "amount": frozenset({"AUTHORIZATION_INVALID"}),
        "authorizationId": frozenset({"AUTHORIZATION_INVALID"}),
        "Idempotency-Key": KEY_CODES,
    }[d.field]
    moves = (
        {own: -value.quantize(CENT), bob.primary: value.quantize(CENT)} if valid and value else {}
    )
    plain = all(
        _plain(server_view(raw, n), a)
        for n, a in (("accountId", own), ("authorizationId", authorization))
    )
    sent = Sent("transfer", d.field, valid, codes, moves, valid and first and plain)
    return sent, _post(world, TRANSFER, raw, d.key)


def send_pin_enrol(world: World, data: Any) -> tuple[Sent, Any]:
    world.reset_pins()
    d = draw(
        data,
        {"password": PASSWORD, "pin": PIN},
        {"password": text_for(PASSWORD), "pin": PIN_LIKE},
    )
    raw = raw_json(d.values, None)
    password, pin = server_view(raw, "password"), server_view(raw, "pin")
    valid = password == PASSWORD and is_valid_pin(pin)
    codes = {"password": frozenset({"INVALID_PASSWORD"}), "pin": frozenset()}[d.field]
    sent = Sent("pin_enrol", d.field, valid, codes, must_succeed=valid)
    headers = {**world.bank.headers(world.carol), "content-type": "application/json"}
    return sent, world.bank.client.post("/api/pin", content=raw, headers=headers)


def send_pin_change(world: World, data: Any) -> tuple[Sent, Any]:
    world.reset_pins()
    d = draw(
        data,
        {"currentPin": PIN, "newPin": NEW_PIN},
        {"currentPin": PIN_LIKE, "newPin": st.one_of(text_for(NEW_PIN), PIN_LIKE)},
    )
    raw = raw_json(d.values, None)
    current, new = server_view(raw, "currentPin"), server_view(raw, "newPin")
    valid = current == PIN and is_valid_pin(new)
    codes = {
        "currentPin": frozenset({"PIN_REQUIRED", "INVALID_PIN"}),
        "newPin": frozenset(),
    }[d.field]
    sent = Sent("pin_change", d.field, valid, codes, must_succeed=valid)
    headers = {**world.bank.headers(world.alice), "content-type": "application/json"}
    return sent, world.bank.client.put("/api/pin", content=raw, headers=headers)


OPERATIONS: dict[str, Callable[[World, Any], tuple[Sent, Any]]] = {
    "mint": send_mint,
    "transfer": send_transfer,
    "internal_transfer": send_internal,
    "deposit": send_rail(DEPOSIT, "deposit", +1),
    "withdrawal": send_rail(WITHDRAWAL, "withdrawal", -1),
    "pin_enrol": send_pin_enrol,
    "pin_change": send_pin_change,
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_every_string_and_amount_input_succeeds_only_when_valid_else_a_declared_refusal_naming_it(
    world: World, operation: str
) -> None:
    @PROPERTY
    @given(data=st.data())
    def example(data: st.DataObject) -> None:
        run(world, lambda: OPERATIONS[operation](world, data))

    example()
