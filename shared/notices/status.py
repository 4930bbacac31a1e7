"""Owed rows and who holds them (`azurebank notices status`, and the verb's "held by others").
A lease proves only that it is unexpired, nothing about the process holding it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Engine, Select, Table, bindparam, case, func, select
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.prebuilt import prebuilt
from shared.db.schema import SubscriberNotice
from shared.db.uow import unit_of_work
from shared.notices.claim_sql import lease_free

_NOTICES = cast(Table, SubscriberNotice.__table__)
_OWED = _NOTICES.c.DeliveredAt.is_(None)
_BACKLOG = select(func.count(), func.min(_NOTICES.c.CreatedAt)).where(_OWED)


@dataclass(frozen=True)
class LeaseHolder:
    runner: str
    rows: int  # owed rows leased to it
    # Rows are renewed together: the two lapses differ only across a renewal that failed half-way.
    first_lapse: datetime
    last_lapse: datetime

    def live(self, now: datetime) -> bool:
        return self.last_lapse > now


@dataclass(frozen=True)
class OwedStatus:
    now: datetime
    owed: int
    free: int  # never leased, or leased under a lease that has lapsed
    holders: tuple[LeaseHolder, ...]
    oldest_owed_id: uuid.UUID | None
    oldest_owed_at: datetime | None

    @property
    def held_live(self) -> int:
        return self.owed - self.free

    @property
    def oldest_owed_age(self) -> timedelta | None:
        return None if self.oldest_owed_at is None else self.now - self.oldest_owed_at


@dataclass(frozen=True)
class OwedBacklog:
    """How many notices are owed and since when: what an operator alerts on."""

    owed: int
    oldest_owed_age: timedelta  # zero when nothing is owed


def owed_backlog_reader(engine: Engine, clock: Clock) -> Callable[[], OwedBacklog]:
    """The telemetry gauges' read, once per collection: one statement over the owed rows, which
    the partial index by CreatedAt serves."""

    def read() -> OwedBacklog:
        with unit_of_work(engine) as session:
            now = clock.now()
            owed, oldest = session.execute(_BACKLOG).one()
        age = timedelta(0) if oldest is None else max(timedelta(0), now - oldest)
        return OwedBacklog(owed=int(owed), oldest_owed_age=age)

    return read


def lease_holders(
    session: Session, now: datetime, *, live_only: bool, excluding: str | None = None
) -> tuple[LeaseHolder, ...]:
    """Runners holding owed rows, by name; with `live_only`, only rows whose lease is unexpired."""
    rows = session.execute(_lease_holders_query(live_only, excluding), {"now": now})
    return tuple(LeaseHolder(str(r[0]), int(r[1]), r[2], r[3]) for r in rows)


@prebuilt
def _lease_holders_query(live_only: bool, excluding: str | None) -> Select[Any]:
    until = _NOTICES.c.LeasedUntil
    conditions: list[ColumnElement[bool]] = [_OWED, _NOTICES.c.LeasedBy.is_not(None)]
    if live_only:
        conditions.append(until > bindparam("now", type_=until.type))
    if excluding is not None:
        conditions.append(_NOTICES.c.LeasedBy != excluding)
    return (
        select(_NOTICES.c.LeasedBy, func.count(), func.min(until), func.max(until))
        .where(*conditions)
        .group_by(_NOTICES.c.LeasedBy)
        .order_by(_NOTICES.c.LeasedBy)
    )


def read_owed_status(session: Session, now: datetime) -> OwedStatus:
    """How many rows are owed, how many are free to claim, who holds the rest, and the oldest."""
    # One statement for both counts, so `free` can never exceed `owed`.
    owed, free = session.execute(
        select(func.count(), func.sum(case((lease_free(_NOTICES, now), 1), else_=0))).where(_OWED)
    ).one()
    oldest = session.execute(
        select(_NOTICES.c.Id, _NOTICES.c.CreatedAt)
        .where(_OWED)
        .order_by(_NOTICES.c.CreatedAt, _NOTICES.c.Id)
        .limit(1)
    ).first()
    return OwedStatus(
        now=now,
        owed=int(owed),
        free=int(free or 0),
        holders=lease_holders(session, now, live_only=False),
        oldest_owed_id=None if oldest is None else oldest[0],
        oldest_owed_at=None if oldest is None else oldest[1],
    )
