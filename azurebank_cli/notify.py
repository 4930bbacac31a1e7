"""`azurebank notify`: parse, drain, print. The protocol and the exit decision are
shared.notices.notify's; this module only prints what it reports (docs/cli.md#azurebank-notify)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from azurebank_cli.runtime import holder_json, print_report
from azurebank_cli.terminal import shows_progress
from shared.bootstrap import bootstrap
from shared.clock import utc_text
from shared.notices.claim import VERB_LEASE_SECONDS
from shared.notices.notify import (
    READING_HELD_BY_OTHERS,
    READING_NOTHING_OWED,
    NotifyReport,
    drain,
)
from shared.notices.runner_name import make_runner_name
from shared.notices.status import LeaseHolder
from shared.notices.sweep import NoticeSweepSummary
from shared.notices.transports import notice_file_name
from shared.settings import load_settings, require_host


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


def _notify(args: argparse.Namespace) -> int:
    settings = load_settings()
    require_host(settings, "verb")  # SettingsError → exit 78, naming the key and the fix
    services = bootstrap(settings, runner=make_runner_name("verb"))
    sweep = services.sweep
    assert sweep is not None  # built for the runner named above
    if not args.json:
        print(
            f"notify: as {sweep.runner}, lease {VERB_LEASE_SECONDS}s, batch "
            f"{settings.Notices.BatchSize}, into {sweep.transport.describe()}"
        )
    progress = _progress if not args.json and shows_progress() else None
    report = drain(sweep, services.engine, services.clock, progress=progress)
    print_report(report, as_json=args.json, document=_as_json, lines=_lines)
    return int(report.exit_code)


def _progress(sweeps: int, summary: NoticeSweepSummary, delivered: int) -> None:
    print(
        f"notify: sweep {sweeps}: claimed {summary.claimed}, delivered {delivered} so far",
        file=sys.stderr,
    )


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
        "exitCode": int(report.exit_code),
        "reading": report.reading,
    }
