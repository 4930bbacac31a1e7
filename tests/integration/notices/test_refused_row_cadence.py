"""ADR-0048 D3: a refused row is "held, retried and refused every lease", on SQLite and PostgreSQL
with the fake clock: one attempt per lease, not one per period, and while it waits out its lease
it does not count against the runner's batch (D2), so the owed rows behind it are delivered."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from shared.notices.transports import PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.notices import CountingTransport, make_sweep, notice_row, owed_notices

pytestmark = pytest.mark.adr("0048", "D3")

A = "api/host-a/101/aaaaaaaa"
B = "api/host-b/202/bbbbbbbb"
PERIOD = timedelta(seconds=15)  # Notices__PeriodSeconds' default
LEASE = 120  # Notices__LeaseSeconds' default: eight periods


def _refusals(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith("Notice refused: "))


def test_a_refused_row_is_attempted_once_per_lease_not_once_per_period(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (owed,) = owed_notices(engine, 1)
    existing = pickup / f"{owed.id}.eml"
    existing.write_bytes(b"the file a runner wrote before it died\r\n")
    counting = CountingTransport(PickupDirectoryTransport(pickup))
    sweep = make_sweep(engine, clock, counting, runner=A, lease_seconds=LEASE)

    with caplog.at_level(logging.WARNING, logger="azurebank.notices"):
        first = sweep.run()
        assert (first.held, first.refused, counting.attempts[owed.id]) == (1, 1, 1)
        for _ in range(7):  # the other seven periods of the same lease
            clock.advance(PERIOD)
            summary = sweep.run()
            assert (summary.held, summary.refused, counting.attempts[owed.id]) == (1, 0, 1)
        assert summary.resting == 1 and summary.not_attempted == 0
        assert _refusals(caplog) == 1

        clock.advance(PERIOD)  # one lease after the refusal: its lease would have lapsed
        again = sweep.run()
        assert (again.refused, counting.attempts[owed.id]) == (1, 2)
        for _ in range(7):
            clock.advance(PERIOD)
            sweep.run()
        assert counting.attempts[owed.id] == 2
        assert _refusals(caplog) == 2

    assert existing.read_bytes() == b"the file a runner wrote before it died\r\n"
    row = notice_row(engine, owed.id)
    # Held all the while under this runner's name: the row is the truth, still owed.
    assert (row.DeliveredAt, row.LeasedBy) == (None, A)
    assert sorted(p.name for p in pickup.iterdir()) == [existing.name]


def test_a_refused_row_does_not_count_against_the_batch_so_the_rows_behind_it_go_out(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    refused, *behind = owed_notices(engine, 3)
    (pickup / f"{refused.id}.eml").write_bytes(b"left behind\r\n")
    counting = CountingTransport(PickupDirectoryTransport(pickup))
    sweep = make_sweep(engine, clock, counting, runner=A, lease_seconds=LEASE, batch_size=1)

    first = sweep.run()
    assert (first.claimed, first.refused) == (1, 1)
    delivered = []
    for _ in range(2):
        clock.advance(PERIOD)
        summary = sweep.run()
        delivered.append(summary.delivered)

    assert delivered == [1, 1]
    for o in behind:
        assert notice_row(engine, o.id).DeliveredAt is not None
    assert counting.attempts == {refused.id: 1, behind[0].id: 1, behind[1].id: 1}
    assert notice_row(engine, refused.id).DeliveredAt is None


def test_a_refused_row_whose_runner_died_is_tried_once_by_the_runner_that_takes_it_over(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    (owed,) = owed_notices(engine, 1)
    (pickup / f"{owed.id}.eml").write_bytes(b"left behind\r\n")
    counting = CountingTransport(PickupDirectoryTransport(pickup))
    make_sweep(engine, clock, counting, runner=A, lease_seconds=LEASE).run()  # then A dies
    successor = make_sweep(engine, clock, counting, runner=B, lease_seconds=LEASE)

    clock.advance(timedelta(seconds=LEASE - 1))
    assert successor.run().held_by_others == 1  # A's lease is live: stepped aside
    clock.advance(timedelta(seconds=1))  # A's lease lapses now
    taken_over = successor.run()
    assert (taken_over.claimed, taken_over.refused) == (1, 1)
    for _ in range(7):
        clock.advance(PERIOD)
        successor.run()

    assert counting.attempts[owed.id] == 2  # A's one, and B's one in B's first lease
    assert notice_row(engine, owed.id).LeasedBy == B
