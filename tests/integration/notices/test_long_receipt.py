"""A transport's receipt longer than `DeliveryReceipt` holds (400 characters) still marks the row
delivered: the column keeps the receipt's first 400 characters, on SQLite (which would store
more) and on PostgreSQL (which would refuse the write and leave the row owed, to be delivered
again)."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import Engine

from shared.notices.transports import PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.notices import make_sweep, notice_row, owed_count, owed_notices

COLUMN = 400


class LongReceiptTransport:
    """Delivers into the pickup directory and answers with a receipt of 1000 characters."""

    def __init__(self, pickup: Path) -> None:
        self.inner = PickupDirectoryTransport(pickup)

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        return receipt_of(self.inner.deliver(notice_id, message))


def receipt_of(short: str) -> str:
    return (short + "/" + "r" * 1000)[:1000]


def test_a_receipt_longer_than_its_column_is_cut_to_it_and_the_row_is_delivered_once(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    (owed,) = owed_notices(engine, 1)
    first = make_sweep(engine, clock, LongReceiptTransport(pickup)).run()
    assert first.delivered == 1
    row = notice_row(engine, owed.id)
    assert row.DeliveredAt == clock.now()
    assert row.DeliveryReceipt == receipt_of(f"pickup:{owed.id}.eml")[:COLUMN]
    assert owed_count(engine) == 0
    again = make_sweep(engine, clock, LongReceiptTransport(pickup)).run()
    assert (again.claimed, again.delivered) == (0, 0)
