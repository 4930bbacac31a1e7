"""NoticeClaim: every runner's lease on owed rows (docs/decisions.md#adr-0048-d2). Each statement
is built once per runner (shared/db/prebuilt.py says why); nothing here commits."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    FromClause,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    case,
    exists,
    select,
    update,
)
from sqlalchemy.orm import Session

from shared.db.schema import AspNetUser, AuditEvent, SubscriberNotice
from shared.db.types import column_length
from shared.db.uow import rows_matched
from shared.notices.claim_sql import claim_statement

_NOTICES = cast(Table, SubscriberNotice.__table__)
_USERS = cast(Table, AspNetUser.__table__)
_AUDIT = cast(Table, AuditEvent.__table__)

# A receipt is stored, and compared, cut to its column's length.
_RECEIPT_LENGTH = column_length(SubscriberNotice.DeliveryReceipt)

# The verb's lease is two minutes, whatever Notices__LeaseSeconds says (ADR-0048 D5).
VERB_LEASE_SECONDS = 120


def evidence_stands(notices: FromClause) -> ColumnElement[int]:
    """1 when the notice's audit row stands (ADR-0052 D3, D6), `(ActorUserId, Event)` compared with
    `(UserId, Kind)` in SQL, between columns, so a collation treats them as any other comparison."""
    named, any_of_kind = (_AUDIT.alias("named_row"), _AUDIT.alias("row_of_kind"))

    def of_this_notice(row: FromClause) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
        return (row.c.ActorUserId == notices.c.UserId, row.c.Event == notices.c.Kind)

    exact = exists().where(named.c.Id == notices.c.AuditEventId, *of_this_notice(named))
    weaker = exists().where(*of_this_notice(any_of_kind))
    # CASE around EXISTS: SQL Server has no boolean in a select list.
    return case(
        (notices.c.AuditEventId.is_not(None), case((exact, 1), else_=0)),
        else_=case((weaker, 1), else_=0),
    )


@dataclass(frozen=True)
class HeldNotice:
    """An owed row this runner holds, as re-read by name."""

    id: uuid.UUID
    user_id: str
    kind: str
    created_at: datetime
    audit_event_id: uuid.UUID | None
    # As read back (a store may round it), so nothing is ever looked up by it.
    leased_until: datetime | None
    # The user's Email as stored (None: none). Out of the repr: no log line may hold an address.
    raw_address: str | None = field(repr=False)
    evidence_stands: bool


@dataclass(frozen=True)
class ClaimResult:
    # The instant this runner wrote, kept in memory: the sweep measures its own lease against it,
    # never against a value read back.
    lease_until: datetime
    renewed_ids: frozenset[uuid.UUID]
    claimed_ids: tuple[uuid.UUID, ...]
    resting_ids: frozenset[uuid.UUID] = frozenset()  # renewed, but left out of the batch
    room: int = 0  # how many the claim could stamp: the batch less the live work renewed


class NoticeClaim:
    def __init__(self, runner: str, *, lease_seconds: int, batch_size: int) -> None:
        if lease_seconds < 1 or batch_size < 1:
            raise ValueError("lease_seconds and batch_size must be at least 1")
        self.runner = runner
        self.lease = timedelta(seconds=lease_seconds)
        self.batch_size = batch_size
        self._held = self._held_query()
        # A bind parameter without a value takes the type of the column it is compared or set to.
        self._renew = (
            update(_NOTICES)
            .where(self._held_by_this_runner())
            .values(LeasedUntil=bindparam("lease_until"))
            .returning(_NOTICES.c.Id)
        )
        self._mark = (
            update(_NOTICES)
            .where(_NOTICES.c.Id == bindparam("notice_id"), _NOTICES.c.DeliveredAt.is_(None))
            .values(
                DeliveredAt=bindparam("delivered_at"),
                DeliveryReceipt=bindparam("receipt"),
                LeasedBy=None,
                LeasedUntil=None,
            )
        )
        self._claims: dict[tuple[str, int], Update] = {}  # by dialect and room

    def _held_by_this_runner(self) -> ColumnElement[bool]:
        # What "held" means for renew, held and release alike: owed, and leased under this name.
        return and_(_NOTICES.c.LeasedBy == self.runner, _NOTICES.c.DeliveredAt.is_(None))

    def take(
        self,
        session: Session,
        now: datetime,
        *,
        resting: Collection[uuid.UUID] = (),
        holds_none: bool = False,
    ) -> ClaimResult:
        """Renew what this runner holds, then claim up to `BatchSize − held` more (held leaves out
        the `resting` rows); `holds_none` skips the renew of a runner known to hold none."""
        lease_until = now + self.lease
        renewed = frozenset[uuid.UUID]() if holds_none else self.renew(session, lease_until)
        still_resting = renewed.intersection(resting)
        room = max(self.batch_size - (len(renewed) - len(still_resting)), 0)
        claimed = self.claim(session, now=now, lease_until=lease_until, limit=room) if room else []
        return ClaimResult(lease_until, renewed, tuple(claimed), still_resting, room)

    def renew(self, session: Session, lease_until: datetime) -> frozenset[uuid.UUID]:
        return frozenset(session.scalars(self._renew, {"lease_until": lease_until}))

    def claim(
        self, session: Session, *, now: datetime, lease_until: datetime, limit: int
    ) -> list[uuid.UUID]:
        dialect = session.get_bind().dialect.name
        statement = self._claims.get((dialect, limit))
        if statement is None:
            statement = claim_statement(
                dialect, runner=self.runner, now=now, lease_until=lease_until, limit=limit
            )
            self._claims[(dialect, limit)] = statement
        return list(session.scalars(statement, {"now": now, "lease_until": lease_until}))

    def _held_query(self) -> Select[Any]:
        # By name, never by the instant it wrote: a store that rounds would read back none.
        users = _USERS.alias("notice_user")
        return (
            select(
                _NOTICES.c.Id.label("id"),
                _NOTICES.c.UserId.label("user_id"),
                _NOTICES.c.Kind.label("kind"),
                _NOTICES.c.CreatedAt.label("created_at"),
                _NOTICES.c.AuditEventId.label("audit_event_id"),
                _NOTICES.c.LeasedUntil.label("leased_until"),
                users.c.Email.label("raw_address"),
                evidence_stands(_NOTICES).label("evidence_stands"),
            )
            .outerjoin_from(_NOTICES, users, users.c.Id == _NOTICES.c.UserId)
            .where(self._held_by_this_runner())
            .order_by(_NOTICES.c.CreatedAt, _NOTICES.c.Id)
        )

    def held(self, session: Session) -> list[HeldNotice]:
        return [
            HeldNotice(**{**row._asdict(), "evidence_stands": bool(row.evidence_stands)})
            for row in session.execute(self._held)
        ]

    def release(self, session: Session) -> int:
        """Give up every owed row this runner holds, so another may take them at once."""
        return rows_matched(
            session,
            update(_NOTICES)
            .where(self._held_by_this_runner())
            .values(LeasedBy=None, LeasedUntil=None),
        )

    def mark_delivered(
        self, session: Session, notice_id: uuid.UUID, *, at: datetime, receipt: str
    ) -> bool:
        """Record the delivery and clear the lease; False when the row was already delivered
        (whoever marks first wins, whatever the lease says)."""
        receipt = receipt[:_RECEIPT_LENGTH]
        parameters = {"notice_id": notice_id, "delivered_at": at, "receipt": receipt}
        return rows_matched(session, self._mark, parameters) == 1

    def marked_with(self, session: Session, notice_id: uuid.UUID, receipt: str) -> bool:
        """Whether the row is marked delivered with `receipt`: after a mark whose commit's answer
        was lost, the proof that the commit was this delivery's."""
        stored = session.scalar(
            select(_NOTICES.c.DeliveryReceipt).where(
                _NOTICES.c.Id == notice_id, _NOTICES.c.DeliveredAt.is_not(None)
            )
        )
        return stored == receipt[:_RECEIPT_LENGTH]
