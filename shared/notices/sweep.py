"""NoticeSweep: one runner's pass over the owed rows (docs/decisions.md#adr-0048-d2): renew,
claim, re-read by name, deliver while its lease is live, then remove dead runners' temporaries."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine

from shared.clock import Clock
from shared.db.uow import writing_unit_of_work
from shared.notices.claim import NoticeClaim
from shared.notices.delivery import FAILURES, DeliveryOutcome, DeliveryStatus, NoticeDeliveryRun
from shared.notices.status import LeaseHolder, lease_holders
from shared.notices.transports import LeavesTemporaryFiles, NoticeTransport

log = logging.getLogger("azurebank.notices.sweep")


@dataclass
class NoticeSweepSummary:
    """What one sweep did, filled in as it goes; evidence findings are not counted here."""

    runner: str
    lease_until: datetime | None = None
    renewed: int = 0  # rows this runner already held, renewed to the new lease end
    room: int = 0  # how many the claim could take: the batch less the live work renewed
    claimed_ids: tuple[uuid.UUID, ...] = field(default=(), repr=False)  # newly claimed rows
    held: int = 0  # rows held after the claim, as re-read by name
    delivered: int = 0
    refused: int = 0  # the name already existed
    failed: int = 0  # unusable address, unrenderable kind, transport failure
    taken: int = 0  # the mark found the row already delivered
    not_attempted: int = 0  # held but not tried: the lease ran out, or the caller excluded it
    resting: int = 0  # held, refused within the last lease, not attempted until its rest ends
    leftovers_removed: int = 0  # the transport's temporaries of runners that died before a link
    other_holders: tuple[LeaseHolder, ...] = ()  # other runners' live leases on owed rows
    lease_lapsed: bool = False  # this sweep outlived its own lease and stopped delivering
    failed_whole: str | None = None  # exception type of a sweep that failed as a whole

    @property
    def claimed(self) -> int:
        return len(self.claimed_ids)

    @property
    def held_by_others(self) -> int:
        return sum(h.rows for h in self.other_holders)

    def line(self) -> str:
        return (
            f"Notice sweep by {self.runner}: held {self.held} (renewed {self.renewed}, claimed "
            f"{self.claimed}), delivered {self.delivered}, refused {self.refused}, failed "
            f"{self.failed}, taken {self.taken}, not attempted {self.not_attempted}, resting "
            f"{self.resting}; {self.held_by_others} held by other runners"
        )


@dataclass(eq=False)
class NoticeSweep:
    """One runner's sweep, built once per runner, `run()` once per tick. A temporary older than
    `leftover_age`, the longest lease that writes into the target, has no live writer."""

    engine: Engine
    clock: Clock
    claim: NoticeClaim
    delivery: NoticeDeliveryRun
    leftover_age: timedelta = field(kw_only=True)
    # Refused rows resting, each until the end of the lease it was refused under (ADR-0048 D3):
    # in memory, since a restarted process is a new runner.
    _resting: dict[uuid.UUID, datetime] = field(default_factory=dict, init=False)
    # True only after a sweep that ended holding no owed row, so the next one skips the renew.
    _holds_none: bool = field(default=False, init=False)

    @property
    def runner(self) -> str:
        return self.claim.runner

    @property
    def transport(self) -> NoticeTransport:
        return self.delivery.transport

    def run(
        self,
        *,
        exclude: Collection[uuid.UUID] = (),
        on_outcome: Callable[[DeliveryOutcome], None] | None = None,
    ) -> NoticeSweepSummary:
        """One sweep. `exclude`: held rows not to attempt this time (still renewed and held), e.g.
        the verb's rows that already failed once in the same run."""
        summary = NoticeSweepSummary(self.runner)
        try:
            self._run(summary, exclude, on_outcome)
        except Exception as exc:
            # Never raised; by type only: a driver's message can carry bound parameters.
            log.error(
                "Notice sweep by %s failed as a whole with %s; the rows it holds stay owed",
                self.runner,
                type(exc).__name__,
            )
            summary.failed_whole = type(exc).__name__
        self._remove_leftovers(summary)
        return summary

    def _remove_leftovers(self, summary: NoticeSweepSummary) -> None:
        # Every sweep, idle or failed: a crash's temporary holds a whole notice, address
        # included, and the row it belonged to is delivered by whoever takes it over.
        if not isinstance(self.transport, LeavesTemporaryFiles):
            return
        try:
            removed, kept, failure = self.transport.remove_leftovers(
                now=self.clock.now(), older_than=self.leftover_age
            )
        except Exception as exc:
            # By type only, as every relay failure: an OS error's text holds the path.
            log.warning(
                "Notice sweep by %s could not remove leftover temporary files: %s",
                self.runner,
                type(exc).__name__,
            )
            return
        if kept:
            log.warning(
                "Notice sweep by %s could not remove %d leftover temporary files: %s",
                self.runner,
                kept,
                failure,
            )
        summary.leftovers_removed = removed
        if removed:
            # A count, never a name: each name holds a notice's id, and the path may name a home.
            log.info(
                "Notice sweep by %s: removed %d temporary files older than %ds from the %s, "
                "left by runners that died between writing and linking them",
                self.runner,
                removed,
                int(self.leftover_age.total_seconds()),
                self.transport.describe(),
            )

    def _run(
        self,
        summary: NoticeSweepSummary,
        exclude: Collection[uuid.UUID],
        on_outcome: Callable[[DeliveryOutcome], None] | None,
    ) -> None:
        now = self.clock.now()
        resting = {i for i, until in self._resting.items() if until > now}
        holds_none, self._holds_none = self._holds_none, False  # unknown until this sweep ends
        # One writing unit (the claim queues for the right to write rather than failing to
        # upgrade) for renew, claim, the re-read and the other runners' leases, committed once.
        with writing_unit_of_work(self.engine) as session:
            taken = self.claim.take(session, now, resting=resting, holds_none=holds_none)
            held = self.claim.held(session)
            summary.other_holders = lease_holders(
                session, now, live_only=True, excluding=self.runner
            )
            session.commit()
        # A rest ends with its lease, or with the row: marked by an operator, or taken over.
        self._resting = {i: u for i, u in self._resting.items() if i in taken.resting_ids}
        summary.lease_until = taken.lease_until
        summary.renewed = len(taken.renewed_ids)
        summary.room = taken.room
        summary.claimed_ids = taken.claimed_ids
        summary.held = len(held)
        live = [notice for notice in held if notice.id not in taken.resting_ids]
        summary.resting = len(held) - len(live)

        for position, notice in enumerate(live):
            if self.clock.now() >= taken.lease_until:
                # Another runner may already have taken the rest over.
                summary.lease_lapsed = True
                summary.not_attempted += len(live) - position
                log.warning(
                    "Notice sweep by %s outlived its own lease (ended %s); it stops delivering "
                    "with %d held rows not attempted",
                    self.runner,
                    taken.lease_until.isoformat(),
                    len(live) - position,
                )
                break
            if notice.id in exclude:
                summary.not_attempted += 1
                continue
            outcome = self.delivery.deliver(notice)
            _count(summary, outcome)
            if outcome.status is DeliveryStatus.REFUSED:
                # Retried once per lease, not per period: it rests as long as the lease it had.
                self._resting[notice.id] = taken.lease_until
            if on_outcome is not None:
                on_outcome(outcome)

        # Every row it held is now delivered, by this runner or another: the next sweep has
        # nothing to renew (a runner's name is its own; no other process stamps it).
        self._holds_none = summary.delivered + summary.taken == summary.held
        # An idle sweep says nothing, every period; nor does one whose only rows rest.
        if summary.held > summary.resting:
            log.info("%s", summary.line())


def _count(summary: NoticeSweepSummary, outcome: DeliveryOutcome) -> None:
    if outcome.status is DeliveryStatus.DELIVERED:
        summary.delivered += 1
    elif outcome.status is DeliveryStatus.REFUSED:
        summary.refused += 1
    elif outcome.status is DeliveryStatus.TAKEN:
        summary.taken += 1
    elif outcome.status in FAILURES:
        summary.failed += 1
