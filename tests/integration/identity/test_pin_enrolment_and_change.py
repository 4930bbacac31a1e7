"""`POST /api/pin` and `PUT /api/pin` through HTTP, on SQLite and PostgreSQL (docs/http.md,
docs/security.md): each success leaves exactly one audit row and one owed notice naming it (ADR-0052
D5); a failure injected after the audit row and before the commit leaves nothing; the lockout runs
on the injected clock; no secret reaches a log record or a body."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from shared.audit.chain import AuditChain
from shared.audit.verify import walk_chain
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser, AuditChainTail, AuditEvent, SubscriberNotice
from shared.db.uow import unit_of_work
from shared.identity.passwords import verify_secret
from shared.identity.tokens import issue_token
from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_environ, host_settings
from tests.support.leak_watch import LeakWatch
from tests.support.tokens import bearer
from tests.support.users import make_user

PASSWORD = "a long and honest passphrase 7"
# Six digits, so a PIN cannot turn up by chance inside a hex trace id or a uuid.
PIN = "739154"
NEW_PIN = "602817"
WRONG_PIN = "118422"
CHAIN = AuditChain(b"k" * 32)  # tests.support's Audit__ChainKey


class Caller:
    """One user, their token and a client; every response is shown to the leak watch."""

    def __init__(self, url: str, clock: FakeClock, client: TestClient, watch: LeakWatch) -> None:
        tag = f"pin-{uuid.uuid4().hex[:10]}"
        self.user = make_user(url, clock, password=PASSWORD, tag=tag)
        self.url, self.client, self.watch = url, client, watch
        token = issue_token(host_settings(url), clock, self.user.user_id, minutes=24 * 60)
        self.headers = {"Authorization": f"Bearer {token}"}
        watch.secret("token", token)
        watch.secret("password", PASSWORD)
        watch.secret("address", f"{tag}@example.test")
        for pin in (PIN, NEW_PIN, WRONG_PIN):
            watch.secret("PIN", pin)

    def enrol(self, body: dict[str, Any]) -> Any:
        return self.watch.saw(self.client.post("/api/pin", json=body, headers=self.headers))

    def change(self, body: dict[str, Any]) -> Any:
        return self.watch.saw(self.client.put("/api/pin", json=body, headers=self.headers))

    def state(self) -> dict[str, Any]:
        with unit_of_work(get_engine(self.url)) as session:
            pin_hash, count, until = session.execute(
                select(
                    AspNetUser.PinHash, AspNetUser.PinAccessFailedCount, AspNetUser.PinLockoutEnd
                ).where(AspNetUser.Id == self.user.user_id)
            ).one()
            audits = list(
                session.execute(
                    select(AuditEvent.Id, AuditEvent.Event, AuditEvent.ActorUserId)
                    .where(AuditEvent.ActorUserId == self.user.user_id)
                    .order_by(AuditEvent.Sequence)
                )
            )
            notices = list(
                session.execute(
                    select(
                        SubscriberNotice.Kind,
                        SubscriberNotice.AuditEventId,
                        SubscriberNotice.CreatedAt,
                        SubscriberNotice.DeliveredAt,
                    )
                    .where(SubscriberNotice.UserId == self.user.user_id)
                    .order_by(SubscriberNotice.CreatedAt)
                )
            )
            tail = session.execute(select(AuditChainTail.LastSequence)).scalar_one()
            report = walk_chain(session, CHAIN)
        return {
            "pin_hash": pin_hash,
            "count": count,
            "locked_until": until,
            "audits": [tuple(a) for a in audits],
            "notices": [tuple(n) for n in notices],
            "tail": tail,
            "chain_intact": report.intact,
        }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def caller(db_url: str, clock: FakeClock, leak_watch: LeakWatch) -> Iterator[Caller]:
    with api_client(db_url, clock) as client:
        made = Caller(db_url, clock, client, leak_watch)
        leak_watch.start()
        yield made
    leak_watch.assert_clean()


def _problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["errorCode"] == code
    return body


# --- ADR-0052 D5: one save, one audit row, one notice naming it --------------------------------


@pytest.mark.adr("0045", "D1")
@pytest.mark.adr("0052", "D1", "D5")
def test_enrolment_writes_the_pin_one_audit_row_and_one_owed_notice_naming_it(
    caller: Caller, clock: FakeClock
) -> None:
    response = caller.enrol({"password": PASSWORD, "pin": PIN})
    assert response.status_code == 201
    state = caller.state()
    assert verify_secret(state["pin_hash"], PIN)
    [(audit_id, audit_event, actor)] = state["audits"]
    assert (audit_event, actor) == ("PinEnrolled", caller.user.user_id)
    # ADR-0052 D5: the notice names the very row the chain minted, written in the same save.
    assert state["notices"] == [("PinEnrolled", audit_id, clock.now(), None)]
    assert state["chain_intact"]


@pytest.mark.adr("0047")
@pytest.mark.adr("0052", "D5")
def test_a_change_adds_exactly_one_audit_row_and_one_notice_naming_it(
    caller: Caller, clock: FakeClock
) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    clock.advance(timedelta(minutes=1))
    response = caller.change({"currentPin": PIN, "newPin": NEW_PIN})
    assert response.status_code == 200
    clock.advance(timedelta(minutes=1))
    # ADR-0047: PinChanged is repeatable; each change owes its own notice naming its own row.
    assert caller.change({"currentPin": NEW_PIN, "newPin": PIN}).status_code == 200
    state = caller.state()
    assert verify_secret(state["pin_hash"], PIN)
    assert [a[1] for a in state["audits"]] == ["PinEnrolled", "PinChanged", "PinChanged"]
    assert [(n[0], n[1]) for n in state["notices"]] == [
        (event, audit_id) for audit_id, event, _actor in state["audits"]
    ]
    assert state["chain_intact"]


@contextmanager
def failure_before_commit_after_the_audit_row() -> Iterator[list[str]]:
    """SQLAlchemy events on every session: note what each flush wrote, and when a commit is
    about to run with an audit row already flushed into its transaction, fail. The PIN check's
    own commits carry no audit row and pass."""
    seen: list[str] = []

    def note(session: Session, _context: Any) -> None:
        written = session.info.setdefault("written", set())
        written.update(type(o).__name__ for o in session.new)

    def fail(session: Session) -> None:
        written = session.info.get("written", set())
        if "AuditEvent" in written:
            seen.append(",".join(sorted(written)))  # what the save held when it failed
            raise RuntimeError("injected failure between the audit row and the commit")

    event.listen(Session, "after_flush", note)
    event.listen(Session, "before_commit", fail)
    try:
        yield seen
    finally:
        event.remove(Session, "before_commit", fail)
        event.remove(Session, "after_flush", note)


@pytest.mark.adr("0045", "D1")
def test_a_failure_after_the_audit_row_leaves_no_enrolment_no_audit_row_and_no_notice(
    caller: Caller,
) -> None:
    before = caller.state()
    with failure_before_commit_after_the_audit_row() as seen:
        response = caller.enrol({"password": PASSWORD, "pin": PIN})
    assert seen == ["AuditEvent,SubscriberNotice"]  # it failed with both in the save
    _problem(response, 500, "INTERNAL_ERROR")
    after = caller.state()
    assert after["pin_hash"] is None
    assert after["audits"] == [] and after["notices"] == []
    assert after["tail"] == before["tail"] and after["chain_intact"]


@pytest.mark.adr("0045", "D1")
def test_a_failure_after_the_audit_row_leaves_no_change_no_audit_row_and_no_notice(
    caller: Caller,
) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    before = caller.state()
    with failure_before_commit_after_the_audit_row() as seen:
        response = caller.change({"currentPin": PIN, "newPin": NEW_PIN})
    assert seen == ["AuditEvent,SubscriberNotice"]
    _problem(response, 500, "INTERNAL_ERROR")
    after = caller.state()
    assert after["pin_hash"] == before["pin_hash"]
    assert after["audits"] == before["audits"] and after["notices"] == before["notices"]
    assert after["tail"] == before["tail"] and after["chain_intact"]


# --- the enrolment's rungs (docs/http.md: 401 · 409 · 400) ---------------------------------------


def test_a_wrong_password_is_401_invalid_password_and_writes_nothing(caller: Caller) -> None:
    body = _problem(caller.enrol({"password": PASSWORD + "x", "pin": PIN}), 401, "INVALID_PASSWORD")
    assert "password" not in body.get("errors", "")
    assert caller.state()["audits"] == []


def test_the_wrong_password_rung_comes_before_the_enrolled_and_format_rungs(caller: Caller) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    _problem(caller.enrol({"password": "nope", "pin": "12"}), 401, "INVALID_PASSWORD")
    _problem(caller.enrol({"password": PASSWORD, "pin": "12"}), 409, "PIN_ALREADY_ENROLLED")
    _problem(caller.enrol({"password": PASSWORD, "pin": NEW_PIN}), 409, "PIN_ALREADY_ENROLLED")
    assert len(caller.state()["audits"]) == 1


@pytest.mark.parametrize("pin", ["123", "1234567", "12a4", "１２３４", " 1234", "1234\n"])
def test_a_pin_that_is_not_four_to_six_ascii_digits_is_400_naming_the_field(
    caller: Caller, pin: str
) -> None:
    body = _problem(caller.enrol({"password": PASSWORD, "pin": pin}), 400, "VALIDATION_FAILED")
    assert body["errors"] == [{"field": "pin", "message": "must be 4 to 6 digits (0-9)"}]
    assert caller.state()["pin_hash"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pin": PIN}, "password"),
        ({"password": PASSWORD}, "pin"),
        ({"password": PASSWORD, "pin": 7391}, "pin"),
    ],
)
def test_a_missing_or_mistyped_field_is_400_naming_it_without_its_value(
    caller: Caller, body: dict[str, Any], field: str
) -> None:
    problem = _problem(caller.enrol(body), 400, "VALIDATION_FAILED")
    assert [e["field"] for e in problem["errors"]] == [field]
    assert "7391" not in caller.watch.responses[-1].text


def test_a_body_that_is_not_json_is_400(caller: Caller) -> None:
    response = caller.watch.saw(
        caller.client.post(
            "/api/pin",
            content=b"password=x&pin=1234",
            headers={**caller.headers, "content-type": "application/json"},
        )
    )
    _problem(response, 400, "VALIDATION_FAILED")


# --- the change's rungs (docs/http.md: 422 · 429 · 401) ------------------------------------------


@pytest.mark.parametrize("current", [None, "", "   "])
def test_a_change_without_the_current_pin_is_422_pin_required_and_counts_nothing(
    caller: Caller, current: str | None
) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    body: dict[str, Any] = {"newPin": NEW_PIN}
    if current is not None:
        body["currentPin"] = current
    _problem(caller.change(body), 422, "PIN_REQUIRED")
    assert caller.state()["count"] == 0


def test_a_change_with_no_pin_enrolled_is_422_pin_required(caller: Caller) -> None:
    _problem(caller.change({"currentPin": PIN, "newPin": NEW_PIN}), 422, "PIN_REQUIRED")
    assert caller.state()["count"] == 0


def test_a_malformed_new_pin_is_400_and_spends_no_attempt(caller: Caller) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    body = _problem(
        caller.change({"currentPin": WRONG_PIN, "newPin": "12"}), 400, "VALIDATION_FAILED"
    )
    assert [e["field"] for e in body["errors"]] == ["newPin"]
    assert caller.state()["count"] == 0


# --- the lockout, on the injected clock (docs/security.md) ----------------------------------------


def test_five_wrong_pins_lock_the_sixth_right_pin_is_429_and_after_pin_lockout_end_it_works(
    caller: Caller, clock: FakeClock
) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    for attempt in range(1, 6):
        _problem(caller.change({"currentPin": WRONG_PIN, "newPin": NEW_PIN}), 401, "INVALID_PIN")
        assert caller.state()["count"] == attempt  # durable, although the request failed
    locked = caller.state()
    assert locked["locked_until"] == clock.now() + timedelta(minutes=15)
    clock.advance(timedelta(minutes=14, seconds=30))
    sixth = caller.change({"currentPin": PIN, "newPin": NEW_PIN})
    _problem(sixth, 429, "PIN_LOCKED")
    assert sixth.headers["Retry-After"] == "30"
    still = caller.state()
    assert still["count"] == 5 and verify_secret(still["pin_hash"], PIN)  # nothing changed
    clock.advance(timedelta(seconds=30))  # PinLockoutEnd
    assert caller.change({"currentPin": PIN, "newPin": NEW_PIN}).status_code == 200
    after = caller.state()
    assert after["count"] == 0 and after["locked_until"] is None
    assert verify_secret(after["pin_hash"], NEW_PIN)
    assert [a[1] for a in after["audits"]] == ["PinEnrolled", "PinChanged"]


@pytest.mark.adr("0044")
def test_refusals_write_no_audit_row_and_owe_no_notice(caller: Caller) -> None:
    # ADR-0044: refusals are log-only, no audit row.
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    caller.enrol({"password": "wrong", "pin": PIN})
    caller.change({"newPin": NEW_PIN})
    caller.change({"currentPin": WRONG_PIN, "newPin": NEW_PIN})
    state = caller.state()
    assert len(state["audits"]) == 1 and len(state["notices"]) == 1


def test_without_a_bearer_token_both_operations_are_401_unauthenticated(caller: Caller) -> None:
    enrol = caller.watch.saw(
        caller.client.post("/api/pin", json={"password": PASSWORD, "pin": PIN})
    )
    change = caller.watch.saw(
        caller.client.put("/api/pin", json={"currentPin": PIN, "newPin": NEW_PIN})
    )
    _problem(enrol, 401, "UNAUTHENTICATED")
    _problem(change, 401, "UNAUTHENTICATED")


def test_an_owed_notice_exists_for_every_audited_pin_event_across_the_table(
    db_url: str, caller: Caller
) -> None:
    assert caller.enrol({"password": PASSWORD, "pin": PIN}).status_code == 201
    assert caller.change({"currentPin": PIN, "newPin": NEW_PIN}).status_code == 200
    with unit_of_work(get_engine(db_url)) as session:
        unnamed = session.scalar(
            select(func.count())
            .select_from(SubscriberNotice)
            .where(SubscriberNotice.AuditEventId.is_(None))
        )
        dangling = session.scalar(
            select(func.count())
            .select_from(SubscriberNotice)
            .outerjoin(AuditEvent, AuditEvent.Id == SubscriberNotice.AuditEventId)
            .where(AuditEvent.Id.is_(None))
        )
    assert unnamed == 0 and dangling == 0


def test_a_host_without_audit_chain_key_answers_503_and_logs_the_key_not_a_value(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock, password=PASSWORD)
    environ = host_environ(sqlite_url)
    del environ["Audit__ChainKey"]
    with api_client(sqlite_url, clock, environ) as client:
        response = client.post(
            "/api/pin",
            json={"password": PASSWORD, "pin": PIN},
            headers=bearer(host_settings(sqlite_url), clock, user.user_id),
        )
    _problem(response, 503, "AUDIT_CHAIN_UNAVAILABLE")
    assert any("Audit__ChainKey: missing" in r.getMessage() for r in caplog.records)
    with unit_of_work(get_engine(sqlite_url)) as session:
        assert (
            session.scalar(select(AspNetUser.PinHash).where(AspNetUser.Id == user.user_id)) is None
        )
