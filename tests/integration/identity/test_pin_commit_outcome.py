"""The PIN check's and the PIN changes' commits whose reply is lost (the suite's fault proxy drops
it after the server committed): each answers its own 503 COMMIT_OUTCOME_UNKNOWN, whose title says
what is not known, and the server holds what was committed. The end-to-end tests stage the same
through the served app; these stage it in process, where a mutant of the commit's error meets them.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from shared.audit.chain import AuditChain
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.errors import CommitOutcomeUnknown
from shared.identity.passwords import verify_secret
from shared.identity.pin_service import PinChanges
from shared.identity.pins import verify_pin
from shared.identity.refusals import (
    PinAttemptOutcomeUnknown,
    PinChangeOutcomeUnknown,
    PinEnrolmentOutcomeUnknown,
)
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.users import PASSWORD, enrol_pin, make_user

pytestmark = pytest.mark.postgres

PIN = "482193"
NEW_PIN = "615370"
SETTINGS = PinSettings(MaxFailedAttempts=5, LockoutMinutes=15)


def _row(url: str, user_id: str) -> AspNetUser:
    with unit_of_work(get_engine(url)) as session:
        user = session.get_one(AspNetUser, user_id)
        session.expunge(user)
        return user


def _assert_outcome_unknown(error: CommitOutcomeUnknown, kind: type[CommitOutcomeUnknown]) -> None:
    assert type(error) is kind
    assert (error.status, error.error_code) == (503, "COMMIT_OUTCOME_UNKNOWN")
    assert error.title == kind.title and "not known" in error.title


def test_a_pin_attempt_whose_reservation_reply_is_lost_is_unknown_and_the_attempt_counted(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    user_id = make_user(postgres_url).user_id
    enrol_pin(postgres_url, user_id, PIN)
    checked: list[str] = []

    def counted(stored: str | None, pin: str) -> bool:
        checked.append(pin)
        return verify_secret(stored, pin)

    postgres_proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
    with pytest.raises(CommitOutcomeUnknown) as raised:
        verify_pin(proxied_engine, FakeClock(), SETTINGS, user_id, PIN, verifier=counted)
    _assert_outcome_unknown(raised.value, PinAttemptOutcomeUnknown)
    assert postgres_proxy.count("commit_cut") == 1
    assert checked == [], "the request goes no further than the lost reservation"
    assert _row(postgres_url, user_id).PinAccessFailedCount == 1, "the server had committed"


def test_a_right_pin_whose_reset_reply_is_lost_is_unknown_and_the_count_was_reset(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    user_id = make_user(postgres_url).user_id
    enrol_pin(postgres_url, user_id, PIN)

    def verified_then_cut(stored: str | None, pin: str) -> bool:
        # Between the reservation's commit and the reset's: only the reset's reply is lost.
        postgres_proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
        return verify_secret(stored, pin)

    with pytest.raises(CommitOutcomeUnknown) as raised:
        verify_pin(proxied_engine, FakeClock(), SETTINGS, user_id, PIN, verifier=verified_then_cut)
    _assert_outcome_unknown(raised.value, PinAttemptOutcomeUnknown)
    assert postgres_proxy.count("commit_cut") == 1
    assert _row(postgres_url, user_id).PinAccessFailedCount == 0, "the server had committed"


def _changes(engine: Engine) -> PinChanges:
    return PinChanges(engine, FakeClock(), AuditChain(b"k" * 32), lambda *_: None)


def test_an_enrolment_whose_commit_reply_is_lost_is_its_own_unknown_and_the_pin_is_enrolled(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    user_id = make_user(postgres_url).user_id
    postgres_proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
    with pytest.raises(CommitOutcomeUnknown) as raised:
        _changes(proxied_engine).enrol(user_id, password=PASSWORD, pin=PIN)
    _assert_outcome_unknown(raised.value, PinEnrolmentOutcomeUnknown)
    assert verify_secret(_row(postgres_url, user_id).PinHash, PIN), "the server had committed"


def test_a_change_whose_commit_reply_is_lost_is_its_own_unknown_and_the_new_pin_holds(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    user_id = make_user(postgres_url).user_id
    enrol_pin(postgres_url, user_id, PIN)
    postgres_proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
    with pytest.raises(CommitOutcomeUnknown) as raised:
        _changes(proxied_engine).change(user_id, current_pin=PIN, new_pin=NEW_PIN)
    _assert_outcome_unknown(raised.value, PinChangeOutcomeUnknown)
    assert verify_secret(_row(postgres_url, user_id).PinHash, NEW_PIN), "the server had committed"
