"""`azurebank notify` and `azurebank notices status` (docs/cli.md#azurebank-notify): they print
what shared.notices.notify (the protocol and the exit decision) and shared.notices.status report."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import command, commands, fields, print_report, shows_progress
from shared.bootstrap import bootstrap
from shared.clock import utc_text
from shared.db.uow import unit_of_work
from shared.notices.claim import VERB_LEASE_SECONDS
from shared.notices.hosted import make_runner_name
from shared.notices.notify import READING_HELD_BY_OTHERS, READING_NOTHING_OWED, NotifyReport, drain
from shared.notices.status import LeaseHolder, OwedStatus, read_owed_status
from shared.notices.sweep import NoticeSweepSummary
from shared.notices.transports import notice_file_name
from shared.settings import load_settings, require_host


def register(sub: Any) -> None:
    command(
        sub,
        "notify",
        _notify,
        with_json=True,
        help="deliver owed notices under the verb's own lease (ADR-0048 D5)",
        description="Deliver owed notices into Notices__PickupDirectory or "
        "Notices__PickupContainer. Exit 0 delivered; 2 nothing to do (the line says which "
        "reading); 6 a refused file; 1 another failure left rows owed; 78 settings refused.",
    )
    notices = commands(sub, "notices", "owed security notices (ADR-0048)")
    what = "owed rows, who holds what until when, the oldest owed row's age"
    command(notices, "status", _status, with_json=True, help=what)


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
    print_report(args.json, _notify_json(report), _notify_lines(report))
    return int(report.exit_code)


def _progress(sweeps: int, summary: NoticeSweepSummary, delivered: int) -> None:
    line = f"notify: sweep {sweeps}: claimed {summary.claimed}, delivered {delivered} so far"
    print(line, file=sys.stderr)


def _holder_text(holder: LeaseHolder) -> str:
    until = utc_text(holder.last_lapse)
    if holder.first_lapse != holder.last_lapse:
        until = f"{utc_text(holder.first_lapse)} to {until}"
    return f"{holder.runner} ({holder.rows} owed rows, lease lapses at {until})"


def _notify_lines(report: NotifyReport) -> list[str]:
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


def _notify_json(report: NotifyReport) -> dict[str, Any]:
    return {
        **fields(report, "runner", "target", "sweeps", "delivered"),
        "refused": [str(i) for i in report.refused],
        "failed": [fields(o, "notice_id", "kind", "status", "detail") for o in report.failed],
        "findings": [
            fields(f, "notice_id", "audit_event_id", "question", "line") for f in report.findings
        ],
        "heldByOthers": [_holder_json(h) for h in report.held_by_others],
        **fields(report, "lease_lapsed", "failed_whole", "exit_code", "reading"),
    }


def _status(args: argparse.Namespace) -> int:
    services = bootstrap(load_settings())
    with unit_of_work(services.engine) as session:
        status = read_owed_status(session, services.clock.now())
    print_report(args.json, _status_json(status), _status_lines(status))
    return exits.OK


def _age(age: timedelta) -> str:
    days, rest = divmod(max(0, int(age.total_seconds())), 86400)
    clock = f"{rest // 3600}h {rest // 60 % 60}m {rest % 60}s"
    return f"{days}d {clock}" if days else clock


def _status_lines(status: OwedStatus) -> list[str]:
    oldest = "none"
    if status.oldest_owed_at is not None and status.oldest_owed_age is not None:
        oldest = (
            f"{status.oldest_owed_id}, created {utc_text(status.oldest_owed_at)}, "
            f"{_age(status.oldest_owed_age)} ago"
        )
    return [
        f"owed: {status.owed} (free to claim {status.free}, under a live lease {status.held_live})",
        f"oldest owed: {oldest}",
        *(
            f"held by {h.runner}: {h.rows} rows, lease until {utc_text(h.last_lapse)} "
            f"({'live' if h.live(status.now) else 'lapsed'})"
            for h in status.holders
        ),
    ]


def _status_json(status: OwedStatus) -> dict[str, Any]:
    oldest = None
    if status.oldest_owed_at is not None and status.oldest_owed_age is not None:
        oldest = {
            "noticeId": str(status.oldest_owed_id),
            "createdAt": utc_text(status.oldest_owed_at),
            "ageSeconds": round(status.oldest_owed_age.total_seconds(), 3),
        }
    return {
        **fields(status, "now", "owed", "free", "held_live"),
        "oldestOwed": oldest,
        "holders": [{**_holder_json(h), "live": h.live(status.now)} for h in status.holders],
    }


def _holder_json(holder: LeaseHolder) -> dict[str, Any]:
    return {
        **fields(holder, "runner", "rows", "first_lapse"),
        "leasedUntil": utc_text(holder.last_lapse),
    }
