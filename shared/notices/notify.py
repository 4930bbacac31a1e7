"""The notify verb's protocol (docs/decisions.md#adr-0048-d5): drain under its own lease, let go
of what it holds at exit, and decide the exit (docs/cli.md#azurebank-notify lists them)."""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine

from shared.clock import Clock
from shared.db.uow import writing_unit_of_work
from shared.notices.delivery import FAILURES, DeliveryOutcome, DeliveryStatus, EvidenceFinding
from shared.notices.status import LeaseHolder, lease_holders
from shared.notices.sweep import NoticeSweep, NoticeSweepSummary

log = logging.getLogger("azurebank.notices.notify")

READING_NOTHING_OWED = "nothing owed"
READING_HELD_BY_OTHERS = "everything owed is held under another runner's live lease"


class NotifyExit(enum.IntEnum):
    DELIVERED = 0
    FAILED = 1  # another failure left rows owed; over 6, since moving a refused file won't fix it
    NOTHING_TO_DO = 2  # nothing owed, or everything owed is held under another's live lease
    REFUSED_FILE = 6  # a notice file already exists


@dataclass
class NotifyReport:
    """What one `notify` did, across all its sweeps."""

    runner: str
    target: str
    sweeps: int = 0
    last: dict[uuid.UUID, DeliveryOutcome] = field(default_factory=dict)
    findings: list[EvidenceFinding] = field(default_factory=list)
    lease_lapsed: bool = False
    failed_whole: str | None = None
    held_by_others: tuple[LeaseHolder, ...] = ()
    released: int = 0  # owed rows this run held at its end and let go of

    @property
    def delivered(self) -> int:
        return sum(o.status is DeliveryStatus.DELIVERED for o in self.last.values())

    @property
    def refused(self) -> list[uuid.UUID]:
        return [i for i, o in self.last.items() if o.status is DeliveryStatus.REFUSED]

    @property
    def failed(self) -> list[DeliveryOutcome]:
        return [o for o in self.last.values() if o.status in FAILURES]

    @property
    def exit_code(self) -> NotifyExit:
        if self.failed_whole or self.lease_lapsed or self.failed:
            return NotifyExit.FAILED
        if self.refused:
            return NotifyExit.REFUSED_FILE
        if self.delivered:
            return NotifyExit.DELIVERED
        return NotifyExit.NOTHING_TO_DO

    @property
    def reading(self) -> str | None:
        """Which reading of exit 2 applies, if it is 2."""
        if self.exit_code != NotifyExit.NOTHING_TO_DO:
            return None
        return READING_HELD_BY_OTHERS if self.held_by_others else READING_NOTHING_OWED


def drain(
    sweep: NoticeSweep,
    engine: Engine,
    clock: Clock,
    *,
    progress: Callable[[int, NoticeSweepSummary, int], None] | None = None,
) -> NotifyReport:
    """Sweep until nothing is free (or the batch is full of rows that failed), the lease lapses,
    or a sweep fails whole; then name what other runners hold under a live lease."""
    report = NotifyReport(runner=sweep.runner, target=sweep.transport.describe())

    def record(outcome: DeliveryOutcome) -> None:
        report.last[outcome.notice_id] = outcome
        if outcome.finding is not None:
            report.findings.append(outcome.finding)

    while True:
        # A row that failed once in this run is not tried again in it: it stays held (and counts
        # against the batch) for the next run or, once the lease lapses, another runner.
        tried_and_owed = frozenset(i for i, o in report.last.items() if o.owed)
        summary = sweep.run(exclude=tried_and_owed, on_outcome=record)
        report.sweeps += 1
        if progress is not None:
            progress(report.sweeps, summary, report.delivered)
        report.failed_whole, report.lease_lapsed = summary.failed_whole, summary.lease_lapsed
        if report.failed_whole or report.lease_lapsed:
            break
        # Nothing is free once a claim leaves room unfilled (or had no room: a batch full of
        # rows that failed; a refused row resting takes no room).
        if summary.claimed == 0 or summary.claimed < summary.room:
            break
    _release_at_exit(sweep, engine, clock, report)
    return report


def _release_at_exit(
    sweep: NoticeSweep, engine: Engine, clock: Clock, report: NotifyReport
) -> None:
    try:
        with writing_unit_of_work(engine) as session:
            # About to exit, its lease protects nothing: letting go makes the runbook's "move the
            # file and run again" work at once, not after two minutes of "held by verb/…".
            report.released = sweep.claim.release(session)
            session.commit()
            report.held_by_others = lease_holders(
                session, clock.now(), live_only=True, excluding=sweep.runner
            )
    except Exception as exc:
        # By type only, as every relay failure; the lease lapses on its own.
        log.error("notify could not release its rows or read other holders: %s", type(exc).__name__)
        report.failed_whole = report.failed_whole or type(exc).__name__
