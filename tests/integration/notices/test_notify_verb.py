"""`azurebank notify` (ADR-0048 D3, D5; docs/cli.md) and `azurebank notices status`, run through the
command line's own `main` on SQLite and PostgreSQL, and once more as real processes."""

from __future__ import annotations

import json
import logging
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from azurebank_cli import exits
from azurebank_cli.main import main
from shared.clock import utc_text
from shared.db.engine import build_engine
from shared.db.schema import NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work
from shared.notices.notify import NotifyExit, drain
from shared.notices.status import OwedBacklog, owed_backlog_reader, read_owed_status
from shared.notices.sweep import NoticeSweepSummary
from shared.notices.transports import PickupDirectoryTransport
from tests.support.checkout import run_python
from tests.support.clock import FakeClock
from tests.support.hosts import CONTACT
from tests.support.notices import (
    START,
    FailingTransport,
    SlowTransport,
    add_notice,
    make_sweep,
    notice_row,
    owed_notices,
)
from tests.support.users import add_user

OTHER = "api/host-x/4242/0badf00d"
VERB = "verb/host-v/77/0000beef"


@pytest.fixture
def verb_env(monkeypatch: pytest.MonkeyPatch, db_url: str, pickup: Path) -> dict[str, str]:
    env = {
        "Database__Url": db_url,
        "Notices__PickupDirectory": str(pickup),
        "Notices__Contact": CONTACT,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def _notify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["notify", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _lease_until_from_now(minutes: float) -> datetime:
    return datetime.now(UTC) + timedelta(minutes=minutes)


@pytest.mark.adr("0048", "D5")
def test_notify_exits_0_after_delivering(
    verb_env: dict[str, str], engine: Engine, pickup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owed = owed_notices(engine, 3)
    code, out, _ = _notify(capsys)
    assert code == exits.OK
    assert "delivered 3" in out
    assert sorted(p.name for p in pickup.iterdir()) == sorted(f"{o.id}.eml" for o in owed)
    for o in owed:
        row = notice_row(engine, o.id)
        assert row.DeliveredAt is not None and row.LeasedBy is None
    # The runner name it announces is the verb's (D5).
    assert "notify: as verb/" in out and "lease 120s" in out


@pytest.mark.adr("0048", "D5")
def test_notify_exits_2_nothing_owed_and_the_line_says_which_reading(
    verb_env: dict[str, str], engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _notify(capsys)
    assert code == exits.NOTHING_TO_DO
    assert "notify: nothing to do: nothing owed" in out


@pytest.mark.adr("0048", "D5")
def test_notify_exits_2_when_everything_owed_is_held_under_another_runners_live_lease(
    verb_env: dict[str, str], engine: Engine, pickup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    until = _lease_until_from_now(10)
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        held = [add_notice(session, user_id, leased_by=OTHER, leased_until=until) for _ in range(2)]
        session.commit()
    code, out, _ = _notify(capsys)
    assert code == exits.NOTHING_TO_DO
    assert (
        "notify: nothing to do: everything owed is held under another runner's live lease: "
        f"{OTHER} (2 owed rows, lease lapses at "
    ) in out
    assert "nothing owed" not in out
    assert list(pickup.iterdir()) == []
    for notice_id in held:
        assert notice_row(engine, notice_id).LeasedBy == OTHER  # stepped aside (D5)

    code, out, _ = _notify(capsys, "--json")
    report = json.loads(out)
    assert code == exits.NOTHING_TO_DO
    assert report["reading"] == "everything owed is held under another runner's live lease"
    assert [(h["runner"], h["rows"]) for h in report["heldByOthers"]] == [(OTHER, 2)]


@pytest.mark.adr("0048", "D5")
def test_notify_counts_and_names_what_others_hold_beside_what_it_delivers(
    verb_env: dict[str, str], engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        add_notice(session, user_id, leased_by=OTHER, leased_until=_lease_until_from_now(10))
        lapsed = add_notice(
            session, user_id, leased_by=OTHER, leased_until=_lease_until_from_now(-1)
        )
        session.commit()
    code, out, _ = _notify(capsys)
    # The lapsed lease is taken over and delivered; the live one is counted and named.
    assert code == exits.OK
    assert notice_row(engine, lapsed).DeliveredAt is not None
    assert f"notify: held under a live lease by {OTHER} (1 owed rows" in out


@pytest.mark.adr("0048", "D5")
def test_notify_names_the_first_and_the_last_lapse_of_another_runners_leases(
    verb_env: dict[str, str], engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    first, last = _lease_until_from_now(5), _lease_until_from_now(10)
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        for until in (last, first):
            add_notice(session, user_id, leased_by=OTHER, leased_until=until)
        session.commit()
    code, out, _ = _notify(capsys)
    assert code == exits.NOTHING_TO_DO
    with unit_of_work(engine) as session:  # the instants as the store holds them
        stored = session.scalars(
            select(SubscriberNotice.LeasedUntil).where(SubscriberNotice.LeasedBy == OTHER)
        )
        lapses = sorted(utc_text(until) for until in stored if until is not None)
    assert (
        f"notify: held under a live lease by {OTHER} (2 owed rows, lease lapses at {lapses[0]}"
        f" to {lapses[1]})"
    ) in out.splitlines()


@pytest.mark.adr("0048", "D3")
def test_a_row_whose_file_exists_is_refused_stays_owed_and_notify_exits_6_on_every_run(
    verb_env: dict[str, str],
    engine: Engine,
    pickup: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    (owed,) = owed_notices(engine, 1)
    existing = pickup / f"{owed.id}.eml"
    existing.write_bytes(b"the file an earlier attempt produced\r\n")
    for _ in range(2):  # "on the next run it is refused again, never overwritten"
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="azurebank.notices"):
            code, out, _ = _notify(capsys)
        assert code == exits.REFUSED_FILE
        assert f"REFUSED: notice {owed.id}" in out and "move the file and run again" in out
        assert existing.read_bytes() == b"the file an earlier attempt produced\r\n"
        assert sorted(p.name for p in pickup.iterdir()) == [existing.name]  # no temporary left
        row = notice_row(engine, owed.id)
        assert row.DeliveredAt is None  # the row is the truth: still owed, beside the file
        refusals = [r for r in caplog.records if "Notice refused" in r.getMessage()]
        assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING


@pytest.mark.adr("0048", "D3")
def test_notify_delivers_the_rows_behind_a_refused_one_exits_6_and_moving_the_file_works_at_once(
    verb_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    engine: Engine,
    pickup: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A batch of one: the refused row must not keep the only place (D2's cap is on live work).
    monkeypatch.setenv("Notices__BatchSize", "1")
    refused, *behind = owed_notices(engine, 3)
    existing = pickup / f"{refused.id}.eml"
    existing.write_bytes(b"left behind\r\n")

    code, out, _ = _notify(capsys)

    assert code == exits.REFUSED_FILE
    assert f"REFUSED: notice {refused.id}" in out and "delivered 2, refused 1" in out
    for o in behind:
        assert notice_row(engine, o.id).DeliveredAt is not None
    row = notice_row(engine, refused.id)
    assert (row.DeliveredAt, row.LeasedBy, row.LeasedUntil) == (None, None, None)  # let go

    quarantine = tmp_path / "quarantine"
    quarantine.mkdir()
    existing.rename(quarantine / existing.name)
    code, out, _ = _notify(capsys)
    assert code == exits.OK and "delivered 1, refused 0" in out
    assert notice_row(engine, refused.id).DeliveredAt is not None
    assert existing.read_bytes() != b"left behind\r\n"


@pytest.mark.adr("0048", "D3")
def test_a_relay_holds_retries_and_is_refused_every_lease_never_overwriting(
    engine: Engine, pickup: Path
) -> None:
    from shared.notices.transports import PickupDirectoryTransport
    from tests.support.clock import FakeClock

    (owed,) = owed_notices(engine, 1)
    existing = pickup / f"{owed.id}.eml"
    existing.write_bytes(b"first\r\n")
    clock = FakeClock()
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), lease_seconds=120)
    for _ in range(3):
        summary = sweep.run()
        assert (summary.held, summary.refused, summary.delivered) == (1, 1, 0)
        clock.advance(timedelta(seconds=120))
    assert existing.read_bytes() == b"first\r\n"
    row = notice_row(engine, owed.id)
    assert (row.DeliveredAt, row.LeasedBy) == (None, sweep.runner)


@pytest.mark.adr("0048", "D5")
def test_notify_exits_1_when_another_failure_left_rows_owed(
    verb_env: dict[str, str], engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    with unit_of_work(engine) as session:
        user_id = add_user(session, email="   ").user_id
        blank = add_notice(session, user_id)
        good_user = add_user(session).user_id
        add_notice(session, good_user)
        session.commit()
    code, out, _ = _notify(capsys, "--json")
    report = json.loads(out)
    assert code == exits.FAILURE
    assert report["delivered"] == 1
    assert report["failed"] == [
        {
            "noticeId": str(blank),
            "kind": NoticeKind.PIN_ENROLLED.value,
            "status": "unusable-address",
            "detail": "blank",
        }
    ]
    assert report["reading"] is None and report["exitCode"] == 1


@pytest.mark.adr("0048", "D5")
def test_a_row_that_failed_is_let_go_when_notify_exits_so_the_next_run_may_take_it(
    verb_env: dict[str, str], engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    with unit_of_work(engine) as session:
        user_id = add_user(session, email=None).user_id
        notice_id = add_notice(session, user_id, kind="PasswordReset")
        session.commit()
    assert _notify(capsys)[0] == exits.FAILURE
    row = notice_row(engine, notice_id)
    assert (row.DeliveredAt, row.LeasedBy, row.LeasedUntil) == (None, None, None)


@pytest.mark.adr("0048", "D6")
@pytest.mark.parametrize("where", ["inside a git tree", "missing"])
def test_notify_exits_78_for_a_pickup_directory_inside_a_git_tree_or_missing(
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    sqlite_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if where == "missing":
        directory = tmp_path / "no-such-directory"
        expected = "does not exist"
    else:
        repo = tmp_path / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
        directory = repo / "spool"
        directory.mkdir()
        expected = "inside a git tree"
    monkeypatch.setenv("Database__Url", sqlite_url)
    monkeypatch.setenv("Notices__PickupDirectory", str(directory))
    monkeypatch.setenv("Notices__Contact", CONTACT)
    code, out, err = _notify(capsys)
    assert code == exits.CONFIG
    assert "Notices__PickupDirectory" in err and expected in err and "Fix:" in err
    assert str(directory) not in err + out  # the path may name a user's home


def test_notices_status_shows_owed_rows_their_holders_and_the_oldest_owed_rows_age(
    verb_env: dict[str, str], engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    created = datetime.now(UTC) - timedelta(hours=1, minutes=2, seconds=3)
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        oldest = add_notice(session, user_id, created_at=created)
        add_notice(session, user_id, created_at=created + timedelta(minutes=1))
        add_notice(
            session,
            user_id,
            created_at=created + timedelta(minutes=2),
            leased_by=OTHER,
            leased_until=_lease_until_from_now(5),
        )
        session.commit()
    assert main(["notices", "status"]) == exits.OK
    out = capsys.readouterr().out
    assert "owed: 3 (free to claim 2, under a live lease 1)" in out
    assert f"oldest owed: {oldest}" in out and "1h 2m" in out
    assert f"held by {OTHER}: 1 rows, lease until " in out and "(live)" in out

    assert main(["notices", "status", "--json"]) == exits.OK
    status = json.loads(capsys.readouterr().out)
    assert (status["owed"], status["free"], status["heldLive"]) == (3, 2, 1)
    assert status["oldestOwed"]["noticeId"] == str(oldest)
    assert 3700 < status["oldestOwed"]["ageSeconds"] < 3800
    assert [(h["runner"], h["rows"], h["live"]) for h in status["holders"]] == [(OTHER, 1, True)]


@pytest.mark.adr("0048", "D5")
def test_notify_reports_each_sweep_to_its_progress_and_names_its_runner_target_and_sweeps(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed_notices(engine, 3)
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=VERB, batch_size=2)
    seen: list[tuple[int, int, int]] = []

    def progress(sweeps: int, summary: NoticeSweepSummary, delivered: int) -> None:
        seen.append((sweeps, summary.claimed, delivered))

    report = drain(sweep, engine, clock, progress=progress)
    # A full batch is followed by another sweep; one that leaves room unfilled is the last.
    assert seen == [(1, 2, 2), (2, 1, 3)]
    assert (report.runner, report.target, report.sweeps) == (
        VERB,
        "pickup directory (Notices__PickupDirectory)",
        2,
    )


@pytest.mark.adr("0048", "D5")
def test_a_row_that_fails_is_attempted_once_per_notify_run_however_many_sweeps_follow(
    engine: Engine, clock: FakeClock
) -> None:
    owed = owed_notices(engine, 2)
    failing = FailingTransport()
    report = drain(make_sweep(engine, clock, failing, runner=VERB, batch_size=1), engine, clock)
    # The first sweep fills its batch of one with a row that fails; the second holds that row
    # (no room for the other) and does not try it again.
    assert (report.sweeps, failing.attempts) == (2, 1)
    assert [o.notice_id for o in report.failed] == [owed[0].id]
    assert report.exit_code == NotifyExit.FAILED


@pytest.mark.adr("0048", "D5")
def test_notify_names_other_runners_live_leases_at_exit_and_not_their_lapsed_ones(
    engine: Engine, clock: FakeClock
) -> None:
    live = "function/host-y/5/0000cafe"
    with unit_of_work(engine) as session:
        blank = add_user(session, email=" ").user_id
        add_notice(session, blank, created_at=START)  # fails, and fills the batch of one
        user_id = add_user(session).user_id
        for by, until in (
            (OTHER, START - timedelta(minutes=1)),
            (live, START + timedelta(hours=1)),
        ):
            add_notice(
                session,
                user_id,
                created_at=START + timedelta(seconds=1),
                leased_by=by,
                leased_until=until,
            )
        session.commit()
    report = drain(
        make_sweep(engine, clock, FailingTransport(), runner=VERB, batch_size=1), engine, clock
    )
    assert [(h.runner, h.rows) for h in report.held_by_others] == [(live, 1)]
    assert report.released == 1


@pytest.mark.adr("0048", "D5")
def test_notify_whose_database_goes_before_it_lets_go_fails_whole_naming_the_fault_only(
    engine: Engine, clock: FakeClock, pickup: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owed_notices(engine, 1)
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), runner=VERB)
    gone = build_engine(f"sqlite:///{tmp_path / 'gone' / 'bank.db'}")
    try:
        with caplog.at_level(logging.ERROR, logger="azurebank.notices.notify"):
            report = drain(sweep, gone, clock)
    finally:
        gone.dispose()
    assert (report.delivered, report.failed_whole) == (1, "DatabaseUnavailable")
    assert report.exit_code == NotifyExit.FAILED
    assert [r.getMessage() for r in caplog.records] == [
        "notify could not release its rows or read other holders: DatabaseUnavailable"
    ]


@pytest.mark.adr("0048", "D5")
def test_notify_whose_sweep_fails_whole_stops_and_still_names_other_runners_leases(
    engine: Engine, clock: FakeClock, pickup: Path, tmp_path: Path
) -> None:
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        add_notice(session, user_id, leased_by=OTHER, leased_until=START + timedelta(hours=1))
        session.commit()
    gone = build_engine(f"sqlite:///{tmp_path / 'gone' / 'bank.db'}")
    try:
        sweep = make_sweep(gone, clock, PickupDirectoryTransport(pickup), runner=VERB)
        report = drain(sweep, engine, clock)
    finally:
        gone.dispose()
    assert (report.sweeps, report.failed_whole) == (1, "DatabaseUnavailable")
    assert [h.runner for h in report.held_by_others] == [OTHER]
    assert report.exit_code == NotifyExit.FAILED


@pytest.mark.adr("0048", "D5")
def test_notify_that_outlives_its_lease_stops_and_lets_go_of_what_it_did_not_try(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    owed = owed_notices(engine, 3)
    slow = SlowTransport(PickupDirectoryTransport(pickup), clock, timedelta(seconds=70))
    # A full batch (3 of 3 claimed) would have notify sweep again, were its lease not lapsed.
    sweep = make_sweep(engine, clock, slow, runner=VERB, lease_seconds=120, batch_size=3)
    report = drain(sweep, engine, clock)
    # t=0 and t=70 deliver; at t=140 the lease (120 s) has lapsed: the third is not tried.
    assert (report.sweeps, report.delivered, report.lease_lapsed) == (1, 2, True)
    assert report.exit_code == NotifyExit.FAILED
    row = notice_row(engine, owed[2].id)
    assert (row.DeliveredAt, row.LeasedBy, row.LeasedUntil) == (None, None, None)


def test_the_backlog_gauges_read_nothing_owed_as_zero_and_otherwise_the_oldest_rows_age(
    engine: Engine, clock: FakeClock
) -> None:
    read = owed_backlog_reader(engine, clock)
    assert read() == OwedBacklog(owed=0, oldest_owed_age=timedelta(0))
    owed_notices(engine, 2, start=START - timedelta(minutes=5))
    assert read() == OwedBacklog(owed=2, oldest_owed_age=timedelta(minutes=5))


def test_status_of_nothing_owed_is_none_free_no_holder_and_no_oldest_row(engine: Engine) -> None:
    with unit_of_work(engine) as session:
        status = read_owed_status(session, START)
    assert (status.owed, status.free, status.held_live, status.holders) == (0, 0, 0, ())
    assert (status.oldest_owed_id, status.oldest_owed_at, status.oldest_owed_age) == (None,) * 3


def test_status_names_the_lowest_id_among_the_oldest_and_a_lease_ending_now_as_lapsed(
    engine: Engine,
) -> None:
    lease_end = START + timedelta(minutes=2)
    with unit_of_work(engine) as session:
        user_id = add_user(session).user_id
        same_instant = [add_notice(session, user_id, created_at=START) for _ in range(4)]
        add_notice(
            session,
            user_id,
            created_at=START + timedelta(seconds=1),
            leased_by=OTHER,
            leased_until=lease_end,
        )
        session.commit()
    with unit_of_work(engine) as session:
        status = read_owed_status(session, lease_end)
    assert status.oldest_owed_id == min(same_instant)  # CreatedAt, then Id, as the claim orders
    assert status.oldest_owed_age == timedelta(minutes=2)
    # A lease proves only that it is unexpired: one ending at this instant holds nothing.
    assert (status.owed, status.free, status.held_live) == (5, 5, 0)
    assert [(h.runner, h.rows, h.live(status.now)) for h in status.holders] == [(OTHER, 1, False)]


# --- real processes ---------------------------------------------------------------------------


def _process(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "azurebank_cli", *args, settings=env)


@pytest.mark.adr("0048", "D5")
@pytest.mark.e2e
def test_the_azurebank_process_exits_0_then_2_and_78_with_the_documented_lines(
    sqlite_url: str, pickup: Path, tmp_path: Path
) -> None:
    from shared.db.engine import build_engine

    engine = build_engine(sqlite_url)
    try:
        (owed,) = owed_notices(engine, 1)
    finally:
        engine.dispose()
    env = {
        "Database__Url": sqlite_url,
        "Notices__PickupDirectory": str(pickup),
        "Notices__Contact": CONTACT,
    }
    first = _process(env, "notify")
    assert first.returncode == 0, first.stderr
    assert (pickup / f"{owed.id}.eml").is_file()
    assert "Notice delivered: " in first.stderr  # Information, on stderr; the report on stdout
    second = _process(env, "notify", "--json")
    assert second.returncode == 2
    assert json.loads(second.stdout)["reading"] == "nothing owed"
    refused = _process({**env, "Notices__PickupDirectory": str(tmp_path / "gone")}, "notify")
    assert refused.returncode == 78
    assert "Notices__PickupDirectory" in refused.stderr and "Traceback" not in refused.stderr
    status = _process(env, "notices", "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["owed"] == 0


@pytest.mark.e2e
def test_notify_help_names_its_exit_codes() -> None:
    done = _process({}, "notify", "--help")
    assert done.returncode == 0
    assert "6 a refused file" in " ".join(done.stdout.split())
