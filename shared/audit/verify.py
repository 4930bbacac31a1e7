"""The chain walk behind `azurebank audit verify`: every row in `Sequence` order, each broken one
named (docs/cli.md#azurebank-audit-verify says what and why)."""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.audit import tail_sql
from shared.audit.chain import GENESIS_HASH, PAYLOAD_FIELDS, AuditChain
from shared.db.schema import AuditEvent

_BATCH = 1000


@dataclass(frozen=True)
class Finding:
    """One broken row (or a run of missing rows), named by Sequence and Id."""

    sequence: int
    id: uuid.UUID | None
    problem: str

    def line(self) -> str:
        where = f"row {self.sequence}" + (f" (Id {self.id})" if self.id else "")
        return f"{where}: {self.problem}"


@dataclass
class ChainReport:
    rows: int = 0
    last_sequence: int = 0
    findings: list[Finding] = field(default_factory=list)
    every_row_fails_hmac: bool = False

    @property
    def intact(self) -> bool:
        return not self.findings


def _rows(session: Session, up_to: int) -> Iterator[AuditEvent]:
    after = 0
    while True:
        batch = list(
            session.scalars(
                select(AuditEvent)
                .where(AuditEvent.Sequence > after, AuditEvent.Sequence <= up_to)
                .order_by(AuditEvent.Sequence)
                .limit(_BATCH)
            )
        )
        if not batch:
            return
        yield from batch
        after = batch[-1].Sequence
        session.expunge_all()


def _link_problems(row: AuditEvent, expected: int, previous_hash: bytes) -> list[str]:
    """How `row` fails to follow the row before it: a gap in Sequence, or a broken link."""
    if row.Sequence != expected:
        return [f"rows missing before it (Sequence {_span(expected, row.Sequence - 1)}: deleted)"]
    if not hmac.compare_digest(bytes(row.PreviousHash), previous_hash):
        return [
            "its PreviousHash is not the RowHash of the row before it "
            "(rows swapped, moved or inserted)"
        ]
    return []


def _span(first: int, last: int) -> str:
    return f"{first}" if first == last else f"{first}–{last}"


_ROW_HASH_FAILS = (
    "its RowHash does not verify (an edited field, a re-keyed Id, or another Audit__ChainKey)"
)


def walk_chain(
    session: Session, chain: AuditChain, *, progress: Callable[[int], None] | None = None
) -> ChainReport:
    """Walk the chain up to the tail read at the start; name each broken row. Reads only."""
    tail = session.execute(tail_sql.tail_unlocked_read()).first()
    report = ChainReport()
    if tail is None:
        report.findings.append(Finding(0, None, "the chain's tail row is missing"))
        return report
    tail_sequence, tail_hash = int(tail[0]), bytes(tail[1])
    expected, previous_hash, hmac_failures = 1, GENESIS_HASH, 0
    for row in _rows(session, tail_sequence):
        report.rows += 1
        problems = _link_problems(row, expected, previous_hash)
        if row.PayloadVersion not in PAYLOAD_FIELDS:
            problems.append(f"unknown PayloadVersion {row.PayloadVersion}")
        elif not hmac.compare_digest(chain.hash_of(row), bytes(row.RowHash)):
            hmac_failures += 1
            problems.append(_ROW_HASH_FAILS)
        if problems:
            report.findings.append(Finding(row.Sequence, row.Id, "; ".join(problems)))
        expected, previous_hash = row.Sequence + 1, bytes(row.RowHash)
        report.last_sequence = row.Sequence
        if progress is not None and report.rows % 10_000 == 0:
            progress(report.rows)
    if expected <= tail_sequence:
        missing = f"rows missing at the end (Sequence {_span(expected, tail_sequence)}: deleted)"
        report.findings.append(Finding(tail_sequence, None, missing))
    elif not hmac.compare_digest(previous_hash, tail_hash):
        report.findings.append(
            Finding(tail_sequence, None, "the tail's LastHash is not the last row's RowHash")
        )
    report.every_row_fails_hmac = report.rows > 0 and hmac_failures == report.rows
    return report
