"""Helpers for the runner tests: owed notices in a real database, and reading them back.

Each call makes its own user (unique tag), so tests sharing a database never see each other's
notices unless they count the whole table (those use a database of their own).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, event, func, insert, select

from shared.db.engine import get_engine
from shared.db.schema import NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work
from shared.notices.hosted import HostedKind, HostedRelay, is_named
from shared.notices.runner_name import make_runner_name
from shared.settings import Settings, require_host
from tests.support import make_user

_NOTICES = SubscriberNotice.__table__


def owe_notices(db_url: str, count: int = 1, *, user_id: str | None = None) -> list[uuid.UUID]:
    """`count` owed PinEnrolled notices of one (new) user, oldest first, committed."""
    user = user_id or make_user(db_url).user_id
    start = datetime.now(UTC) - timedelta(seconds=count)
    ids = [uuid.uuid4() for _ in range(count)]
    rows = [
        {
            "Id": notice_id,
            "UserId": user,
            "Kind": NoticeKind.PIN_ENROLLED.value,
            "CreatedAt": start + timedelta(milliseconds=i),
        }
        for i, notice_id in enumerate(ids)
    ]
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(insert(_NOTICES), rows)
        session.commit()
    return ids


@dataclass(frozen=True)
class NoticeState:
    delivered_at: datetime | None
    receipt: str | None
    leased_by: str | None


def notice_state(db_url: str, notice_id: uuid.UUID) -> NoticeState:
    with unit_of_work(get_engine(db_url)) as session:
        row = session.execute(
            select(_NOTICES.c.DeliveredAt, _NOTICES.c.DeliveryReceipt, _NOTICES.c.LeasedBy).where(
                _NOTICES.c.Id == notice_id
            )
        ).one()
    return NoticeState(row[0], row[1], row[2])


def owed_count(db_url: str) -> int:
    with unit_of_work(get_engine(db_url)) as session:
        return int(
            session.scalar(select(func.count()).where(_NOTICES.c.DeliveredAt.is_(None))) or 0
        )


@contextmanager
def connection_attempts() -> Iterator[list[str]]:
    """Every database connection any engine tries to open inside the block, by dialect (psycopg
    connects through libpq, so a socket watch would not see it; SQLAlchemy's hook does)."""
    attempts: list[str] = []

    def record(dialect: Any, _record: Any, _cargs: Any, _cparams: Any) -> None:
        attempts.append(str(dialect.name))

    event.listen(Engine, "do_connect", record)
    try:
        yield attempts
    finally:
        event.remove(Engine, "do_connect", record)


class FakeSweep:
    """Stands in for a NoticeSweep where only a host's loop or tick is under test: each run calls
    `work` (the sweep's own protocol is tested on real databases elsewhere)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._work = work

    def run(self) -> Any:
        return self._work()


def hosted(kind: HostedKind, settings: Settings, work: Callable[[], Any]) -> HostedRelay:
    """A HostedRelay as `shared.bootstrap.hosted_relay` builds it (settings checked, the flag
    read once), with `work` in place of the sweep when the flag names this kind."""
    require_host(settings, kind)
    if not is_named(settings, kind):
        return HostedRelay(kind, settings)
    sweep = FakeSweep(work)
    return HostedRelay(
        kind,
        settings,
        runner=make_runner_name(kind),
        target="pickup directory (Notices__PickupDirectory)",
        sweep=lambda: sweep,
    )
