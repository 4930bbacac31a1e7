"""ADR-0048 D7 (and D4, ADR-0017): every log record of full sweeps that meet every kind of failure
holds no user's address and no path of a notice file; each kind is logged at its level."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from shared.db.engine import build_engine
from shared.db.schema import NoticeKind
from shared.db.uow import unit_of_work
from shared.notices.delivery import DeliveryOutcome, DeliveryStatus
from shared.notices.transports import NoticeTransport, PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.notices import RacingTransport, SlowTransport, add_notice, make_sweep
from tests.support.users import FRESH, add_user


class ScriptedTransport:
    """Delegates, except for the notices told to fail: their OSError's message echoes the
    notice file's path and the recipient, as a real I/O error or a relay's refusal can."""

    def __init__(self, inner: NoticeTransport, fail: dict[uuid.UUID, str]) -> None:
        self.inner, self.fail = inner, fail

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        if notice_id in self.fail:
            raise OSError(28, f"No space left writing {self.fail[notice_id]}")
        return self.inner.deliver(notice_id, message)


@pytest.mark.adr("0048", "D4", "D7")
@pytest.mark.adr("0017")
# One scenario meeting every kind of failure, so that every record of it is searched at once.
def test_no_address_and_no_notice_file_path_in_any_log_record_of_a_sweep_with_every_failure(  # noqa: PLR0915
    engine: Engine, clock: FakeClock, pickup: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    addresses: list[str] = []
    with unit_of_work(engine) as session:

        def notice(email: str | None = FRESH, kind: str = NoticeKind.PIN_ENROLLED) -> uuid.UUID:
            user = add_user(session, email=email)
            if user.email and user.email.strip():
                addresses.append(user.email.strip())
            return add_notice(session, user.user_id, kind=kind)

        delivered = notice()
        missing, blank = notice(email=None), notice(email="  ")
        invalid = notice(email="Ada Lovelace <ada.lovelace@example.com>")
        addresses.append("ada.lovelace@example.com")
        unrenderable = notice(kind="PasswordReset")
        transport_fails = notice()
        refused = notice()
        taken = notice()
        gone = add_user(session)
        addresses.append(str(gone.email))
        exact_finding = add_notice(
            session, gone.user_id, kind=NoticeKind.PIN_CHANGED, audit_event_id=uuid.uuid4()
        )
        session.commit()

    existing = pickup / f"{refused}.eml"
    existing.write_bytes(b"an earlier attempt\r\n")
    failing_file = pickup / f"{transport_fails}.eml"
    transport = RacingTransport(
        ScriptedTransport(
            PickupDirectoryTransport(pickup),
            {transport_fails: f"{failing_file} for {addresses[-1]}"},
        ),
        engine,
        {taken},
    )
    paths = [str(pickup), str(existing), str(failing_file), str(tmp_path)]

    caplog.set_level(logging.DEBUG)
    outcomes: list[DeliveryOutcome] = []
    summary = make_sweep(engine, clock, transport, runner="function/h/1/0000000a").run(
        on_outcome=outcomes.append
    )
    # A second runner whose sweep outlives its lease, and one whose database is unreachable.
    with unit_of_work(engine) as session:
        late = add_user(session)
        addresses.append(str(late.email))
        add_notice(session, late.user_id)
        add_notice(session, late.user_id)
        session.commit()
    slow = SlowTransport(PickupDirectoryTransport(pickup), clock, timedelta(seconds=200))
    lapsed = make_sweep(engine, clock, slow, runner="api/h/2/0000000b").run()
    broken_engine = build_engine(f"sqlite:///{tmp_path}/no-such-directory/{addresses[0]}.db")
    try:
        broken = make_sweep(
            broken_engine, clock, PickupDirectoryTransport(pickup), runner="verb/h/3/0000000c"
        ).run()
    finally:
        broken_engine.dispose()

    assert summary.delivered == 2  # the plain one and the one whose evidence is missing
    assert (summary.refused, summary.taken, summary.failed) == (1, 1, 5)
    assert lapsed.lease_lapsed and broken.failed_whole == "DatabaseUnavailable"
    # The verb prints each failure's detail: the exception's type, never its text.
    failure = next(o for o in outcomes if o.notice_id == transport_fails)
    assert (failure.status, failure.detail) == (DeliveryStatus.TRANSPORT_FAILED, "OSError")

    texts = []
    for record in caplog.records:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        texts.append(text)
    leaked = [(t, a) for t in texts for a in addresses + paths if a in t]
    assert leaked == []
    assert all("No space left" not in t for t in texts)  # the OSError's message, never its text

    def levels(fragment: str) -> set[int]:
        return {r.levelno for r in caplog.records if fragment in r.getMessage()}

    def whole(line: str) -> set[int]:
        return {r.levelno for r in caplog.records if r.getMessage() == line}

    assert whole(
        f"Notice delivered: {delivered} (PinEnrolled), receipt pickup:{delivered}.eml"
    ) == {logging.INFO}
    for notice_id, problem in ((missing, "missing"), (blank, "blank"), (invalid, "invalid")):
        # The whole line, as docs/operations.md names it: an operator searches for its start.
        line = (
            f"Notice not delivered: {notice_id} (PinEnrolled): the user's address is {problem}; "
            "the row stays owed"
        )
        assert {r.levelno for r in caplog.records if r.getMessage() == line} == {logging.WARNING}
    assert whole(
        f"Notice not delivered: {unrenderable}: kind 'PasswordReset' has no message;"
        " the row stays owed"
    ) == {logging.WARNING}
    assert whole(
        f"Notice not delivered: {transport_fails} (PinEnrolled): the transport failed with"
        " OSError; the row stays owed"
    ) == {logging.WARNING}
    assert whole(
        f"Notice refused: {refused} (PinEnrolled): the pickup directory (Notices__PickupDirectory)"
        f" already holds {refused}.eml; the row stays owed beside it (runbook: the row is the"
        " truth; move the file and run again, or mark the row)"
    ) == {logging.WARNING}
    assert levels(f"{taken} (PinEnrolled) was already marked delivered") == {logging.WARNING}
    assert levels(f"NO AUDIT ROW: notice {exact_finding}") == {logging.WARNING}
    assert levels("outlived its own lease") == {logging.WARNING}
    assert whole(
        "Notice sweep by verb/h/3/0000000c failed as a whole with DatabaseUnavailable; the rows"
        " it holds stay owed"
    ) == {logging.ERROR}
    # Each sweep that held a row it could attempt ends with its counts, whole.
    assert whole(
        "Notice sweep by function/h/1/0000000a: held 9 (renewed 0, claimed 9), delivered 2,"
        " refused 1, failed 5, taken 1, not attempted 0, resting 0; 0 held by other runners"
    ) == {logging.INFO}
    assert whole(
        "Notice sweep by api/h/2/0000000b: held 2 (renewed 0, claimed 2), delivered 1, refused 0,"
        " failed 0, taken 0, not attempted 1, resting 0; 6 held by other runners"
    ) == {logging.INFO}
