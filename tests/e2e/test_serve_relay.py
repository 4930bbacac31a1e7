"""Issue 4, acceptance 3: real `azurebank serve` processes with `Notices__Runner=Api`, period 1 s,
lease 3 s, a pickup directory in a temporary folder outside any git tree (ADR-0048 D1).

- one process: an owed notice inserted into its database appears as a file within a few periods;
- two processes on the same fresh PostgreSQL database: 500 notices delivered, no file refused
  (no duplicate), none left owed — the lease keeps them off each other's rows.

Control (run once, by hand; see the report): `AZUREBANK_E2E_CONTROL=ignore-lease` starts the two
processes with a claim that ignores other runners' leases, and the same test then fails on
refused files / rows marked twice.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.runner_support import CONTACT, notice_state, owe_notices, owed_count

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # seconds: a bound on a slow shared machine, not a speed claim
CONTROL = os.environ.get("AZUREBANK_E2E_CONTROL", "")

# The control's claim: owed rows, whoever holds them (what a runner without a lease would do).
_IGNORE_LEASE = """
import sys
import shared.notices.claim_sql as claim_sql
claim_sql._is_free = lambda table, now: table.c.DeliveredAt.is_(None)
from shared.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(db_url: str, pickup: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One `azurebank serve` process with the Api runner; always stopped, killed if need be."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.replace(":", "__").split("__")[0].lower() not in {"database", "notices"}
    }
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "Database__Url": db_url,
            "Notices__Runner": "Api",
            "Notices__PeriodSeconds": "1",
            "Notices__LeaseSeconds": "3",
            "Notices__PickupDirectory": str(pickup),
            "Notices__Contact": CONTACT,
        }
    )
    command = ["serve", "--port", str(_free_port())]
    argv = (
        [sys.executable, "-c", _IGNORE_LEASE, *command]
        if CONTROL == "ignore-lease"
        else [sys.executable, "-m", "shared.cli", *command]
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "Notice relay: live as api/" in log.read_text(), f"{log.name} announced")
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=WAIT)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)
    return time.monotonic() - started


def _pickup(tmp_path: Path) -> Path:
    directory = tmp_path / "pickup"
    directory.mkdir()
    return directory


def test_d1_an_owed_notice_appears_as_a_file_within_a_few_periods(
    sqlite_url: str, tmp_path: Path
) -> None:
    pickup = _pickup(tmp_path)
    log = tmp_path / "serve.log"
    with serving(sqlite_url, pickup, log):
        (notice,) = owe_notices(sqlite_url)
        waited = wait_for(lambda: (pickup / f"{notice}.eml").exists(), "the notice file")
        wait_for(lambda: notice_state(sqlite_url, notice).delivered_at is not None, "the mark")
    text = log.read_text()
    assert f"Notice delivered: {notice}" in text
    assert "ERROR" not in text
    # "Within a few periods": generous on a shared machine; the figure is in the report.
    assert waited < 30, waited


@pytest.mark.postgres
def test_d1_two_serve_processes_deliver_500_notices_once_each_with_none_left_owed(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    pickup = _pickup(tmp_path)
    logs = [tmp_path / "serve-1.log", tmp_path / "serve-2.log"]
    with serving(fresh_postgres_url, pickup, logs[0]), serving(fresh_postgres_url, pickup, logs[1]):
        ids = owe_notices(fresh_postgres_url, 500)
        wait_for(lambda: owed_count(fresh_postgres_url) == 0, "every notice delivered", 120)
        time.sleep(2)  # two more periods: a duplicate attempt would show up as a refusal
    texts = [log.read_text() for log in logs]
    files = sorted(p.name for p in pickup.iterdir() if p.suffix == ".eml")
    assert files == sorted(f"{i}.eml" for i in ids)
    assert [p for p in pickup.iterdir() if p.suffix != ".eml"] == []  # no temporary left
    for text in texts:
        assert "Notice refused" not in text
        assert "found the row taken" not in text
        assert "ERROR" not in text
    delivered = [len(re.findall(r"Notice delivered: ", text)) for text in texts]
    assert sum(delivered) == 500, delivered
    # D1: both hosts run the loop (a batch caps each sweep at 100, so neither can take all 500).
    assert all(count > 0 for count in delivered), delivered
    names = {re.search(r"live as (api/\S+),", text).group(1) for text in texts}  # type: ignore[union-attr]
    assert len(names) == 2
