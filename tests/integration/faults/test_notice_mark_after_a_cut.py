"""The relay does not strand what it delivered: when the database connection is cut right after
the notice file landed, the same runner tries the mark again while its lease holds, so the row is
marked once, beside its one file, and the next sweep has nothing to refuse. Real PostgreSQL,
reached through the suite's fault proxy; the cut is the proxy's, at the moment the file is
written."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from shared.db.engine import EngineOptions, build_engine, get_engine
from shared.db.schema import SubscriberNotice
from shared.db.uow import unit_of_work
from shared.notices.transports import NoticeTransport, PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.notices import START, make_sweep, notice_row, owed_notices

pytestmark = pytest.mark.postgres

# Short bounds, so a try that meets the cut fails in seconds, not in the defaults' fifteen.
BOUNDS = EngineOptions(connect_timeout=2, statement_timeout=3, lock_timeout=1, pool_timeout=1)


class CutAfterDelivery:
    """Delegates; once the file has landed, switches the proxy to `mode` (and back to PASS after
    `for_seconds`, when given), before the runner marks the row."""

    def __init__(
        self, inner: NoticeTransport, proxy: FaultProxy, mode: Mode, for_seconds: float | None
    ) -> None:
        self.inner, self.proxy, self.mode, self.for_seconds = inner, proxy, mode, for_seconds
        self.delivered: list[uuid.UUID] = []

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        receipt = self.inner.deliver(notice_id, message)
        self.delivered.append(notice_id)
        self.proxy.set_mode(self.mode, once=self.mode is Mode.COMMIT_REPLY_LOST)
        if self.for_seconds is not None:
            threading.Timer(self.for_seconds, self.proxy.set_mode, (Mode.PASS,)).start()
        return receipt


@pytest.fixture
def proxy(fresh_postgres_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.in_front_of(fresh_postgres_url) as running:
        yield running


@pytest.fixture
def engine(proxy: FaultProxy, fresh_postgres_url: str) -> Iterator[Engine]:
    through = build_engine(proxy.url(fresh_postgres_url), options=BOUNDS)
    yield through
    through.dispose()


def _delivered_before(url: str, count: int) -> None:
    rows = owed_notices(url, count, start=START - timedelta(hours=1))
    with unit_of_work(get_engine(url)) as session:
        for row in rows:
            session.execute(
                update(SubscriberNotice)
                .where(SubscriberNotice.Id == row.id)
                .values(DeliveredAt=START, DeliveryReceipt=f"pickup:{row.id}.eml")
            )
        session.commit()


@pytest.mark.parametrize(
    ("mode", "for_seconds"),
    [
        pytest.param(Mode.RESET, 0.6, id="connection-reset-before-the-mark"),
        pytest.param(Mode.COMMIT_REPLY_LOST, None, id="the-marks-commit-reply-lost"),
    ],
)
def test_a_mark_cut_by_a_database_fault_is_retried_and_the_row_is_marked_beside_its_one_file(
    fresh_postgres_url: str,
    engine: Engine,
    proxy: FaultProxy,
    pickup: Path,
    mode: Mode,
    for_seconds: float | None,
) -> None:
    # Rows delivered before, each under its own receipt: the proof after a lost answer is this
    # row's own receipt, never another delivered row's.
    _delivered_before(fresh_postgres_url, 3)
    (owed,) = owed_notices(fresh_postgres_url)
    clock = FakeClock(START)
    transport = CutAfterDelivery(PickupDirectoryTransport(pickup), proxy, mode, for_seconds)

    first = make_sweep(engine, clock, transport).run()

    assert first.failed_whole is None, first
    assert (first.delivered, first.taken, first.failed) == (1, 0, 0), first
    if mode is Mode.COMMIT_REPLY_LOST:
        assert proxy.count("commit_cut") == 1  # the mark's first commit did lose its answer
    row = notice_row(fresh_postgres_url, owed.id)
    assert row.DeliveredAt is not None and row.DeliveryReceipt == f"pickup:{owed.id}.eml"
    assert row.LeasedBy is None
    assert [p.name for p in pickup.iterdir()] == [f"{owed.id}.eml"]

    proxy.set_mode(Mode.PASS)
    clock.advance(600)  # past any lease: nothing is left to take, nothing is refused
    second = make_sweep(engine, clock, transport, runner="function/test/2/0000bbbb").run()
    assert (second.held, second.refused, second.delivered) == (0, 0, 0), second
    assert transport.delivered == [owed.id]


class CutForGood:
    """Delegates; once the file has landed, every connection to the database is cut from then
    on, and the fake clock moves on by `then` (a slow disk), before the runner marks the row."""

    def __init__(
        self, inner: NoticeTransport, proxy: FaultProxy, clock: FakeClock, then: timedelta
    ) -> None:
        self.inner, self.proxy, self.clock, self.then = inner, proxy, clock, then

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        receipt = self.inner.deliver(notice_id, message)
        self.proxy.set_mode(Mode.RESET)
        self.clock.advance(self.then)
        return receipt


def _gave_up_line(notice_id: uuid.UUID, tries: int) -> str:
    return (
        f"Notice mark failed: {notice_id} (PinEnrolled) was delivered (receipt "
        f"pickup:{notice_id}.eml) but its mark failed with DatabaseUnavailable after {tries} "
        "tries; the row stays owed beside it (runbook: the row is the truth; mark the row)"
    )


def _delivery_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "azurebank.notices.delivery"
    ]


def test_a_mark_cut_for_good_is_tried_eight_times_then_given_up_at_error_beside_its_file(
    fresh_postgres_url: str,
    engine: Engine,
    proxy: FaultProxy,
    pickup: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (owed,) = owed_notices(fresh_postgres_url)
    clock = FakeClock(START)
    transport = CutForGood(PickupDirectoryTransport(pickup), proxy, clock, timedelta(0))
    with caplog.at_level(logging.WARNING, logger="azurebank.notices.delivery"):
        summary = make_sweep(engine, clock, transport).run()
    assert summary.failed_whole == "DatabaseUnavailable"
    lines = _delivery_lines(caplog)
    # The pauses before each retry, the last one repeated: about ten seconds in all.
    retries = [
        (
            logging.WARNING,
            f"Notice mark of {owed.id} (PinEnrolled) failed with DatabaseUnavailable (a database "
            f"fault); trying again in {pause}s while the lease holds (try {n} of 8)",
        )
        for n, pause in enumerate(["0.1", "0.25", "0.5", "1", "2", "2", "2"], start=1)
    ]
    assert lines == [*retries, (logging.ERROR, _gave_up_line(owed.id, 8))]
    proxy.set_mode(Mode.PASS)
    assert notice_row(fresh_postgres_url, owed.id).DeliveredAt is None
    assert [p.name for p in pickup.iterdir()] == [f"{owed.id}.eml"]


def test_a_mark_cut_when_its_lease_is_about_to_lapse_is_given_up_rather_than_retried(
    fresh_postgres_url: str,
    engine: Engine,
    proxy: FaultProxy,
    pickup: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Past its lease the row may be another runner's: no retry whose pause would outlast it.
    (owed,) = owed_notices(fresh_postgres_url)
    clock = FakeClock(START)
    # make_sweep's lease is 120 s: the first pause (0.1 s) would end just as the lease does.
    almost = timedelta(seconds=120) - timedelta(milliseconds=100)
    transport = CutForGood(PickupDirectoryTransport(pickup), proxy, clock, almost)
    with caplog.at_level(logging.WARNING, logger="azurebank.notices.delivery"):
        summary = make_sweep(engine, clock, transport).run()
    assert summary.failed_whole == "DatabaseUnavailable"
    assert _delivery_lines(caplog) == [(logging.ERROR, _gave_up_line(owed.id, 1))]
    proxy.set_mode(Mode.PASS)
    assert notice_row(fresh_postgres_url, owed.id).DeliveredAt is None
