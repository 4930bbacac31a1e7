"""`azurebank notify` (ADR-0048 D5): deliver what is owed, under the verb's own lease.

The verb claims like every other runner (`verb/{host}/{pid}/{8 hex}`, two minutes), because a verb
that merely read free rows would leave a window between its read and its write in which the relay
claims the same rows. It sweeps in a loop until nothing is free or its own lease lapses, and steps
aside for rows another runner holds under a live lease: it counts them and names their holder.

Exit codes (DESIGN §8): 0 delivered; 2 nothing to do, and the line says which reading; 6 a file
was refused; 1 another failure left rows owed (this wins over 6 when both happened, since moving
the refused file would not fix it); 78 settings refused.
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from shared.cli import exits
from shared.cli.runtime import database_url, holder_json, print_report
from shared.cli.terminal import shows_progress
from shared.clock import Clock, SystemClock, utc_text
from shared.db.engine import get_engine
from shared.db.uow import unit_of_work
from shared.notices.claim import VERB_LEASE_SECONDS
from shared.notices.evidence import EvidenceFinding
from shared.notices.outcomes import FAILURES, DeliveryOutcome, DeliveryStatus
from shared.notices.runner_name import make_runner_name
from shared.notices.status import LeaseHolder, lease_holders
from shared.notices.sweep import NoticeSweep
from shared.notices.transports import notice_file_name
from shared.settings import load_settings, require_host

log = logging.getLogger("azurebank.notices.notify")

READING_NOTHING_OWED = "nothing owed"
READING_HELD_BY_OTHERS = "everything owed is held under another runner's live lease"


def register(sub: Any) -> None:
    notify = sub.add_parser(
        "notify",
        help="deliver owed notices under the verb's own lease (ADR-0048 D5)",
        description="Deliver owed notices into Notices__PickupDirectory or "
        "Notices__PickupContainer. Exit 0 delivered; 2 nothing to do (the line says which "
        "reading); 6 a refused file; 1 another failure left rows owed; 78 settings refused.",
    )
    notify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    notify.set_defaults(run=_notify)


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

    def ids(self, *statuses: DeliveryStatus) -> list[uuid.UUID]:
        return [i for i, o in self.last.items() if o.status in statuses]

    @property
    def delivered(self) -> int:
        return len(self.ids(DeliveryStatus.DELIVERED))

    @property
    def refused(self) -> list[uuid.UUID]:
        return self.ids(DeliveryStatus.REFUSED)

    @property
    def failed(self) -> list[DeliveryOutcome]:
        return [o for o in self.last.values() if o.status in FAILURES]

    @property
    def exit_code(self) -> int:
        if self.failed_whole or self.lease_lapsed or self.failed:
            return exits.FAILURE
        if self.refused:
            return exits.REFUSED_FILE
        if self.delivered:
            return exits.OK
        return exits.NOTHING_TO_DO

    @property
    def reading(self) -> str | None:
        """Which reading of exit 2 applies (D5), or None when the exit is not 2."""
        if self.exit_code != exits.NOTHING_TO_DO:
            return None
        return READING_HELD_BY_OTHERS if self.held_by_others else READING_NOTHING_OWED


def drain(
    sweep: NoticeSweep, engine: Engine, clock: Clock, *, progress: bool = False
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
        # against the batch, D2) for the next run or, once the lease lapses, another runner.
        tried_and_owed = frozenset(i for i, o in report.last.items() if o.owed)
        summary = sweep.run(exclude=tried_and_owed, on_outcome=record)
        report.sweeps += 1
        if progress:
            print(
                f"notify: sweep {report.sweeps}: claimed {summary.claimed}, "
                f"delivered {report.delivered} so far",
                file=sys.stderr,
            )
        if summary.failed_whole:
            report.failed_whole = summary.failed_whole
            break
        if summary.lease_lapsed:
            report.lease_lapsed = True
            break
        # Nothing is free once a claim leaves room unfilled (or had no room: a batch full of
        # rows that failed, D2's cap; a refused row resting takes no room, D3).
        if summary.claimed == 0 or summary.claimed < summary.room:
            break

    try:
        with unit_of_work(engine, sqlite_begin="IMMEDIATE") as session:
            # Beyond the ADR: the verb is about to exit, so its lease protects nothing any more;
            # it lets go of the rows it could not deliver, so that "move the file and run again"
            # (D3's runbook) works at once instead of after two minutes of exit 2 "held by verb/…".
            report.released = sweep.claim.release(session)
            session.commit()
            report.held_by_others = lease_holders(
                session, clock.now(), live_only=True, excluding=sweep.runner
            )
    except Exception as exc:
        # By type only, as every relay failure (ADR-0048 D4); the lease lapses on its own.
        log.error("notify could not release its rows or read other holders: %s", type(exc).__name__)
        report.failed_whole = report.failed_whole or type(exc).__name__
    return report


def _notify(args: argparse.Namespace) -> int:
    settings = load_settings()
    require_host(settings, "verb")  # SettingsError → exit 78, naming the key and the fix
    engine = get_engine(database_url(settings))
    clock = SystemClock()
    sweep = NoticeSweep.from_settings(
        engine, clock, settings, make_runner_name("verb"), lease_seconds=VERB_LEASE_SECONDS
    )
    if not args.json:
        print(
            f"notify: as {sweep.runner}, lease {VERB_LEASE_SECONDS}s, batch "
            f"{settings.Notices.BatchSize}, into {sweep.transport.describe()}"
        )
    report = drain(sweep, engine, clock, progress=not args.json and shows_progress())
    print_report(report, as_json=args.json, document=_as_json, lines=_lines)
    return report.exit_code


def _holder_text(holder: LeaseHolder) -> str:
    until = utc_text(holder.last_lapse)
    if holder.first_lapse != holder.last_lapse:
        until = f"{utc_text(holder.first_lapse)} to {until}"
    return f"{holder.runner} ({holder.rows} owed rows, lease lapses at {until})"


def _lines(report: NotifyReport) -> list[str]:
    lines = [finding.line for finding in report.findings]
    for notice_id in report.refused:
        lines.append(
            f"REFUSED: notice {notice_id}: the {report.target} already holds "
            f"{notice_file_name(notice_id)}; the row stays owed beside it. Runbook: the row is "
            "the truth; move the file and run again, or mark the row."
        )
    for outcome in report.failed:
        lines.append(
            f"NOT DELIVERED: notice {outcome.notice_id} ({outcome.kind}): {outcome.status.value}"
            + (f" ({outcome.detail})" if outcome.detail else "")
            + "; the row stays owed"
        )
    if report.failed_whole:
        lines.append(f"notify: a sweep failed as a whole with {report.failed_whole}")
    if report.lease_lapsed:
        lines.append("notify: this run outlived its own lease and stopped delivering")
    lines.append(
        f"notify: delivered {report.delivered}, refused {len(report.refused)}, failed "
        f"{len(report.failed)}, in {report.sweeps} sweep(s)"
    )
    for holder in report.held_by_others:
        lines.append(f"notify: held under a live lease by {_holder_text(holder)}")
    if report.reading == READING_HELD_BY_OTHERS:
        names = "; ".join(_holder_text(h) for h in report.held_by_others)
        lines.append(
            f"notify: nothing to do: {READING_HELD_BY_OTHERS}: {names}. A lease proves only that "
            "it is unexpired, nothing about the process; the rows are taken once it lapses."
        )
    elif report.reading == READING_NOTHING_OWED:
        lines.append(f"notify: nothing to do: {READING_NOTHING_OWED}")
    return lines


def _as_json(report: NotifyReport) -> dict[str, Any]:
    return {
        "runner": report.runner,
        "target": report.target,
        "sweeps": report.sweeps,
        "delivered": report.delivered,
        "refused": [str(i) for i in report.refused],
        "failed": [
            {
                "noticeId": str(o.notice_id),
                "kind": o.kind,
                "status": o.status.value,
                "detail": o.detail,
            }
            for o in report.failed
        ],
        "findings": [
            {
                "noticeId": str(f.notice_id),
                "auditEventId": None if f.audit_event_id is None else str(f.audit_event_id),
                "question": f.question.value,
                "line": f.line,
            }
            for f in report.findings
        ],
        "heldByOthers": [holder_json(h) for h in report.held_by_others],
        "leaseLapsed": report.lease_lapsed,
        "failedWhole": report.failed_whole,
        "exitCode": report.exit_code,
        "reading": report.reading,
    }
