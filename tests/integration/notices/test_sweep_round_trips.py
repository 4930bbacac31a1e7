"""ADR-0048 D2, D3: what one sweep sends the database, counted on the engine (not timed). A sweep's
work before its rows is one unit of work (renew, claim, the re-read by name, the other runners'
leases, one commit), and each row's mark is its own committed write after its file; a sweep
that follows one which delivered every row it held has nothing to renew and sends no renew.
On SQLite and PostgreSQL (`engine` runs each on both)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from shared.notices.sweep import NoticeSweep
from shared.notices.transports import PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.notices import FailingTransport, make_sweep, notice_row, owed_notices

pytestmark = pytest.mark.adr("0048", "D2")


@contextmanager
def _counted(engine: Engine) -> Iterator[dict[str, list[str]]]:
    """The statements the engine executes (their first word and table) and its checkouts."""
    seen: dict[str, list[str]] = {"statements": [], "checkouts": []}

    def statement(_c: Any, _cur: Any, sql: str, *_: Any) -> None:
        words = sql.split()
        if words[0].upper() in {"PRAGMA", "BEGIN"}:
            return  # SQLite's own unit-of-work setup
        seen["statements"].append(_kind(sql))

    def checkout(*_: Any) -> None:
        seen["checkouts"].append("checkout")

    event.listen(engine, "before_cursor_execute", statement)
    event.listen(engine.pool, "checkout", checkout)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", statement)
        event.remove(engine.pool, "checkout", checkout)


def _kind(sql: str) -> str:
    flat = " ".join(sql.split())
    if flat.startswith("UPDATE") and "DeliveredAt" in flat.split(" WHERE ")[0]:
        return "mark"
    if "picked" in flat or " IN (SELECT" in flat:
        return "claim"
    if flat.startswith("UPDATE"):
        return "renew"
    if "count(" in flat.lower():
        return "leases"
    return "re-read"


def _sweep(engine: Engine, clock: FakeClock, pickup: Path, batch: int = 1) -> NoticeSweep:
    return make_sweep(engine, clock, PickupDirectoryTransport(pickup), batch_size=batch)


def test_a_sweep_delivering_one_row_is_one_claim_unit_then_one_mark(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed = owed_notices(engine, 3)
    sweep = _sweep(engine, clock, pickup)
    first = sweep.run()  # a new sweep renews: its name might already hold rows
    assert first.delivered == 1
    with _counted(engine) as seen:
        summary = sweep.run()
    assert summary.delivered == 1 and summary.failed_whole is None
    # The last sweep delivered all it held: nothing to renew (a name is one runner's own).
    assert seen["statements"] == ["claim", "re-read", "leases", "mark"]
    # One checkout for the claim's unit of work, one for the mark's.
    assert len(seen["checkouts"]) == 2
    assert all(notice_row(engine, o.id).DeliveredAt is not None for o in owed[:2])


def test_a_row_still_held_after_a_failed_delivery_is_renewed_by_the_next_sweep(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    (owed,) = owed_notices(engine, 1)
    failing = make_sweep(engine, clock, FailingTransport(OSError("disk")), batch_size=1)
    assert failing.run().failed == 1
    with _counted(engine) as seen:
        again = failing.run()
    assert again.renewed == 1 and again.claimed == 0 and again.failed == 1
    # Held rows are renewed before anything is delivered; nothing is claimed (no room).
    assert seen["statements"] == ["renew", "re-read", "leases"]
    assert notice_row(engine, owed.id).LeasedUntil is not None
