"""`azurebank audit verify`: walk the audit chain in Sequence order and name each broken row
(docs/cli.md). Exit 0 intact, 1 broken, 78 when Audit__ChainKey is missing or invalid."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import command, commands, fields, print_report, shows_progress
from shared.audit.verify import ChainReport, walk_chain
from shared.bootstrap import bootstrap
from shared.db.uow import unit_of_work
from shared.settings import load_settings

WRONG_KEY_HINT = (
    "every row's RowHash fails: Audit__ChainKey is probably not the key that wrote this chain "
    "(a wrong key breaks every row; tampering breaks some)"
)


def register(sub: Any) -> None:
    audit = commands(sub, "audit", "the HMAC-chained audit log")
    walk = "walk the chain in Sequence order; name each broken row (exit 0 intact, 1 broken)"
    command(audit, "verify", _verify, with_json=True, help=walk)


def _progress(rows: int) -> None:
    print(f"\r  {rows} rows checked…", end="", file=sys.stderr, flush=True)


def _verify(args: argparse.Namespace) -> int:
    services = bootstrap(load_settings())
    chain = services.require_audit_chain()  # SettingsError → exit 78, naming the key
    interactive = shows_progress() and not args.json
    with unit_of_work(services.engine) as session:
        report = walk_chain(session, chain, progress=_progress if interactive else None)
    if interactive and report.rows >= 10_000:
        print(file=sys.stderr)
    print_report(args.json, _as_json(report), _lines(report))
    return exits.OK if report.intact else exits.FAILURE


def _as_json(report: ChainReport) -> dict[str, Any]:
    return {
        **fields(report, "intact", "rows", "last_sequence"),
        "findings": [fields(f, "sequence", "id", "problem") for f in report.findings],
        "hint": WRONG_KEY_HINT if report.every_row_fails_hmac else None,
    }


def _lines(report: ChainReport) -> list[str]:
    if report.intact:
        span = f"Sequence 1..{report.last_sequence}" if report.rows else "empty"
        return [f"audit verify: chain intact: {report.rows} rows ({span})"]
    lines = [f"audit verify: BROKEN {finding.line()}" for finding in report.findings]
    if report.every_row_fails_hmac:
        lines.append(f"audit verify: {WRONG_KEY_HINT}")
    lines.append(
        f"audit verify: chain BROKEN: {len(report.findings)} finding(s) over {report.rows} rows"
    )
    return lines
