"""ADR-0048 D1: real `azurebank serve` processes with `Notices__Runner=Api`, period 1 s,
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
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.support.hosts import CONTACT
from tests.support.notices import just_now, notice_row, owed_count, owed_notices
from tests.support.served import CLI, ServedProcess, clean_environ, served, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.adr("0048", "D1")]

CONTROL = os.environ.get("AZUREBANK_E2E_CONTROL", "")

# The control's claim: owed rows, whoever holds them (what a runner without a lease would do).
_IGNORE_LEASE = """
import sys
import shared.notices.claim_sql as claim_sql
claim_sql._is_free = lambda table, now: table.c.DeliveredAt.is_(None)
from azurebank_cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _announced(server: ServedProcess) -> bool:
    return "Notice relay: live as api/" in server.output()


def serving(db_url: str, pickup: Path, log: Path) -> AbstractContextManager[ServedProcess]:
    """One `azurebank serve` process with the Api runner; always stopped, killed if need be."""
    env = clean_environ(
        db_url,
        Notices__Runner="Api",
        Notices__PeriodSeconds="1",
        Notices__LeaseSeconds="3",
        Notices__PickupDirectory=str(pickup),
        Notices__Contact=CONTACT,
    )
    program = [CLI[0], "-c", _IGNORE_LEASE] if CONTROL == "ignore-lease" else CLI
    return served(env, log, program=program, ready=_announced)


def test_an_owed_notice_appears_as_a_file_within_a_few_periods(
    sqlite_url: str, tmp_path: Path, pickup: Path
) -> None:
    log = tmp_path / "serve.log"
    with serving(sqlite_url, pickup, log):
        notice = owed_notices(sqlite_url, start=just_now())[0].id
        waited = wait_for(lambda: (pickup / f"{notice}.eml").exists(), "the notice file")
        wait_for(lambda: notice_row(sqlite_url, notice).DeliveredAt is not None, "the mark")
    text = log.read_text()
    assert f"Notice delivered: {notice}" in text
    assert "ERROR" not in text
    # "Within a few periods": generous on a shared machine; the figure is in the report.
    assert waited < 30, waited


@pytest.mark.postgres
def test_two_serve_processes_deliver_500_notices_once_each_with_none_left_owed(
    fresh_postgres_url: str, tmp_path: Path, pickup: Path
) -> None:
    logs = [tmp_path / "serve-1.log", tmp_path / "serve-2.log"]
    with serving(fresh_postgres_url, pickup, logs[0]), serving(fresh_postgres_url, pickup, logs[1]):
        ids = [o.id for o in owed_notices(fresh_postgres_url, 500, start=just_now())]
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
