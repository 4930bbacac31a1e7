"""ADR-0048 D2: the lease on owed rows, on SQLite and PostgreSQL (`engine` runs each on both)."""

from __future__ import annotations

import logging
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, make_url, select, text

from shared.db.engine import EngineOptions, build_engine
from shared.db.schema import NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.notices.claim import NoticeClaim
from shared.notices.delivery import NoticeDeliveryRun
from shared.notices.transports import PickupDirectoryTransport
from tests.support.clock import FakeClock
from tests.support.notices import (
    START,
    FailingTransport,
    RacingTransport,
    SlowTransport,
    make_sweep,
    notice_row,
    owed_notices,
)
from tests.support.users import add_user

pytestmark = pytest.mark.adr("0048", "D2")

A = "api/host-a/101/aaaaaaaa"
B = "function/host-b/202/bbbbbbbb"


def _held_by(engine: Engine, runner: str) -> int:
    with unit_of_work(engine) as session:
        return int(
            session.scalar(
                select(func.count()).where(
                    SubscriberNotice.LeasedBy == runner, SubscriberNotice.DeliveredAt.is_(None)
                )
            )
            or 0
        )


def test_a_live_lease_is_not_taken_over_and_a_lapsed_one_is(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed = owed_notices(engine, 3)
    # Runner A claims and then dies holding its rows.
    with writing_unit_of_work(engine) as session:
        taken = NoticeClaim(A, lease_seconds=120, batch_size=100).take(session, clock.now())
        session.commit()
    assert len(taken.claimed_ids) == 3

    b = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=B)
    clock.advance(timedelta(seconds=119))
    live = b.run()
    assert (live.claimed, live.delivered, live.held_by_others) == (0, 0, 3)
    assert [(h.runner, h.rows) for h in live.other_holders] == [(A, 3)]
    assert live.other_holders[0].last_lapse == taken.lease_until
    assert list(pickup.iterdir()) == []

    clock.advance(timedelta(seconds=1))  # A's lease ends now: lapsed
    lapsed = b.run()
    assert (lapsed.claimed, lapsed.delivered, lapsed.held_by_others) == (3, 3, 0)
    assert sorted(p.name for p in pickup.iterdir()) == sorted(f"{o.id}.eml" for o in owed)


@pytest.mark.postgres
def test_a_lease_is_stamped_and_judged_in_utc_whatever_the_sessions_time_zone(
    fresh_postgres_url: str, clock: FakeClock, pickup: Path
) -> None:
    """The columns hold UTC without a zone; a PostgreSQL session in another zone (a server's
    TimeZone setting) would read a zoned parameter against them as local time. The claim binds
    its instants as the columns' own type, so the lease ends when it says, in UTC."""
    tokyo = make_url(fresh_postgres_url).update_query_dict({"options": "-c TimeZone=Asia/Tokyo"})
    engine = build_engine(tokyo.render_as_string(hide_password=False))
    try:
        owed_notices(engine, 1)
        with writing_unit_of_work(engine) as session:
            taken = NoticeClaim(A, lease_seconds=120, batch_size=100).take(session, clock.now())
            session.commit()
        assert taken.lease_until == START + timedelta(seconds=120)
        with unit_of_work(engine) as session:
            assert session.scalar(select(SubscriberNotice.LeasedUntil)) == taken.lease_until
        clock.advance(timedelta(seconds=119))
        b = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=B)
        assert (b.run().claimed, _held_by(engine, A)) == (0, 1)
    finally:
        engine.dispose()


def test_each_claim_stamps_the_lease_end_of_its_own_moment_not_the_first_claims(
    engine: Engine, clock: FakeClock
) -> None:
    first, second = owed_notices(engine, 2)
    claim = NoticeClaim(A, lease_seconds=120, batch_size=1)
    stamped = []
    for _ in (first, second):  # the same room each time: the runner's statement, built once
        now = clock.advance(timedelta(seconds=30))
        with writing_unit_of_work(engine) as session:
            stamped += claim.claim(session, now=now, lease_until=now + claim.lease, limit=1)
            session.commit()
    assert stamped == [first.id, second.id]
    assert notice_row(engine, first.id).LeasedUntil == START + timedelta(seconds=150)
    assert notice_row(engine, second.id).LeasedUntil == START + timedelta(seconds=180)


def test_a_runner_that_keeps_failing_never_holds_more_than_batch_size_rows(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed_notices(engine, 20)
    failing = make_sweep(engine, clock, FailingTransport(), runner=A, batch_size=4)
    working = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=B, batch_size=4)
    delivered = 0
    for _ in range(5):
        summary = failing.run()
        assert summary.held <= 4 and summary.failed == summary.held
        assert _held_by(engine, A) <= 4
        delivered += working.run().delivered
        clock.advance(timedelta(seconds=10))  # within A's lease: A renews, never grows
    assert _held_by(engine, A) == 4
    # The cap leaves the rest free for a runner that can deliver.
    assert delivered == 16


def test_held_rows_are_renewed_to_the_new_lease_end_before_anything_is_delivered(
    engine: Engine, clock: FakeClock
) -> None:
    owed = owed_notices(engine, 2)
    sweep = make_sweep(engine, clock, FailingTransport(), runner=A, lease_seconds=120)
    first = sweep.run()
    clock.advance(timedelta(seconds=60))
    second = sweep.run()
    assert (first.claimed, second.renewed, second.claimed) == (2, 2, 0)
    assert second.lease_until == clock.now() + timedelta(seconds=120)
    for o in owed:
        row = notice_row(engine, o.id)
        assert (row.LeasedBy, row.LeasedUntil) == (A, second.lease_until)


def test_a_sweep_that_outlives_its_own_lease_stops_delivering_and_says_so(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owed_notices(engine, 5)
    slow = SlowTransport(PickupDirectoryTransport(pickup), clock, timedelta(seconds=70))
    with caplog.at_level(logging.WARNING, logger="azurebank.notices"):
        summary = make_sweep(engine, clock, slow, runner=A, lease_seconds=120).run()
    # t=0 delivers (clock → 70), t=70 delivers (clock → 140), t=140 ≥ 120: stop.
    assert (summary.delivered, summary.not_attempted, summary.lease_lapsed) == (2, 3, True)
    assert len(list(pickup.iterdir())) == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "azurebank.notices.sweep"]
    ended = (START + timedelta(seconds=120)).isoformat()  # the lease the sweep took at START
    assert (
        f"Notice sweep by {A} outlived its own lease (ended {ended}); it stops delivering with 3 "
        "held rows not attempted"
    ) in lines


def test_a_sweep_that_outlives_its_lease_counts_the_rows_it_was_told_to_skip_as_not_attempted(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed = owed_notices(engine, 5)
    slow = SlowTransport(PickupDirectoryTransport(pickup), clock, timedelta(seconds=70))
    sweep = make_sweep(engine, clock, slow, runner=A, lease_seconds=120)
    summary = sweep.run(exclude={owed[0].id})
    # The oldest is skipped, t=0 and t=70 deliver, t=140 ≥ 120 leaves the last two.
    assert (summary.delivered, summary.not_attempted, summary.lease_lapsed) == (2, 3, True)
    assert notice_row(engine, owed[0].id).DeliveredAt is None


def test_a_sweep_counts_each_row_by_its_outcome_two_of_each(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    """Two delivered, two refused (their file exists) and two taken (another runner marked them
    first): the summary operators read counts every one."""
    owed = owed_notices(engine, 6)
    for refused in owed[2:4]:
        (pickup / f"{refused.id}.eml").write_bytes(b"an earlier attempt\r\n")
    racing = RacingTransport(PickupDirectoryTransport(pickup), engine, {n.id for n in owed[4:]})
    summary = make_sweep(engine, clock, racing, runner=A).run()
    assert (summary.delivered, summary.refused, summary.taken, summary.failed) == (2, 2, 2, 0)


def test_a_mark_that_finds_the_row_taken_is_a_warning_not_a_crash(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owed = owed_notices(engine, 2)
    racing = RacingTransport(PickupDirectoryTransport(pickup), engine, {owed[0].id})
    with caplog.at_level(logging.INFO, logger="azurebank.notices"):
        summary = make_sweep(engine, clock, racing, runner=A).run()
    assert (summary.delivered, summary.taken, summary.failed_whole) == (1, 1, None)
    # DeliveredAt is the concurrency token: the first mark stands.
    assert notice_row(engine, owed[0].id).DeliveryReceipt == "another runner's receipt"
    taken_lines = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith("Notice mark found")
    ]
    # The line names the notice and the receipt the mark could not record (the file's name).
    assert len(taken_lines) == 1 and taken_lines[0].startswith(
        f"Notice mark found the row taken: {owed[0].id} ("
    )
    assert taken_lines[0].endswith(f"receipt pickup:{owed[0].id}.eml is not recorded on it")


@pytest.mark.adr("0045", "D7")
def test_a_delivered_row_records_its_receipt_and_the_mark_clears_the_lease(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    (owed,) = owed_notices(engine, 1)
    make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A).run()
    row = notice_row(engine, owed.id)
    assert row.DeliveredAt == clock.now()
    assert row.DeliveryReceipt == f"pickup:{owed.id}.eml"
    assert (row.LeasedBy, row.LeasedUntil) == (None, None)


def test_one_claim_never_stamps_more_than_it_was_asked_for(
    engine: Engine, clock: FakeClock
) -> None:
    # A plain `IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` on PostgreSQL is rescanned per
    # outer row and can stamp every row (5 of 5 for a limit of 3); the claim picks its rows once.
    owed_notices(engine, 50)
    for limit in (1, 3, 10):
        with writing_unit_of_work(engine) as session:
            claim = NoticeClaim(f"verb/h/1/{limit:08x}", lease_seconds=120, batch_size=limit)
            assert len(claim.take(session, clock.now()).claimed_ids) == limit
            session.commit()
        assert _held_by(engine, claim.runner) == limit


def _make_the_store_round_lease_times(engine: Engine) -> None:
    if engine.dialect.name == "postgresql":
        # timestamp(0) rounds to the nearest second on write.
        statement = 'ALTER TABLE "SubscriberNotices" ALTER COLUMN "LeasedUntil" TYPE timestamp(0)'
    elif engine.dialect.name == "mssql":
        # DATETIME2(0) rounds to the nearest second; ALTER COLUMN refuses a column a check names.
        statement = (
            "ALTER TABLE [SubscriberNotices] DROP CONSTRAINT [CK_SubscriberNotices_Lease]; "
            "ALTER TABLE [SubscriberNotices] ALTER COLUMN [LeasedUntil] DATETIME2(0) NULL"
        )
    else:
        # SQLite stores the text it is given; a trigger cuts the fraction off every lease end.
        statement = (
            'CREATE TRIGGER round_lease AFTER UPDATE OF "LeasedUntil" ON "SubscriberNotices" '
            'WHEN NEW."LeasedUntil" IS NOT NULL BEGIN UPDATE "SubscriberNotices" '
            'SET "LeasedUntil" = substr(NEW."LeasedUntil", 1, 19) WHERE "Id" = NEW."Id"; END'
        )
    with engine.begin() as connection:
        connection.execute(text(statement))


def test_a_store_that_rounds_timestamps_still_reads_back_what_it_holds_by_name(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    """ADR-0048 D2: "a store that rounded a timestamp could make it claim N and read back none".

    The store is made to round for real: on PostgreSQL the column becomes `timestamp(0)` (it
    rounds to whole seconds on write); on SQLite a trigger truncates the stored text to whole
    seconds. The clock stands at a sub-second instant, so the lease end this runner writes
    (…:02:00.7) is not the one the store holds (…:02:01 on PostgreSQL, …:02:00 on SQLite). The
    test first proves that, by showing a re-read by the instant written finds none of the rows;
    then a sweep, which re-reads by name, delivers every row it claimed.
    """
    _make_the_store_round_lease_times(engine)
    owed = owed_notices(engine, 3)
    clock.advance(timedelta(milliseconds=700))

    with writing_unit_of_work(engine) as session:
        claim = NoticeClaim(A, lease_seconds=120, batch_size=100)
        taken = claim.take(session, clock.now())
        session.commit()
    with unit_of_work(engine) as session:
        by_instant = session.scalar(
            select(func.count()).where(SubscriberNotice.LeasedUntil == taken.lease_until)
        )
        by_name = claim.held(session)
    assert len(taken.claimed_ids) == 3
    assert by_instant == 0  # the store did round: a re-read by the instant reads back none
    assert {h.id for h in by_name} == {o.id for o in owed}
    assert all(h.leased_until != taken.lease_until for h in by_name)

    summary = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A).run()
    assert (summary.renewed, summary.held, summary.delivered) == (3, 3, 3)
    assert len(list(pickup.iterdir())) == 3


def _set_row(engine: Engine, notice_id: uuid.UUID, **values: object) -> None:
    """Columns of one row written as another process would, outside any sweep."""
    with writing_unit_of_work(engine) as session:
        session.execute(
            SubscriberNotice.__table__.update()
            .where(SubscriberNotice.Id == notice_id)
            .values(**values)
        )
        session.commit()


def _sweep_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "azurebank.notices.sweep"]


@pytest.mark.adr("0048", "D3")
def test_the_next_sweep_counts_refused_rows_as_resting_and_one_with_only_resting_rows_is_silent(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owed = owed_notices(engine, 4)
    for refused in owed[:2]:
        (pickup / f"{refused.id}.eml").write_bytes(b"an earlier attempt\r\n")
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A)
    skipped = {n.id for n in owed[2:]}
    with caplog.at_level(logging.INFO, logger="azurebank.notices.sweep"):
        first = sweep.run(exclude=skipped)
        second = sweep.run()
        third = sweep.run()
    assert (first.refused, first.not_attempted, second.resting, second.delivered) == (2, 2, 2, 2)
    assert (third.held, third.resting) == (2, 2)
    # Two lines: the third sweep held only rows resting under their lease, and says nothing.
    assert _sweep_lines(caplog) == [
        f"Notice sweep by {A}: held 4 (renewed 0, claimed 4), delivered 0, refused 2, failed 0,"
        " taken 0, not attempted 2, resting 0; 0 held by other runners",
        f"Notice sweep by {A}: held 4 (renewed 4, claimed 0), delivered 2, refused 0, failed 0,"
        " taken 0, not attempted 0, resting 2; 0 held by other runners",
    ]


def test_an_idle_sweep_logs_nothing(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="azurebank.notices"):
        summary = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A).run()
    assert summary.held == 0
    assert [r.getMessage() for r in caplog.records if r.name.startswith("azurebank")] == []


def test_a_sweep_stops_delivering_at_the_instant_its_lease_ends_not_after(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed_notices(engine, 2)
    # The first delivery takes exactly the lease: the clock then reads the lease's end.
    slow = SlowTransport(PickupDirectoryTransport(pickup), clock, timedelta(seconds=60))
    summary = make_sweep(engine, clock, slow, runner=A, lease_seconds=60).run()
    assert clock.now() == summary.lease_until
    assert (summary.delivered, summary.not_attempted, summary.lease_lapsed) == (1, 1, True)


@pytest.mark.parametrize(
    ("lease_left", "counted"), [(timedelta(minutes=-1), 0), (timedelta(minutes=1), 1)]
)
def test_a_sweep_counts_only_other_runners_live_leases_as_held_by_them(
    engine: Engine, clock: FakeClock, pickup: Path, lease_left: timedelta, counted: int
) -> None:
    older, newer = owed_notices(engine, 2)
    _set_row(engine, newer.id, LeasedBy=B, LeasedUntil=clock.now() + lease_left)
    # A batch of one takes the older row, so the newer stays under B's lease, live or lapsed.
    summary = make_sweep(
        engine, clock, PickupDirectoryTransport(pickup), runner=A, batch_size=1
    ).run()
    assert summary.claimed_ids == (older.id,)
    assert summary.held_by_others == counted


@pytest.mark.parametrize(("lease_seconds", "batch_size"), [(0, 1), (1, 0)])
def test_a_claim_needs_a_lease_and_a_batch_of_at_least_one(
    lease_seconds: int, batch_size: int
) -> None:
    with pytest.raises(ValueError) as refused:
        NoticeClaim(A, lease_seconds=lease_seconds, batch_size=batch_size)
    assert str(refused.value) == "lease_seconds and batch_size must be at least 1"
    shortest = NoticeClaim(A, lease_seconds=1, batch_size=1)
    assert (shortest.lease, shortest.batch_size) == (timedelta(seconds=1), 1)


def test_a_delivery_run_needs_the_contact_every_notice_names(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    claim = NoticeClaim(A, lease_seconds=60, batch_size=1)
    with pytest.raises(ValueError) as refused:
        NoticeDeliveryRun(engine, clock, PickupDirectoryTransport(pickup), claim, contact="  ")
    assert str(refused.value) == "a notice needs Notices__Contact (ADR-0048 D6)"


def test_after_a_sweep_that_failed_whole_the_next_renews_what_its_runner_still_holds(
    sqlite_url: str, clock: FakeClock, pickup: Path
) -> None:
    # SQLite, whose one write lock another connection can hold: the sweep's claim then waits the
    # lock's bound (a second here) and the sweep fails as a whole.
    engine = build_engine(sqlite_url, options=EngineOptions(lock_timeout=1))
    try:
        (owed,) = owed_notices(engine, 1)
        sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A)
        first = sweep.run(exclude={owed.id})  # claimed, held under a live lease, not attempted
        assert (first.claimed, first.not_attempted) == (1, 1)
        blocker = sqlite3.connect(make_url(sqlite_url).database or "", isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            failed = sweep.run()
        finally:
            blocker.close()
        assert failed.failed_whole == "LockTimeout"
        # What the failed sweep knew is forgotten: the runner still holds the row, so the next
        # sweep renews it before delivering, as every sweep that holds rows does.
        last = sweep.run()
        assert (last.renewed, last.claimed, last.delivered) == (1, 0, 1)
    finally:
        engine.dispose()


def test_a_row_marked_delivered_that_still_names_the_runners_lease_is_not_held_again(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    # An operator's mark that set DeliveredAt alone, leaving the lease: delivered is delivered.
    (owed,) = owed_notices(engine, 1)
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A)
    assert sweep.run(exclude={owed.id}).held == 1
    _set_row(engine, owed.id, DeliveredAt=clock.now())
    assert notice_row(engine, owed.id).LeasedBy == A
    assert (sweep.run().held, list(pickup.iterdir())) == (0, [])


def test_rows_of_one_instant_are_delivered_in_id_order_as_the_claim_takes_them(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    ids = sorted((uuid.uuid4() for _ in range(6)), reverse=True)
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        # Inserted in descending Id order, so only the Id tie-break gives ascending order.
        for notice_id in ids:
            session.add(
                SubscriberNotice(
                    Id=notice_id, UserId=user_id, Kind=NoticeKind.PIN_ENROLLED, CreatedAt=START
                )
            )
            session.flush()
        session.commit()
    delivered: list[uuid.UUID] = []
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=A)
    sweep.run(on_outcome=lambda outcome: delivered.append(outcome.notice_id))
    assert delivered == sorted(ids)
