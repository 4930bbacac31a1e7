"""The pickup transport writes a temporary file, fsyncs it and links it to its final
name. A runner killed between the two leaves the temporary behind: a whole notice, address
included, in a hidden `.{noticeId}.*.tmp`. A sweep removes the transport's own temporaries once
they are older than any runner's lease, and nothing else: never a final `.eml`, never a name that
is not exactly the transport's, never a young temporary a live runner may be about to link. On
SQLite and PostgreSQL, on a real directory, one crash by a real process killed with SIGKILL."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from shared.notices.transports import (
    BlobContainerTransport,
    LeavesTemporaryFiles,
    PickupDirectoryTransport,
    is_temporary_file_name,
)
from tests.support.checkout import REPO
from tests.support.clock import FakeClock
from tests.support.hosts import CONTACT
from tests.support.notices import make_sweep, notice_row, owed_notices

LEASE = 120

# The child is a real `azurebank notify` whose link(2) never comes: it says so, then waits to be
# killed, so the kill lands exactly between the fsynced temporary and the final name.
_STALLS_BEFORE_THE_LINK = """
import os, sys, time
from pathlib import Path
from azurebank_cli.main import main

marker = Path(sys.argv[1])

def stalled_link(src, dst, **kwargs):
    marker.write_text("the temporary is written and fsynced; the link has not happened")
    time.sleep(600)

os.link = stalled_link
sys.exit(main(["notify"]))
"""


def _temporary_named_as_the_transport_names_it(pickup: Path, notice_id: uuid.UUID) -> Path:
    fd, name = tempfile.mkstemp(dir=pickup, prefix=f".{notice_id}.", suffix=".tmp")
    os.close(fd)
    return Path(name)


def _age(path: Path, now: datetime, age: timedelta) -> None:
    instant = (now - age).timestamp()
    os.utime(path, (instant, instant), follow_symlinks=False)


def _removal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("azurebank.notices") and "temporary" in r.getMessage()
    ]


def test_a_runner_killed_between_its_temporary_and_the_link_leaves_nothing_once_its_lease_lapsed(
    db_url: str,
    engine: Engine,
    pickup: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (owed,) = owed_notices(engine, 1)
    assert owed.email is not None
    marker = tmp_path / "stalled"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "Database__Url": db_url,
        "Notices__PickupDirectory": str(pickup),
        "Notices__Contact": CONTACT,
    }
    with (tmp_path / "child.out").open("w") as out, (tmp_path / "child.err").open("w") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", _STALLS_BEFORE_THE_LINK, str(marker)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 60
            while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert marker.exists(), (tmp_path / "child.err").read_text()
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    # What the crash left: a hidden temporary holding the whole notice, address included, no
    # final file, and the row owed under the dead verb's lease.
    (leftover,) = list(pickup.iterdir())
    assert leftover.name.startswith(f".{owed.id}.") and is_temporary_file_name(leftover.name)
    assert owed.email.encode() in leftover.read_bytes()
    row = notice_row(engine, owed.id)
    assert row.DeliveredAt is None and (row.LeasedBy or "").startswith("verb/")

    # A runner that comes along once the verb's two-minute lease has lapsed.
    clock = FakeClock(datetime.now(UTC) + timedelta(seconds=LEASE + 10))
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), lease_seconds=LEASE)
    with caplog.at_level(logging.INFO, logger="azurebank.notices"):
        summary = sweep.run()

    assert sorted(p.name for p in pickup.iterdir()) == [f"{owed.id}.eml"]
    assert summary.delivered == 1 and summary.leftovers_removed == 1
    assert notice_row(engine, owed.id).DeliveredAt is not None
    assert _removal_lines(caplog) == [
        "Notice sweep by function/test/1/0000aaaa: removed 1 temporary files older than 120s"
        " from the pickup directory (Notices__PickupDirectory), left by runners that died"
        " between writing and linking them"
    ]
    # A count, never a name or a path (ADR-0048 D4).
    for record in caplog.records:
        message = record.getMessage()
        assert str(pickup) not in message and leftover.name not in message
        assert owed.email not in message


@pytest.mark.parametrize(
    "decoy",
    [
        "{id}.eml",  # a final file
        ".{id}.eml",
        "{id}.abcd_123.tmp",  # not hidden
        ".{id}.abcd_123.tmp.bak",
        ".{id}.abcd_123.tmpx",
        ".{id}.ABCD_123.tmp",  # not the transport's alphabet
        ".{id}.abcd_12.tmp",  # one character short
        ".{id}.abcd_1234.tmp",  # one character long
        ".{id}..tmp",
        ".{ID}.abcd_123.tmp",  # an Id the transport never writes (upper case)
        ".{hex}.abcd_123.tmp",  # an Id without its dashes
        ".not-a-notice.abcd_123.tmp",
        "x.{id}.abcd_123.tmp",
        "notes.txt",
    ],
)
def test_only_the_transports_own_old_temporaries_are_removed_never_another_file(
    engine: Engine, clock: FakeClock, pickup: Path, decoy: str
) -> None:
    notice_id = uuid.uuid4()
    old = timedelta(seconds=LEASE * 10)
    other = pickup / decoy.format(id=notice_id, ID=str(notice_id).upper(), hex=notice_id.hex)
    other.write_bytes(b"not the transport's temporary\r\n")
    _age(other, clock.now(), old)
    leftover = _temporary_named_as_the_transport_names_it(pickup, notice_id)
    _age(leftover, clock.now(), old)

    summary = make_sweep(engine, clock, PickupDirectoryTransport(pickup)).run()

    assert sorted(p.name for p in pickup.iterdir()) == [other.name]
    assert other.read_bytes() == b"not the transport's temporary\r\n"
    assert summary.leftovers_removed == 1


def test_a_directory_or_a_symlink_named_as_a_temporary_is_never_removed(
    engine: Engine, clock: FakeClock, pickup: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"elsewhere\r\n")
    directory = pickup / f".{uuid.uuid4()}.abcd_123.tmp"
    directory.mkdir()
    link = pickup / f".{uuid.uuid4()}.abcd_123.tmp"
    link.symlink_to(outside)
    # The link's target is as old as the link: only the link's own type keeps it.
    for path in (directory, link, outside):
        _age(path, clock.now(), timedelta(days=1))

    summary = make_sweep(engine, clock, PickupDirectoryTransport(pickup)).run()

    assert sorted(p.name for p in pickup.iterdir()) == sorted([directory.name, link.name])
    assert outside.read_bytes() == b"elsewhere\r\n" and summary.leftovers_removed == 0


def test_a_young_temporary_is_kept_because_a_live_runner_may_be_about_to_link_it(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Removed once older than the lease: one just younger and one exactly as old are kept.
    ages = {"young": LEASE - 1, "exact": LEASE, "old": LEASE + 1, "older": LEASE + 2}
    made = {}
    for name, seconds in ages.items():
        made[name] = _temporary_named_as_the_transport_names_it(pickup, uuid.uuid4())
        _age(made[name], clock.now(), timedelta(seconds=seconds))
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), lease_seconds=LEASE)

    with caplog.at_level(logging.INFO, logger="azurebank.notices"):
        summary = sweep.run()
        kept = sorted(made[name].name for name in ("young", "exact"))
        assert sorted(p.name for p in pickup.iterdir()) == kept
        assert summary.leftovers_removed == 2
        clock.advance(timedelta(seconds=2))  # now the young one's writer has lost its lease too
        assert sweep.run().leftovers_removed == 2
    assert list(pickup.iterdir()) == []
    assert len(_removal_lines(caplog)) == 2


def test_a_short_relay_lease_still_waits_out_the_verbs_two_minutes_before_removing(
    engine: Engine, clock: FakeClock, pickup: Path
) -> None:
    # The verb's lease is two minutes whatever Notices__LeaseSeconds says (ADR-0048 D5), so a
    # temporary 60 s old may be a live verb's even under a 30 s relay lease.
    temporary = _temporary_named_as_the_transport_names_it(pickup, uuid.uuid4())
    _age(temporary, clock.now(), timedelta(seconds=60))
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup), lease_seconds=30)
    assert sweep.run().leftovers_removed == 0
    assert temporary.exists()
    clock.advance(timedelta(seconds=61))
    assert sweep.run().leftovers_removed == 1
    assert not temporary.exists()


def test_the_blob_container_writes_no_temporary_so_it_has_no_leftovers_to_remove(
    pickup: Path,
) -> None:
    # An upload is atomic: a blob appears whole under its name or not at all.
    blob = BlobContainerTransport("notices", blob_service_uri="https://account.blob.example")
    assert not isinstance(blob, LeavesTemporaryFiles)
    assert isinstance(PickupDirectoryTransport(pickup), LeavesTemporaryFiles)


def test_a_leftover_that_cannot_be_removed_is_kept_named_by_its_error_type_and_the_others_go(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An immutable file is one even root cannot unlink: the stand-in for another user's
    # temporary in a sticky directory.
    kept = _temporary_named_as_the_transport_names_it(pickup, uuid.uuid4())
    removable = _temporary_named_as_the_transport_names_it(pickup, uuid.uuid4())
    for leftover in (kept, removable):
        _age(leftover, clock.now(), timedelta(days=1))
    made = subprocess.run(["chattr", "+i", str(kept)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip("this file system has no immutable files (chattr +i)")
    try:
        with caplog.at_level(logging.WARNING, logger="azurebank.notices.sweep"):
            summary = make_sweep(engine, clock, PickupDirectoryTransport(pickup)).run()
        remaining = [p.name for p in pickup.iterdir()]
    finally:
        subprocess.run(["chattr", "-i", str(kept)], check=True)
    assert remaining == [kept.name] and summary.leftovers_removed == 1
    assert [r.getMessage() for r in caplog.records if r.name == "azurebank.notices.sweep"] == [
        "Notice sweep by function/test/1/0000aaaa could not remove 1 leftover temporary files: "
        "PermissionError"
    ]


def test_a_pickup_directory_that_went_away_is_named_by_its_error_type_and_the_sweep_goes_on(
    engine: Engine, clock: FakeClock, pickup: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sweep = make_sweep(engine, clock, PickupDirectoryTransport(pickup))
    pickup.rmdir()
    with caplog.at_level(logging.WARNING, logger="azurebank.notices.sweep"):
        summary = sweep.run()
    assert (summary.failed_whole, summary.leftovers_removed) == (None, 0)
    assert [r.getMessage() for r in caplog.records if r.name == "azurebank.notices.sweep"] == [
        "Notice sweep by function/test/1/0000aaaa could not remove leftover temporary files: "
        "FileNotFoundError"
    ]
