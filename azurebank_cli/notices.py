"""`azurebank notices status`: owed rows, who holds what until when, the oldest owed row's age."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import holder_json, print_report
from shared.bootstrap import bootstrap
from shared.clock import utc_text
from shared.db.uow import unit_of_work
from shared.notices.status import OwedStatus, read_owed_status
from shared.settings import load_settings


def register(sub: Any) -> None:
    notices = sub.add_parser("notices", help="owed security notices (ADR-0048)")
    notices_sub = notices.add_subparsers(
        dest="notices_command", required=True, parser_class=type(notices)
    )
    status = notices_sub.add_parser(
        "status", help="owed rows, who holds what until when, the oldest owed row's age"
    )
    status.add_argument("--json", action="store_true", help="one JSON object on stdout")
    status.set_defaults(run=_status)


def _status(args: argparse.Namespace) -> int:
    services = bootstrap(load_settings())
    with unit_of_work(services.engine) as session:
        status = read_owed_status(session, services.clock.now())
    print_report(status, as_json=args.json, document=_as_json, lines=_lines)
    return exits.OK


def _age(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    return " ".join([*parts, f"{hours}h", f"{minutes}m", f"{seconds}s"])


def _lines(status: OwedStatus) -> list[str]:
    lines = [
        f"owed: {status.owed} (free to claim {status.free}, under a live lease {status.held_live})"
    ]
    if status.oldest_owed_at is not None and status.oldest_owed_age is not None:
        lines.append(
            f"oldest owed: {status.oldest_owed_id}, created {utc_text(status.oldest_owed_at)}, "
            f"{_age(status.oldest_owed_age)} ago"
        )
    else:
        lines.append("oldest owed: none")
    for holder in status.holders:
        state = "live" if holder.live(status.now) else "lapsed"
        lines.append(
            f"held by {holder.runner}: {holder.rows} rows, lease until "
            f"{utc_text(holder.last_lapse)} ({state})"
        )
    return lines


def _as_json(status: OwedStatus) -> dict[str, Any]:
    oldest = None
    if status.oldest_owed_at is not None and status.oldest_owed_age is not None:
        oldest = {
            "noticeId": str(status.oldest_owed_id),
            "createdAt": utc_text(status.oldest_owed_at),
            "ageSeconds": round(status.oldest_owed_age.total_seconds(), 3),
        }
    return {
        "now": utc_text(status.now),
        "owed": status.owed,
        "free": status.free,
        "heldLive": status.held_live,
        "oldestOwed": oldest,
        "holders": [{**holder_json(h), "live": h.live(status.now)} for h in status.holders],
    }
