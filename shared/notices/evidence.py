"""Does the audit row a notice belongs to still stand? (ADR-0052 D3, D6 in docs/decisions.md)

A notice naming its row (`AuditEventId`) asks the exact question: that row exists and its
`(ActorUserId, Event)` is this notice's. A notice naming none asks the weaker one: has this user
any row of this kind. The answer is a column (`evidence_stands`) of the sweep's one re-read of
what it holds, each notice by its own predicates; a finding is a Warning and changes nothing else.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import cast

from sqlalchemy import ColumnElement, FromClause, Table, case, exists

from shared.db.schema import AuditEvent

_AUDIT = cast(Table, AuditEvent.__table__)


class EvidenceQuestion(enum.StrEnum):
    EXACT = "exact"  # the named row, and it is this notice's
    WEAKER = "weaker"  # any row of this kind for this user


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
            # "Gone" and "not this notice's" print as one finding; the runbook's query tells them
            # apart.
            return (
                f"NO AUDIT ROW: notice {self.notice_id} ({self.kind}): the {self.kind} row it "
                f"names, {self.audit_event_id}, is gone, or is not this notice's"
            )
        return (
            f"NO AUDIT ROW: notice {self.notice_id} ({self.kind}): no {self.kind} row exists for "
            "that user at all — this notice names no row, so that is the weaker question"
        )


def evidence_stands(notices: FromClause) -> ColumnElement[int]:
    """The question for each row of `notices` (SubscriberNotices or an alias) as one column of a
    set-based read: 1 when the evidence stands, 0 when it does not. A notice of a kind belongs to
    the audit event of the same name (PinEnrolled, PinChanged); the comparison is made in SQL,
    between columns, so a collation treats the pair as every other comparison of them."""
    named, any_of_kind = (_AUDIT.alias("named_row"), _AUDIT.alias("row_of_kind"))
    # Id alone would accept any surviving row; the pair makes it this notice's row.
    exact = exists().where(
        named.c.Id == notices.c.AuditEventId,
        named.c.ActorUserId == notices.c.UserId,
        named.c.Event == notices.c.Kind,
    )
    weaker = exists().where(
        any_of_kind.c.ActorUserId == notices.c.UserId, any_of_kind.c.Event == notices.c.Kind
    )
    # CASE around EXISTS: SQL Server has no boolean in a select list.
    return case(
        (notices.c.AuditEventId.is_not(None), case((exact, 1), else_=0)),
        else_=case((weaker, 1), else_=0),
    )


def evidence_finding(
    *, notice_id: uuid.UUID, kind: str, audit_event_id: uuid.UUID | None, stands: bool
) -> EvidenceFinding | None:
    """None when the evidence stands; otherwise the finding, naming the question asked."""
    if stands:
        return None
    question = EvidenceQuestion.EXACT if audit_event_id is not None else EvidenceQuestion.WEAKER
    return EvidenceFinding(notice_id, kind, audit_event_id, question)
