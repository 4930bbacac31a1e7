"""ADR-0052: does the audit row a notice belongs to still stand?

When the notice names its row (`AuditEventId` set) the exact question is asked: that row exists
AND its `(ActorUserId, Event)` is this notice's (D3). When it names none, the old, weaker
existence question is asked (D6): has this user any row of this kind at all. The finding's line
says which question was asked. A finding is a Warning and changes nothing else: no outcome
status, no sweep count, no exit code (ADR-0052 consequences).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.db.schema import AuditEvent


class EvidenceQuestion(enum.StrEnum):
    EXACT = "exact"  # D3: the named row, and it is this notice's
    WEAKER = "weaker"  # D6: any row of this kind for this user


@dataclass(frozen=True)
class EvidenceFinding:
    """NO AUDIT ROW for one notice, with the question that was asked."""

    notice_id: uuid.UUID
    kind: str
    audit_event_id: uuid.UUID | None
    question: EvidenceQuestion

    @property
    def line(self) -> str:
        """The console and log line; it names the notice and the row, never the user's address."""
        if self.question is EvidenceQuestion.EXACT:
            # D3: "gone" and "not this notice's" print as one finding; the repudiation runbook's
            # query tells them apart.
            return (
                f"NO AUDIT ROW: notice {self.notice_id} ({self.kind}): the {self.kind} row it "
                f"names, {self.audit_event_id}, is gone, or is not this notice's"
            )
        return (
            f"NO AUDIT ROW: notice {self.notice_id} ({self.kind}): no {self.kind} row exists for "
            "that user at all — this notice names no row, so that is the weaker question"
        )


def audit_event_of(kind: str) -> str:
    """The AuditEvents.Event a notice of `kind` belongs to: the same name (PinEnrolled,
    PinChanged), as the enrolment and the change write them."""
    return kind


def check_evidence(
    session: Session,
    *,
    notice_id: uuid.UUID,
    user_id: str,
    kind: str,
    audit_event_id: uuid.UUID | None,
) -> EvidenceFinding | None:
    """None when the evidence stands; otherwise the finding, naming the question asked."""
    event = audit_event_of(kind)
    if audit_event_id is not None:
        # D3: Id alone would accept any surviving row; the pair makes it this notice's row.
        # Two predicates on a primary-key lookup.
        found = session.scalar(
            select(AuditEvent.Id).where(
                AuditEvent.Id == audit_event_id,
                AuditEvent.ActorUserId == user_id,
                AuditEvent.Event == event,
            )
        )
        question = EvidenceQuestion.EXACT
    else:
        # D6: a null is how the run knows a notice written before the column existed.
        found = session.scalar(
            select(AuditEvent.Id)
            .where(AuditEvent.ActorUserId == user_id, AuditEvent.Event == event)
            .limit(1)
        )
        question = EvidenceQuestion.WEAKER
    if found is not None:
        return None
    return EvidenceFinding(notice_id, kind, audit_event_id, question)
