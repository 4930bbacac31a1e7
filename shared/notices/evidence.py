"""ADR-0052: does the audit row a notice belongs to still stand?

When the notice names its row (`AuditEventId` set) the exact question is asked: that row exists
AND its `(ActorUserId, Event)` is this notice's (D3). When it names none, the old, weaker
existence question is asked (D6): has this user any row of this kind at all. The finding's line
says which question was asked. A finding is a Warning and changes nothing else: no outcome
status, no sweep count, no exit code (ADR-0052 consequences).

The question is a column (`evidence_stands`) of the sweep's one re-read of what it holds, so every
held notice is answered, each by its own predicates, in one statement; `evidence_finding` turns
one notice's answer into its finding.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, FromClause, Table, case, exists

from shared.db.schema import AuditEvent

_AUDIT = cast(Table, AuditEvent.__table__)
_Kind = TypeVar("_Kind", str, ColumnElement[Any])


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


def audit_event_of(kind: _Kind) -> _Kind:
    """The AuditEvents.Event a notice of `kind` belongs to: the same name (PinEnrolled,
    PinChanged), as the enrolment and the change write them. Given a `Kind` column, the same as
    SQL, so the set-based question below asks exactly this."""
    return kind


def evidence_stands(notices: FromClause) -> ColumnElement[int]:
    """The question for each row of `notices` (SubscriberNotices or an alias), as one column of a
    set-based read: 1 when the evidence stands, 0 when it does not.

    It is asked per notice and exactly as D3 and D6 word it; only the round trip is shared (one
    statement per sweep). The comparison is made in SQL, between columns, so a collation treats
    the pair the way it treats every other comparison of those columns."""
    named, any_of_kind = (_AUDIT.alias("named_row"), _AUDIT.alias("row_of_kind"))
    event = audit_event_of(notices.c.Kind)
    # D3: Id alone would accept any surviving row; the pair makes it this notice's row. Two
    # predicates on a primary-key lookup.
    exact = exists().where(
        named.c.Id == notices.c.AuditEventId,
        named.c.ActorUserId == notices.c.UserId,
        named.c.Event == event,
    )
    # D6: a null is how the run knows a notice written before the column existed.
    weaker = exists().where(
        any_of_kind.c.ActorUserId == notices.c.UserId, any_of_kind.c.Event == event
    )
    # CASE around EXISTS: SQL Server has no boolean in a select list.
    return case(
        (notices.c.AuditEventId.is_not(None), case((exact, 1), else_=0)),
        else_=case((weaker, 1), else_=0),
    )


def evidence_finding(
    *, notice_id: uuid.UUID, kind: str, audit_event_id: uuid.UUID | None, stands: bool
) -> EvidenceFinding | None:
    """None when the evidence stands; otherwise the finding, naming the question asked (the
    exact one when the notice names its row, the weaker one when it names none)."""
    if stands:
        return None
    question = EvidenceQuestion.EXACT if audit_event_id is not None else EvidenceQuestion.WEAKER
    return EvidenceFinding(notice_id, kind, audit_event_id, question)
