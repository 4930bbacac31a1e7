"""NoticeClaim (ADR-0048 D2): the lease on owed rows, shared by every runner.

One sweep's database work, in order:
  renew   what this runner holds (by name) to the new lease end, before anything is delivered;
  claim   up to `BatchSize − held` of the oldest free-or-lapsed owed rows, in one statement;
  held    re-read what it holds, by name, each row with what its delivery's address and
          evidence steps decide on (ADR-0052), in one statement per sweep;
  mark    each delivered row, `DeliveredAt` as the concurrency token, clearing the lease.

Renew, claim and held share the sweep's one unit of work; each mark is its own, after its file.
Every statement is built once per runner, its instants and ids bound at execution
(shared/db/prebuilt.py says why).

The batch caps a runner's live work, rows still held from a failed delivery included, so a runner
that keeps failing never holds more than one lease can deliver. A refused row resting out its lease
(ADR-0048 D3: held, retried and refused every lease) is held and renewed but is not live work: it
is not attempted until its rest ends, so it does not take a place in the batch from the owed rows
behind it. None of these methods commits: the caller's unit of work is the boundary.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Select, Table, Update, and_, bindparam, select, update
from sqlalchemy.orm import Session

from shared.db.schema import AspNetUser, SubscriberNotice
from shared.db.writes import rows_matched
from shared.notices.claim_sql import claim_statement
from shared.notices.evidence import evidence_stands

_NOTICES = cast(Table, SubscriberNotice.__table__)
_USERS = cast(Table, AspNetUser.__table__)

# ADR-0048 D5: the verb's lease is two minutes, whatever Notices__LeaseSeconds says.
VERB_LEASE_SECONDS = 120


@dataclass(frozen=True)
class HeldNotice:
    """An owed row this runner holds, as re-read by name, with its delivery's particulars."""

    id: uuid.UUID
    user_id: str
    kind: str
    created_at: datetime
    audit_event_id: uuid.UUID | None
    # As the store reads it back; it may differ from what was written (a store that rounds), which
    # is why nothing is ever looked up by it.
    leased_until: datetime | None
    # The user's Email as stored (None: no user row, or no Email). Out of the repr: no log line,
    # outcome or message may hold an address (ADR-0048 D4, D7).
    raw_address: str | None = field(repr=False)
    # ADR-0052: the exact question's answer when the notice names its audit row, else the weaker.
    evidence_stands: bool


@dataclass(frozen=True)
class ClaimResult:
    """What one renew-and-claim did. `lease_until` is the instant this runner wrote, kept in memory:
    the sweep measures its own lease against it, never against a value read back."""

    lease_until: datetime
    renewed_ids: frozenset[uuid.UUID]
    claimed_ids: tuple[uuid.UUID, ...]
    # The renewed rows the caller said are resting (refused, waiting out a lease): held, and
    # left out of the batch's count.
    resting_ids: frozenset[uuid.UUID] = frozenset()
    room: int = 0  # how many the claim could stamp: the batch less the live work renewed

    @property
    def renewed(self) -> int:
        """Rows this runner already held, renewed to the new lease end."""
        return len(self.renewed_ids)


class NoticeClaim:
    """The lease protocol for one runner name."""

    def __init__(self, runner: str, *, lease_seconds: int, batch_size: int) -> None:
        if lease_seconds < 1 or batch_size < 1:
            raise ValueError("lease_seconds and batch_size must be at least 1")
        self.runner = runner
        self.lease = timedelta(seconds=lease_seconds)
        self.batch_size = batch_size
        # Built once per runner (shared/db/prebuilt.py): the runner's name is fixed.
        self._held = self._held_query()
        self._renew = (
            update(_NOTICES)
            .where(self._held_by_this_runner())
            .values(LeasedUntil=bindparam("lease_until", type_=_NOTICES.c.LeasedUntil.type))
            .returning(_NOTICES.c.Id)
        )
        self._mark = (
            update(_NOTICES)
            .where(
                _NOTICES.c.Id == bindparam("notice_id", type_=_NOTICES.c.Id.type),
                _NOTICES.c.DeliveredAt.is_(None),
            )
            .values(
                DeliveredAt=bindparam("delivered_at", type_=_NOTICES.c.DeliveredAt.type),
                DeliveryReceipt=bindparam("receipt", type_=_NOTICES.c.DeliveryReceipt.type),
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
        """Renew what this runner holds, then claim up to `BatchSize − held` more, where held
        leaves out the `resting` rows (refused, not to be attempted before their rest ends).
        `holds_none`: the caller knows this runner holds no owed row (its last sweep delivered
        every row it held), so there is nothing to renew and the renewing UPDATE is not sent."""
        lease_until = now + self.lease
        renewed = frozenset[uuid.UUID]() if holds_none else self.renew(session, lease_until)
        still_resting = renewed.intersection(resting)
        room = self.batch_size - (len(renewed) - len(still_resting))
        claimed = (
            self.claim(session, now=now, lease_until=lease_until, limit=room) if room > 0 else []
        )
        return ClaimResult(lease_until, renewed, tuple(claimed), still_resting, max(room, 0))

    def renew(self, session: Session, lease_until: datetime) -> frozenset[uuid.UUID]:
        """Move every owed row this runner holds to the new lease end; the ids it holds."""
        return frozenset(session.scalars(self._renew, {"lease_until": lease_until}))

    def claim(
        self, session: Session, *, now: datetime, lease_until: datetime, limit: int
    ) -> list[uuid.UUID]:
        """Stamp up to `limit` of the oldest free-or-lapsed owed rows in one set-based UPDATE
        (the database serialises two claims); the ids it stamped."""
        dialect = session.get_bind().dialect.name
        statement = self._claims.get((dialect, limit))
        if statement is None:
            statement = claim_statement(
                dialect, runner=self.runner, now=now, lease_until=lease_until, limit=limit
            )
            self._claims[(dialect, limit)] = statement
        return list(session.scalars(statement, {"now": now, "lease_until": lease_until}))

    def _held_query(self) -> Select[Any]:
        # ADR-0048 D2: re-read by name, never by the instant it wrote: a store that rounded the
        # timestamp would otherwise let a runner claim N rows and read back none.
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
        """The owed rows this runner holds, by name, oldest first, each with its particulars."""
        return [
            HeldNotice(**{**row._asdict(), "evidence_stands": bool(row.evidence_stands)})
            for row in session.execute(self._held)
        ]

    def release(self, session: Session) -> int:
        """Give up every owed row this runner holds (a runner that is about to exit), so the next
        run or another runner may take them at once rather than when the lease lapses."""
        return rows_matched(
            session,
            update(_NOTICES)
            .where(self._held_by_this_runner())
            .values(LeasedBy=None, LeasedUntil=None),
        )

    def mark_delivered(
        self, session: Session, notice_id: uuid.UUID, *, at: datetime, receipt: str
    ) -> bool:
        """Record the delivery and clear the lease; False when the row was already delivered."""
        # DeliveredAt is the concurrency token: whoever marks first wins, whatever the lease says,
        # so a runner whose lease lapsed mid-delivery cannot mark a row twice.
        marked = rows_matched(
            session,
            self._mark,
            {"notice_id": notice_id, "delivered_at": at, "receipt": receipt[:400]},
        )
        return marked == 1

    def marked_with(self, session: Session, notice_id: uuid.UUID, receipt: str) -> bool:
        """Whether the row is marked delivered with `receipt`: after a mark whose commit's answer
        was lost, the proof that it was this delivery's own commit."""
        stored = session.scalar(
            select(_NOTICES.c.DeliveryReceipt).where(
                _NOTICES.c.Id == notice_id, _NOTICES.c.DeliveredAt.is_not(None)
            )
        )
        return stored == receipt[:400]
