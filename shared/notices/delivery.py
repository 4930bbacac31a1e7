"""NoticeDeliveryRun (ADR-0048 D4): the per-row steps every runner shares, so the runners cannot
drift on what "delivered" costs.

    address → evidence → render → transport → mark

It returns an outcome and logs it (D7); neither the outcome nor a log line holds the address, the
path of a notice file or a recipient, and a transport failure is kept by exception type only,
because an I/O message can echo the path and a relay's refusal can echo the recipient.

What the address and evidence steps decide on is read for every held row at once, in the sweep's
re-read by name (`read_held`): one statement per sweep rather than a read transaction per row
(bench/README.md, Relay). Each row's steps still run in the order above, and each row's evidence
question is still its own, exact one (ADR-0052 D3, D6), asked of the same row version the sweep
holds. The price: a row's address is the one its user had at the re-read, up to one sweep (at
most one lease) before its transport, where it used to be read just before it.

The mark is its own short transaction after the transport, on a connection checked out for it:
no database transaction is held open across file or network I/O; on SQLite the mark begins
IMMEDIATE (a writing unit of work), so it queues for the write lock rather than failing to
upgrade a read; and the pool's
pre-ping replaces a connection that died since the last row, where a connection held for the
whole sweep would fail the one write that must follow a durable file (a file with an unmarked row
is refused every lease until an operator acts, ADR-0048 D3). Measured, that checkout costs about
0.2 ms a row (bench/README.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from typing import cast

from sqlalchemy import Engine, Table
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.schema import AspNetUser, SubscriberNotice
from shared.db.uow import writing_unit_of_work
from shared.notices.address import address_problem
from shared.notices.claim import HeldNotice, NoticeClaim
from shared.notices.evidence import evidence_finding, evidence_stands
from shared.notices.outcomes import DeliveryOutcome, DeliveryStatus
from shared.notices.render import UnrenderableKind, render_notice
from shared.notices.transports import NoticeRefused, NoticeTransport, notice_file_name

log = logging.getLogger("azurebank.notices.delivery")
evidence_log = logging.getLogger("azurebank.notices.evidence")

_NOTICES = cast(Table, SubscriberNotice.__table__)
_USERS = cast(Table, AspNetUser.__table__)
_HELD_FIELDS = len(fields(HeldNotice))

# A Kind comes from a table anyone with write access can edit; it is echoed only this long.
_KIND_SHOWN = 32


@dataclass(frozen=True)
class NoticeParticulars:
    """What one held row's address and evidence steps decide on, read with the row."""

    # The user's Email as stored (None: no user row, or no Email). Out of the repr: no log line,
    # outcome or message may hold an address (D4, D7).
    raw_address: str | None = field(repr=False)
    evidence_stands: bool  # ADR-0052: the exact question's answer, or the weaker one's


class NoticeDeliveryRun:
    """Delivers one held row at a time through `transport`."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        transport: NoticeTransport,
        claim: NoticeClaim,
        *,
        contact: str,
    ) -> None:
        if not contact.strip():
            raise ValueError("a notice needs Notices__Contact (ADR-0048 D6)")
        self._engine = engine
        self._clock = clock
        self._transport = transport
        self._claim = claim
        self._contact = contact
        # ADR-0048 D2's re-read by name, each row with what its address and evidence steps need.
        # Built once: the runner's name is fixed, and building it cost more than running it.
        users = _USERS.alias("notice_user")
        self._read_held = (
            claim.held_query()
            .add_columns(users.c.Email, evidence_stands(_NOTICES))
            .outerjoin_from(_NOTICES, users, users.c.Id == _NOTICES.c.UserId)
        )

    def read_held(self, session: Session) -> list[tuple[HeldNotice, NoticeParticulars]]:
        """What this runner holds, by name, oldest first, each row with its particulars, in one
        statement: one query per sweep instead of a read transaction per row."""
        rows = session.execute(self._read_held)
        return [
            (HeldNotice(*row[:_HELD_FIELDS]), NoticeParticulars(row[-2], bool(row[-1])))
            for row in rows
        ]

    def deliver(self, notice: HeldNotice, particulars: NoticeParticulars) -> DeliveryOutcome:
        """One attempt on one held row; an expected failure is an outcome, not an exception."""
        kind = notice.kind[:_KIND_SHOWN]
        raw_address = particulars.raw_address
        problem = address_problem(raw_address)
        if problem is not None:
            log.warning(
                "Notice not delivered: %s (%s): the user's address is %s; the row stays owed",
                notice.id,
                kind,
                problem.value,
            )
            return DeliveryOutcome(
                notice.id, kind, DeliveryStatus.UNUSABLE_ADDRESS, detail=problem.value
            )
        finding = evidence_finding(
            notice_id=notice.id,
            kind=notice.kind,
            audit_event_id=notice.audit_event_id,
            stands=particulars.evidence_stands,
        )
        if finding is not None:
            # ADR-0052: a Warning, and nothing else changes; the notice is still delivered.
            evidence_log.warning("%s", finding.line)

        try:
            message = render_notice(
                notice_id=notice.id,
                kind=notice.kind,
                occurred_at=notice.created_at,
                address=(raw_address or "").strip(),
                contact=self._contact,
                now=self._clock.now(),
            )
        except UnrenderableKind:
            log.warning(
                "Notice not delivered: %s: kind %r has no message; the row stays owed",
                notice.id,
                kind,
            )
            return DeliveryOutcome(
                notice.id, kind, DeliveryStatus.UNRENDERABLE_KIND, finding=finding
            )

        try:
            receipt = self._transport.deliver(notice.id, message)
        except NoticeRefused:
            # ADR-0048 D3: never overwritten; the row stays owed beside what is already there.
            log.warning(
                "Notice refused: %s (%s): the %s already holds %s; the row stays owed beside it "
                "(runbook: the row is the truth; move the file and run again, or mark the row)",
                notice.id,
                kind,
                self._transport.describe(),
                notice_file_name(notice.id),
            )
            return DeliveryOutcome(notice.id, kind, DeliveryStatus.REFUSED, finding=finding)
        except Exception as exc:
            failure = type(exc).__name__
            log.warning(
                "Notice not delivered: %s (%s): the transport failed with %s; the row stays owed",
                notice.id,
                kind,
                failure,
            )
            return DeliveryOutcome(
                notice.id, kind, DeliveryStatus.TRANSPORT_FAILED, detail=failure, finding=finding
            )

        with writing_unit_of_work(self._engine) as session:
            marked = self._claim.mark_delivered(
                session, notice.id, at=self._clock.now(), receipt=receipt
            )
            session.commit()
        if not marked:
            log.warning(
                "Notice mark found the row taken: %s (%s) was already marked delivered by another "
                "runner; receipt %s is not recorded on it",
                notice.id,
                kind,
                receipt,
            )
            return DeliveryOutcome(
                notice.id, kind, DeliveryStatus.TAKEN, receipt=receipt, finding=finding
            )
        log.info("Notice delivered: %s (%s), receipt %s", notice.id, kind, receipt)
        return DeliveryOutcome(
            notice.id, kind, DeliveryStatus.DELIVERED, receipt=receipt, finding=finding
        )
