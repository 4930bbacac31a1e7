"""NoticeSweep (ADR-0048 D2, DESIGN §6): one pass of one runner over the owed rows.

    renew → claim → re-read by name → deliver each, while this sweep's own lease is live

The timer Function, the API's loop and the verb all run exactly this. A sweep never raises an
ordinary exception: one that fails as a whole is logged at Error by exception type and reported
in its summary, and the rows it holds stay owed for the next sweep or the next runner (D1, D7).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine

from shared.clock import Clock
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.notices.claim import NoticeClaim
from shared.notices.delivery import NoticeDeliveryRun
from shared.notices.outcomes import FAILURES, DeliveryOutcome, DeliveryStatus
from shared.notices.status import LeaseHolder, lease_holders
from shared.notices.transports import NoticeTransport, transport_from_settings
from shared.settings import CONTACT_MISSING, Settings, SettingsError

log = logging.getLogger("azurebank.notices.sweep")


@dataclass
class NoticeSweepSummary:
    """What one sweep did, filled in by the sweep as it goes; read it, never write it. Evidence
    findings are not counted here (ADR-0052 consequences)."""

    runner: str
    lease_until: datetime | None = None
    renewed: int = 0  # rows this runner already held, renewed to the new lease end
    claimed_ids: tuple[uuid.UUID, ...] = field(default=(), repr=False)  # newly claimed rows
    held: int = 0  # rows held after the claim, as re-read by name
    delivered: int = 0
    refused: int = 0  # the name already existed (ADR-0048 D3)
    failed: int = 0  # unusable address, unrenderable kind, transport failure
    taken: int = 0  # the mark found the row already delivered
    not_attempted: int = 0  # held but not tried: the lease ran out, or the caller excluded it
    other_holders: tuple[LeaseHolder, ...] = ()  # other runners' live leases on owed rows
    lease_lapsed: bool = False  # this sweep outlived its own lease and stopped delivering
    failed_whole: str | None = None  # exception type of a sweep that failed as a whole

    @property
    def claimed(self) -> int:
        """Rows newly claimed by this sweep."""
        return len(self.claimed_ids)

    @property
    def held_by_others(self) -> int:
        """Owed rows under another runner's live lease."""
        return sum(h.rows for h in self.other_holders)

    def line(self) -> str:
        """One Information line; it names rows by count only."""
        return (
            f"Notice sweep by {self.runner}: held {self.held} (renewed {self.renewed}, claimed "
            f"{self.claimed}), delivered {self.delivered}, refused {self.refused}, failed "
            f"{self.failed}, taken {self.taken}, not attempted {self.not_attempted}; "
            f"{self.held_by_others} held by other runners"
        )


class NoticeSweep:
    """One runner's sweep; build once per runner and call `run()` once per tick."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        transport: NoticeTransport,
        *,
        runner: str,
        lease_seconds: int,
        batch_size: int,
        contact: str,
        claim: NoticeClaim | None = None,
    ) -> None:
        self.runner = runner
        self._engine = engine
        self._clock = clock
        self.transport = transport
        self.claim = claim or NoticeClaim(
            runner, lease_seconds=lease_seconds, batch_size=batch_size
        )
        self._delivery = NoticeDeliveryRun(engine, clock, transport, self.claim, contact=contact)

    @classmethod
    def from_settings(
        cls,
        engine: Engine,
        clock: Clock,
        settings: Settings,
        runner: str,
        *,
        lease_seconds: int | None = None,
        transport: NoticeTransport | None = None,
    ) -> NoticeSweep:
        """A sweep configured by the `Notices` section (call `require_host` first).
        `lease_seconds` overrides Notices__LeaseSeconds (the verb's lease is two minutes, D5)."""
        notices = settings.Notices
        if not notices.Contact:
            raise SettingsError([CONTACT_MISSING])
        return cls(
            engine,
            clock,
            transport or transport_from_settings(settings),
            runner=runner,
            lease_seconds=notices.LeaseSeconds if lease_seconds is None else lease_seconds,
            batch_size=notices.BatchSize,
            contact=notices.Contact,
        )

    def run(
        self,
        *,
        exclude: Collection[uuid.UUID] = (),
        on_outcome: Callable[[DeliveryOutcome], None] | None = None,
    ) -> NoticeSweepSummary:
        """One sweep. `exclude`: held rows not to attempt this time (still renewed and held),
        e.g. the verb's rows that already failed once in the same run. `on_outcome` sees each
        outcome as it happens."""
        summary = NoticeSweepSummary(self.runner)
        try:
            self._run(summary, exclude, on_outcome)
        except Exception as exc:
            # D1/D7: Error, by type only: a driver's message can carry bound parameters.
            log.error(
                "Notice sweep by %s failed as a whole with %s; the rows it holds stay owed",
                self.runner,
                type(exc).__name__,
            )
            summary.failed_whole = type(exc).__name__
        return summary

    def _run(
        self,
        summary: NoticeSweepSummary,
        exclude: Collection[uuid.UUID],
        on_outcome: Callable[[DeliveryOutcome], None] | None,
    ) -> None:
        now = self._clock.now()
        # A writing unit: the claim queues for the right to write rather than failing to upgrade.
        with writing_unit_of_work(self._engine) as session:
            taken = self.claim.take(session, now)
            session.commit()
        summary.lease_until = taken.lease_until
        summary.renewed = taken.renewed
        summary.claimed_ids = taken.claimed_ids
        with unit_of_work(self._engine) as session:
            # ADR-0048 D2: by name, never by the instant; with each row's address and evidence.
            held = self.claim.held(session)
            summary.other_holders = lease_holders(
                session, now, live_only=True, excluding=self.runner
            )
        summary.held = len(held)

        for position, notice in enumerate(held):
            if self._clock.now() >= taken.lease_until:
                self._lease_lapsed(summary, taken.lease_until, len(held) - position)
                break
            if notice.id in exclude:
                summary.not_attempted += 1
                continue
            outcome = self._delivery.deliver(notice)
            _count(summary, outcome)
            if on_outcome is not None:
                on_outcome(outcome)

        if summary.held:  # an idle sweep says nothing, every period
            log.info("%s", summary.line())

    def _lease_lapsed(self, summary: NoticeSweepSummary, ended: datetime, left: int) -> None:
        # D2: a sweep that outlives its own lease stops delivering and says so; another runner
        # may already have taken these rows over.
        summary.lease_lapsed = True
        summary.not_attempted += left
        log.warning(
            "Notice sweep by %s outlived its own lease (ended %s); it stops delivering "
            "with %d held rows not attempted",
            self.runner,
            ended.isoformat(),
            left,
        )


def _count(summary: NoticeSweepSummary, outcome: DeliveryOutcome) -> None:
    if outcome.status is DeliveryStatus.DELIVERED:
        summary.delivered += 1
    elif outcome.status is DeliveryStatus.REFUSED:
        summary.refused += 1
    elif outcome.status is DeliveryStatus.TAKEN:
        summary.taken += 1
    elif outcome.status in FAILURES:
        summary.failed += 1
