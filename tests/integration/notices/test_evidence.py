"""ADR-0052: the evidence check, named after the ADR's own tests, on SQLite and PostgreSQL.

Each case runs a real sweep into a pickup directory and reads the findings it reports; every
notice is delivered whatever the finding (a finding is a Warning and changes nothing else).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, update

from shared.db.schema import AuditEvent, NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work
from shared.notices.delivery import DeliveryOutcome, EvidenceFinding, EvidenceQuestion
from shared.notices.transports import PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.notices import add_audit_event, add_notice, make_sweep
from tests.support.users import add_user

CHANGED = NoticeKind.PIN_CHANGED
ENROLLED = NoticeKind.PIN_ENROLLED


def _sweep_findings(
    engine: Engine, clock: FakeClock, pickup: Path, expect_delivered: int
) -> list[EvidenceFinding]:
    outcomes: list[DeliveryOutcome] = []
    summary = make_sweep(engine, clock, PickupDirectoryTransport(pickup)).run(
        on_outcome=outcomes.append
    )
    # A finding changes no count: every notice is still delivered.
    assert summary.delivered == expect_delivered and summary.failed == 0
    return [o.finding for o in outcomes if o.finding is not None]


def _enrolled_then_changes(
    engine: Engine, changes: int
) -> tuple[str, list[uuid.UUID], list[uuid.UUID]]:
    """A user who enrolled a PIN and changed it `changes` times: each notice names its own row."""
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        events = [add_audit_event(session, user_id, ENROLLED)]
        notices = [add_notice(session, user_id, kind=ENROLLED, audit_event_id=events[0])]
        for _ in range(changes):
            events.append(add_audit_event(session, user_id, CHANGED))
            notices.append(add_notice(session, user_id, kind=CHANGED, audit_event_id=events[-1]))
        session.commit()
    return user_id, events, notices


def _delete_audit_row(engine: Engine, event_id: uuid.UUID) -> None:
    with unit_of_work(engine) as session:
        session.execute(delete(AuditEvent).where(AuditEvent.Id == event_id))
        session.commit()


def _point(engine: Engine, notice_id: uuid.UUID, event_id: uuid.UUID | None) -> None:
    with unit_of_work(engine) as session:
        session.execute(
            update(SubscriberNotice)
            .where(SubscriberNotice.Id == notice_id)
            .values(AuditEventId=event_id)
        )
        session.commit()


# ADR-0052's name: ANoticeWhoseOwnAuditRowIsGone_IsFOUND_WhileTheUsersOtherRowsSurvive
@pytest.mark.adr("0052", "D2", "D3")
def test_a_notice_whose_own_audit_row_is_gone_is_found_while_the_users_other_rows_survive(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, events, notices = _enrolled_then_changes(engine, changes=3)
    _delete_audit_row(engine, events[2])  # the second change's evidence; the others survive
    with caplog.at_level(logging.WARNING, logger="azurebank.notices.evidence"):
        findings = _sweep_findings(engine, clock, pickup, expect_delivered=4)
    assert findings == [EvidenceFinding(notices[2], CHANGED, events[2], EvidenceQuestion.EXACT)]
    assert findings[0].line == (
        f"NO AUDIT ROW: notice {notices[2]} (PinChanged): the PinChanged row it names, "
        f"{events[2]}, is gone, or is not this notice's"
    )
    warnings = [r for r in caplog.records if r.name == "azurebank.notices.evidence"]
    assert [(r.levelno, r.getMessage()) for r in warnings] == [(logging.WARNING, findings[0].line)]


@pytest.mark.parametrize(
    "onto", ["another kind's row of the same user", "the same kind's row of another user"]
)
# ADR-0052's name: ANoticeRePointedAtAnotherRow_IsStillFound_BecauseTheNamedRowMustBeThisNotices
@pytest.mark.adr("0052", "D3")
def test_a_notice_re_pointed_at_another_row_is_still_found(
    onto: str, engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    _, events, notices = _enrolled_then_changes(engine, changes=1)
    if onto == "another kind's row of the same user":
        target = events[0]  # the enrolment's row: it exists, but it is a PinEnrolled row
    else:
        _, other_events, _ = _enrolled_then_changes(engine, changes=1)
        target = other_events[1]  # a PinChanged row, but another user's
    _delete_audit_row(engine, events[1])
    _point(engine, notices[1], target)
    findings = _sweep_findings(
        engine, clock, pickup, expect_delivered=4 if "another user" in onto else 2
    )
    assert findings == [EvidenceFinding(notices[1], CHANGED, target, EvidenceQuestion.EXACT)]
    assert "is gone, or is not this notice's" in findings[0].line


# ADR-0052's name: ARePointToANOTHERRowOfTHESAMEKind_IsNotCaught_AndThisPinsHowFarD3Reaches
@pytest.mark.adr("0052", "D3")
def test_a_re_point_to_another_row_of_the_same_kind_is_not_caught(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    """ADR-0052 D3's limit: (ActorUserId, Event) cannot see a re-point within one kind. Zero
    findings is the pinned behaviour; this goes red the day an integrity binding arrives."""
    _, events, notices = _enrolled_then_changes(engine, changes=2)
    _delete_audit_row(engine, events[2])
    _point(engine, notices[2], events[1])  # the same user's other PinChanged row
    assert _sweep_findings(engine, clock, pickup, expect_delivered=3) == []


# ADR-0052's name: ANULLEDPointer_IsAskedTheOldQuestion_SoAnotherRowOfItsKindAnswersForIt
@pytest.mark.adr("0052", "D3", "D6")
def test_a_nulled_pointer_is_asked_the_old_question_so_another_row_of_its_kind_answers(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    """ADR-0052 (the nulled pointer, under D3's limit): a null is how the run knows a notice
    written before the column, so it gets the weaker question, which another row answers."""
    _, events, notices = _enrolled_then_changes(engine, changes=2)
    _delete_audit_row(engine, events[2])
    _point(engine, notices[2], None)
    assert _sweep_findings(engine, clock, pickup, expect_delivered=3) == []


# ADR-0052's name: ANoticeThatNamesNoRow_StillGetsTheWeakerQuestion_WhichIsTheBacklogsShape
@pytest.mark.adr("0052", "D6")
def test_a_notice_that_names_no_row_still_gets_the_weaker_question(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    with unit_of_work(engine) as session:
        backed_user = add_user(session).user_id
        add_audit_event(session, backed_user, ENROLLED)
        add_notice(session, backed_user, kind=ENROLLED)  # pre-migration shape, evidence stands
        bare_user = add_user(session).user_id
        bare = add_notice(session, bare_user, kind=ENROLLED)  # pre-migration shape, no evidence
        session.commit()
    findings = _sweep_findings(engine, clock, pickup, expect_delivered=2)
    assert findings == [EvidenceFinding(bare, ENROLLED, None, EvidenceQuestion.WEAKER)]
    assert findings[0].line == (
        f"NO AUDIT ROW: notice {bare} (PinEnrolled): no PinEnrolled row exists for that user at "
        "all — this notice names no row, so that is the weaker question"
    )


@pytest.mark.adr("0052", "D3", "D6")
def test_one_sweeps_single_read_still_answers_each_notice_its_own_question(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    """The sweep reads every held row's evidence in one statement (bench/README.md, Relay); each
    notice must still get its own answer, even where several notices name the same audit row or
    the same user's rows: D3's pair per notice, D6's weaker question only for a null pointer."""
    _, events, notices = _enrolled_then_changes(engine, changes=3)
    _, other_events, other_notices = _enrolled_then_changes(engine, changes=1)
    _delete_audit_row(engine, events[1])  # the first change's own row: gone (exact, found)
    _point(engine, notices[2], other_events[1])  # another user's PinChanged row (exact, found)
    _point(engine, notices[3], events[0])  # its own user's enrolment row (exact, found)
    _point(engine, other_notices[0], None)  # null pointer, the user has an enrolment row: stands
    with unit_of_work(engine) as session:
        bare_user = add_user(session).user_id
        bare = add_notice(session, bare_user, kind=ENROLLED)  # null pointer, no row at all
        session.commit()

    findings = _sweep_findings(engine, clock, pickup, expect_delivered=7)
    assert sorted(findings, key=lambda f: str(f.notice_id)) == sorted(
        [
            EvidenceFinding(notices[1], CHANGED, events[1], EvidenceQuestion.EXACT),
            EvidenceFinding(notices[2], CHANGED, other_events[1], EvidenceQuestion.EXACT),
            EvidenceFinding(notices[3], CHANGED, events[0], EvidenceQuestion.EXACT),
            EvidenceFinding(bare, ENROLLED, None, EvidenceQuestion.WEAKER),
        ],
        key=lambda f: str(f.notice_id),
    )
