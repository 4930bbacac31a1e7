"""NoticeDeliveryRun: the per-row steps every runner shares, address → evidence → render →
transport → mark, the mark retried while the lease holds (docs/decisions.md#adr-0048-d4: why)."""

from __future__ import annotations

import enum
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from shared.clock import Clock
from shared.db.uow import writing_unit_of_work
from shared.errors import DatabaseFault
from shared.notices.claim import HeldNotice, NoticeClaim
from shared.notices.render import UnrenderableKind, address_problem, render_notice
from shared.notices.transports import NoticeRefused, NoticeTransport, notice_file_name

log = logging.getLogger("azurebank.notices.delivery")
evidence_log = logging.getLogger("azurebank.notices.evidence")

# A Kind comes from a table anyone with write access can edit; it is echoed only this long.
_KIND_SHOWN = 32
# The mark's tries in all, and the pause before each retry (the last one repeats): about ten
# seconds of pauses, plus each try's own bounds (Database__ConnectTimeoutSeconds and the rest).
MARK_ATTEMPTS = 8
MARK_PAUSES_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.0)
# The mark's log lines, each naming the notice's Id and Kind first.
_MARK_FAILED = (
    "Notice mark failed: %s (%s) was delivered (receipt %s) but its mark failed with %s after %d "
    "tries; the row stays owed beside it (runbook: the row is the truth; mark the row)"
)
_MARK_RETRIED = (
    "Notice mark of %s (%s) failed with %s (a database fault); trying again in %gs while the "
    "lease holds (try %d of %d)"
)
_MARK_TAKEN = (
    "Notice mark found the row taken: %s (%s) was already marked delivered by another runner; "
    "receipt %s is not recorded on it"
)


class EvidenceQuestion(enum.StrEnum):
    EXACT = "exact"  # the named row, and it is this notice's
    WEAKER = "weaker"  # any row of this kind for this user


@dataclass(frozen=True)
class EvidenceFinding:
    """NO AUDIT ROW for one notice (ADR-0052 D3, D6)."""

    notice_id: uuid.UUID
    kind: str
    audit_event_id: uuid.UUID | None
    question: EvidenceQuestion

    @property
    def line(self) -> str:
        """The console and log line; it names the notice and the row, never the user's address."""
        if self.question is EvidenceQuestion.EXACT:
            # One finding for "gone" and "not this notice's": the runbook's query tells them apart.
            return (
                f"NO AUDIT ROW: notice {self.notice_id} ({self.kind}): the {self.kind} row it "
                f"names, {self.audit_event_id}, is gone, or is not this notice's"
            )
        return (
            f"NO AUDIT ROW: notice {self.notice_id} ({self.kind}): no {self.kind} row exists for "
            "that user at all — this notice names no row, so that is the weaker question"
        )


class DeliveryStatus(enum.StrEnum):
    DELIVERED = "delivered"  # handed to the transport and marked; `receipt` is set
    REFUSED = "refused"  # the name already exists at the target; the row stays owed
    UNUSABLE_ADDRESS = "unusable-address"  # no usable Email on the user's row; row stays owed
    UNRENDERABLE_KIND = "unrenderable-kind"  # a Kind this renderer has no message for
    TRANSPORT_FAILED = "transport-failed"  # the transport raised; only its type is kept
    TAKEN = "taken"  # the mark found the row already delivered by another runner


_SETTLED = frozenset({DeliveryStatus.DELIVERED, DeliveryStatus.TAKEN})  # the row is delivered
# The statuses that leave the row owed and held by this runner (counted against its batch).
FAILURES = frozenset(DeliveryStatus) - _SETTLED - {DeliveryStatus.REFUSED}


@dataclass(frozen=True)
class DeliveryOutcome:
    notice_id: uuid.UUID
    kind: str
    status: DeliveryStatus
    receipt: str | None = None
    detail: str | None = None  # safe to print: an AddressProblem value or an exception's type
    finding: EvidenceFinding | None = None

    @property
    def owed(self) -> bool:
        return self.status not in _SETTLED


@dataclass(frozen=True)
class _Attempt:
    notice: HeldNotice
    kind: str  # as shown: cut to _KIND_SHOWN
    finding: EvidenceFinding | None = None

    def outcome(
        self, status: DeliveryStatus, *, detail: str | None = None, receipt: str | None = None
    ) -> DeliveryOutcome:
        return DeliveryOutcome(self.notice.id, self.kind, status, receipt, detail, self.finding)

    def warned(
        self, status: DeliveryStatus, message: str, *args: object, detail: str | None = None
    ) -> DeliveryOutcome:
        """The outcome, after a Warning whose first two arguments are the notice's Id and Kind."""
        log.warning(message, self.notice.id, self.kind, *args)
        return self.outcome(status, detail=detail)


@dataclass(eq=False)
class NoticeDeliveryRun:
    engine: Engine
    clock: Clock
    transport: NoticeTransport
    claim: NoticeClaim
    contact: str = field(kw_only=True)
    sleep: Callable[[float], None] = field(default=time.sleep, kw_only=True)

    def __post_init__(self) -> None:
        if not self.contact.strip():
            raise ValueError("a notice needs Notices__Contact (ADR-0048 D6)")

    def deliver(self, notice: HeldNotice) -> DeliveryOutcome:
        """One attempt on one held row; an expected failure is an outcome, not an exception."""
        kind = notice.kind[:_KIND_SHOWN]
        problem = address_problem(notice.raw_address)
        if problem is not None:
            return _Attempt(notice, kind).warned(
                DeliveryStatus.UNUSABLE_ADDRESS,
                "Notice not delivered: %s (%s): the user's address is %s; the row stays owed",
                problem.value,
                detail=problem.value,
            )
        finding = None
        if not notice.evidence_stands:
            exact = notice.audit_event_id is not None
            question = EvidenceQuestion.EXACT if exact else EvidenceQuestion.WEAKER
            finding = EvidenceFinding(notice.id, notice.kind, notice.audit_event_id, question)
            # A Warning, and nothing else changes (docs/decisions.md#adr-0052-d6).
            evidence_log.warning("%s", finding.line)
        attempt = _Attempt(notice, kind, finding)
        try:
            message = render_notice(
                notice_id=notice.id,
                kind=notice.kind,
                occurred_at=notice.created_at,
                address=(notice.raw_address or "").strip(),
                contact=self.contact,
                now=self.clock.now(),
            )
        except UnrenderableKind:
            return attempt.warned(
                DeliveryStatus.UNRENDERABLE_KIND,
                "Notice not delivered: %s: kind %r has no message; the row stays owed",
            )
        try:
            receipt = self.transport.deliver(notice.id, message)
        except NoticeRefused:
            # Never overwritten: the row stays owed beside what is there (ADR-0048 D3).
            return attempt.warned(
                DeliveryStatus.REFUSED,
                "Notice refused: %s (%s): the %s already holds %s; the row stays owed beside it "
                "(runbook: the row is the truth; move the file and run again, or mark the row)",
                self.transport.describe(),
                notice_file_name(notice.id),
            )
        except Exception as exc:
            failure = type(exc).__name__
            return attempt.warned(
                DeliveryStatus.TRANSPORT_FAILED,
                "Notice not delivered: %s (%s): the transport failed with %s; the row stays owed",
                failure,
                detail=failure,
            )
        return self._mark(attempt, receipt)

    def _mark(self, attempt: _Attempt, receipt: str) -> DeliveryOutcome:
        notice_id = attempt.notice.id
        for try_number in range(1, MARK_ATTEMPTS + 1):
            try:
                marked = self._mark_once(notice_id, receipt, after_fault=try_number > 1)
                break
            except (DatabaseFault, DBAPIError) as exc:
                pause = MARK_PAUSES_SECONDS[min(try_number, len(MARK_PAUSES_SECONDS)) - 1]
                fault = type(exc).__name__
                if not self._may_retry(exc, try_number, pause, attempt.notice.leased_until):
                    log.error(_MARK_FAILED, notice_id, attempt.kind, receipt, fault, try_number)
                    raise
                log.warning(
                    _MARK_RETRIED, notice_id, attempt.kind, fault, pause, try_number, MARK_ATTEMPTS
                )
                self.sleep(pause)
        if not marked:
            log.warning(_MARK_TAKEN, notice_id, attempt.kind, receipt)
            return attempt.outcome(DeliveryStatus.TAKEN, receipt=receipt)
        log.info("Notice delivered: %s (%s), receipt %s", notice_id, attempt.kind, receipt)
        return attempt.outcome(DeliveryStatus.DELIVERED, receipt=receipt)

    def _may_retry(
        self, exc: Exception, try_number: int, pause: float, lease_until: datetime | None
    ) -> bool:
        if not isinstance(exc, DatabaseFault) or try_number >= MARK_ATTEMPTS:
            return False
        # Past its lease the row may be another runner's: that runner's delivery is refused by
        # this file and its operator reads the runbook, as for a runner that died here.
        return lease_until is None or self.clock.now() + timedelta(seconds=pause) < lease_until

    def _mark_once(self, notice_id: uuid.UUID, receipt: str, *, after_fault: bool) -> bool:
        """Whether the row is marked with this delivery's receipt (not another runner's)."""
        with writing_unit_of_work(self.engine) as session:
            marked = self.claim.mark_delivered(
                session, notice_id, at=self.clock.now(), receipt=receipt
            )
            if not marked and after_fault:
                # An earlier try may have committed and lost only its answer.
                return self.claim.marked_with(session, notice_id, receipt)
            session.commit()
        return marked
