"""Money is exact on every dialect (Numeric(18,4); on SQLite an integer of
ten-thousandths) and SUM stays exact; times are UTC, and a naive datetime is refused."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Engine, Integer, MetaData, Table, func, insert, select
from sqlalchemy.exc import StatementError

from shared.db.types import Money, UtcDateTime

# Numeric(18,4): fourteen digits before the point, four after.
MONEY_LIMIT = Decimal("99999999999999.9999")
amounts = st.decimals(min_value=-MONEY_LIMIT, max_value=MONEY_LIMIT, places=4)

_metadata = MetaData()
scratch = Table(
    "ScratchColumns",
    _metadata,
    Column("Id", Integer, primary_key=True, autoincrement=False),
    Column("Group", Integer, nullable=False),
    Column("Amount", Money, nullable=True),
    Column("At", UtcDateTime, nullable=True),
)


@pytest.fixture
def columns(engine: Engine) -> Iterator[Engine]:
    """A table of the two column types in this test's own database (SQLite, then PostgreSQL)."""
    _metadata.create_all(engine)
    yield engine
    _metadata.drop_all(engine)


_ids = itertools.count(1)
_examples = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_examples
@given(amount=amounts)
def test_any_amount_with_four_places_round_trips_exactly(columns: Engine, amount: Decimal) -> None:
    row_id = next(_ids)
    with columns.begin() as conn:
        conn.execute(insert(scratch).values(Id=row_id, Group=0, Amount=amount))
        stored = conn.scalar(select(scratch.c.Amount).where(scratch.c.Id == row_id))
    assert isinstance(stored, Decimal)
    assert stored == amount


@_examples
@given(values=st.lists(amounts, min_size=1, max_size=5))
def test_a_sum_of_amounts_is_exact(columns: Engine, values: list[Decimal]) -> None:
    # At most five values of up to 10^14: the SQLite integer sum stays inside 64 bits.
    group = next(_ids)
    with columns.begin() as conn:
        conn.execute(
            insert(scratch),
            [{"Id": next(_ids), "Group": group, "Amount": v} for v in values],
        )
        total = conn.scalar(select(func.sum(scratch.c.Amount)).where(scratch.c.Group == group))
    assert total == sum(values, Decimal(0))


def test_sums_that_floats_get_wrong_are_exact(columns: Engine) -> None:
    # 0.1 + 0.2 is 0.30000000000000004 in binary floating point.
    with columns.begin() as conn:
        conn.execute(
            insert(scratch),
            [
                {"Id": 1, "Group": 1, "Amount": Decimal("0.1")},
                {"Id": 2, "Group": 1, "Amount": Decimal("0.2")},
            ],
        )
        total = conn.scalar(select(func.sum(scratch.c.Amount)).where(scratch.c.Group == 1))
    assert total == Decimal("0.3000")


def test_a_naive_datetime_is_refused(columns: Engine) -> None:
    with pytest.raises(StatementError, match="timezone-aware"), columns.begin() as conn:
        naive = datetime(2026, 11, 29, 12, 0)
        conn.execute(insert(scratch).values(Id=1, Group=0, At=naive))


def test_an_aware_datetime_comes_back_as_the_same_instant_in_utc(columns: Engine) -> None:
    cet = timezone(timedelta(hours=1))
    written = datetime(2026, 11, 29, 0, 30, 15, 123456, tzinfo=cet)
    with columns.begin() as conn:
        conn.execute(insert(scratch).values(Id=1, Group=0, At=written))
        read = conn.scalar(select(scratch.c.At).where(scratch.c.Id == 1))
    assert read == written
    assert read.tzinfo is UTC
    assert read == datetime(2026, 11, 28, 23, 30, 15, 123456, tzinfo=UTC)
