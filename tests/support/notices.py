"""Notices for the relay's tests: owed rows written with the ORM directly, read back by name,
a sweep built as the hosts build it, and honest transports for the failure paths."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.orm import Session

from shared.bootstrap import bootstrap
from shared.clock import Clock
from shared.db.engine import get_engine
from shared.db.schema import AuditEvent, NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work
from shared.notices.claim import NoticeClaim
from shared.notices.sweep import NoticeSweep
from shared.notices.transports import NoticeTransport
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import CONTACT
from tests.support.users import add_user

# The relay tests' fake clock starts here; their notices are created from here on.
START = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Owed:
    """A notice inserted by a test, and the address its user holds."""

    id: uuid.UUID
    user_id: str
    email: str | None


def _engine(db: Engine | str) -> Engine:
    return db if isinstance(db, Engine) else get_engine(db)


def just_now() -> datetime:
    """A creation time for the hosts' tests, which sweep on the real clock: a moment ago."""
    return datetime.now(UTC) - timedelta(seconds=1)


def add_notice(
    session: Session,
    user_id: str,
    *,
    kind: str = NoticeKind.PIN_ENROLLED,
    created_at: datetime = START,
    audit_event_id: uuid.UUID | None = None,
    leased_by: str | None = None,
    leased_until: datetime | None = None,
) -> uuid.UUID:
    notice_id = uuid.uuid4()
    session.add(
        SubscriberNotice(
            Id=notice_id,
            UserId=user_id,
            Kind=kind,
            CreatedAt=created_at,
            AuditEventId=audit_event_id,
            LeasedBy=leased_by,
            LeasedUntil=leased_until,
        )
    )
    session.flush()
    return notice_id


def add_audit_event(
    session: Session, user_id: str, event: str, *, at: datetime = START
) -> uuid.UUID:
    """An audit row with placeholder hashes: the evidence check reads Id, ActorUserId and Event."""
    sequence = (session.scalar(select(func.max(AuditEvent.Sequence))) or 0) + 1
    event_id = uuid.uuid4()
    session.add(
        AuditEvent(
            Id=event_id,
            Sequence=sequence,
            PayloadVersion=1,
            ActorUserId=user_id,
            Event=event,
            OccurredAt=at,
            PreviousHash=b"\0" * 32,
            RowHash=b"\1" * 32,
        )
    )
    session.flush()
    return event_id


def owed_notices(
    db: Engine | str,
    count: int = 1,
    *,
    users: int = 1,
    kind: str = NoticeKind.PIN_ENROLLED,
    start: datetime = START,
) -> list[Owed]:
    """`count` owed notices spread over `users` new users, created from `start` a millisecond
    apart (oldest first), committed with one insert per table."""
    with unit_of_work(_engine(db)) as session:
        people = [add_user(session) for _ in range(users)]
        rows = [
            {
                "Id": uuid.uuid4(),
                "UserId": people[i % users].user_id,
                "Kind": kind,
                "CreatedAt": start + timedelta(milliseconds=i),
            }
            for i in range(count)
        ]
        if rows:
            session.execute(insert(SubscriberNotice), rows)
        session.commit()
    return [
        Owed(r["Id"], r["UserId"], people[i % users].email)  # type: ignore[arg-type]
        for i, r in enumerate(rows)
    ]


def notice_row(db: Engine | str, notice_id: uuid.UUID) -> SubscriberNotice:
    """The notice's row as the store holds it now (detached: read its columns by name)."""
    with unit_of_work(_engine(db)) as session:
        row = session.get(SubscriberNotice, notice_id)
        assert row is not None
        session.expunge(row)
        return row


def owed_count(db: Engine | str) -> int:
    with unit_of_work(_engine(db)) as session:
        owed = select(func.count()).where(SubscriberNotice.DeliveredAt.is_(None))
        return int(session.scalar(owed) or 0)


# --- honest transports for the failure paths (each implements NoticeTransport) ------------------


class FailingTransport:
    """A transport whose every delivery raises `error` (an OSError echoing a path, by default)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or OSError("cannot write /srv/pickup/secret-spool/notice.eml")
        self.attempts = 0

    def describe(self) -> str:
        return "failing transport"

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        self.attempts += 1
        raise self.error


class SlowTransport:
    """Delegates, but each delivery moves the fake clock on by `step` (a slow disk)."""

    def __init__(self, inner: NoticeTransport, clock: FakeClock, step: timedelta) -> None:
        self.inner, self.clock, self.step = inner, clock, step

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        self.clock.advance(self.step)
        return self.inner.deliver(notice_id, message)


class RacingTransport:
    """Delegates, then another runner marks the same row delivered before this one can."""

    def __init__(self, inner: NoticeTransport, engine: Engine, race: set[uuid.UUID]) -> None:
        self.inner, self.engine, self.race = inner, engine, race

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        receipt = self.inner.deliver(notice_id, message)
        if notice_id in self.race:
            with unit_of_work(self.engine) as session:
                session.execute(
                    update(SubscriberNotice)
                    .where(SubscriberNotice.Id == notice_id)
                    .values(
                        DeliveredAt=START,
                        DeliveryReceipt="another runner's receipt",
                        LeasedBy=None,
                        LeasedUntil=None,
                    )
                )
                session.commit()
        return receipt


def make_sweep(
    engine: Engine,
    clock: Clock,
    transport: NoticeTransport,
    *,
    runner: str = "function/test/1/0000aaaa",
    lease_seconds: int = 120,
    batch_size: int = 100,
    claim: NoticeClaim | None = None,
) -> NoticeSweep:
    """`runner`'s sweep through the composition root, into `transport`, under `claim` when the
    test brings its own: a host's settings with the lease, the batch and the suite's contact."""
    settings = load_settings(
        {
            "Notices__LeaseSeconds": str(lease_seconds),
            "Notices__BatchSize": str(batch_size),
            "Notices__Contact": CONTACT,
        }
    )
    sweep = bootstrap(
        settings, engine, clock, runner=runner, transport=transport, claim=claim
    ).sweep
    assert sweep is not None  # built for the runner named
    return sweep


class CountingTransport:
    """Delegates, counting each attempt per notice: one attempt is one render handed over, one
    temporary file written and fsynced, one link tried."""

    def __init__(self, inner: NoticeTransport) -> None:
        self.inner = inner
        self.attempts: dict[uuid.UUID, int] = {}

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        self.attempts[notice_id] = self.attempts.get(notice_id, 0) + 1
        return self.inner.deliver(notice_id, message)
