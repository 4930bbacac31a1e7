"""docs/operations.md, the runbook for a refused file (ADR-0048 D3): the row is the truth, so move
the file away and run again, or mark the row with the SQL the runbook gives. Both ways are run
here for real, the SQL read from the document itself, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import logging
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from shared.bootstrap import Host
from shared.db.engine import get_engine
from shared.notices.hosted import HostedRelay
from shared.settings import Settings, load_settings
from tests.support.checkout import REPO
from tests.support.clock import FakeClock
from tests.support.hosts import relay_environ
from tests.support.notices import just_now, notice_row, owed_notices

pytestmark = pytest.mark.adr("0048", "D3")

DOC = REPO / "docs" / "operations.md"
EXAMPLE_ID = uuid.UUID("0b7c1a6e-1f4e-4b8e-9d7e-2a3c4d5e6f01")
LABELS = {"postgresql": "PostgreSQL:", "sqlite": "SQLite", "mssql": "SQL Server:"}


def runbook_sql(dialect: str) -> str:
    """The fenced `sql` block that follows the dialect's label in the runbook."""
    blocks = re.findall(
        r"^([^\n]+)\n\n```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.M | re.S
    )
    (sql,) = [body for label, body in blocks if label.startswith(LABELS[dialect])]
    return str(sql)


def _refused(
    db_url: str, pickup: Path, clock: FakeClock
) -> tuple[HostedRelay, uuid.UUID, Settings]:
    settings = load_settings(relay_environ(db_url, pickup, "Function"))
    notice = owed_notices(db_url, start=just_now())[0].id
    # A file left by a runner that died before its mark (D3).
    (pickup / f"{notice}.eml").write_bytes(b"left behind\n")
    host = Host("function", settings, clock=clock).relay
    summary = host.tick(past_due=False)
    assert summary is not None and summary.refused == 1
    assert notice_row(db_url, notice).DeliveredAt is None
    return host, notice, settings


def test_runbook_move_the_file_away_and_the_relay_delivers_it_one_lease_after_its_refusal(
    db_url: str, pickup: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(datetime.now(UTC))
    with caplog.at_level(logging.WARNING):
        host, notice, settings = _refused(db_url, pickup, clock)
    assert any("Notice refused" in r.getMessage() for r in caplog.records)
    quarantine = tmp_path / "quarantine"
    quarantine.mkdir()
    (pickup / f"{notice}.eml").rename(quarantine / f"{notice}.eml")

    # D3: retried once per lease: within the lease it was refused under, the row rests.
    clock.advance(timedelta(seconds=settings.Notices.LeaseSeconds - 1))
    resting = host.tick(past_due=False)
    assert resting is not None and (resting.resting, resting.delivered) == (1, 0)
    clock.advance(timedelta(seconds=1))
    summary = host.tick(past_due=False)

    assert summary is not None and summary.delivered == 1
    assert notice_row(db_url, notice).DeliveredAt is not None
    assert (pickup / f"{notice}.eml").read_bytes() != b"left behind\n"


def test_runbook_mark_the_row_with_the_documented_sql(db_url: str, pickup: Path) -> None:
    host, notice, _ = _refused(db_url, pickup, FakeClock(datetime.now(UTC)))
    engine = get_engine(db_url)
    dialect = engine.dialect.name
    shown = EXAMPLE_ID.hex if dialect == "sqlite" else str(EXAMPLE_ID)
    actual = notice.hex if dialect == "sqlite" else str(notice)
    sql = runbook_sql(dialect)
    assert shown in sql
    with engine.begin() as connection:
        marked = connection.execute(text(sql.replace(shown, actual))).rowcount
        again = connection.execute(text(sql.replace(shown, actual))).rowcount
    assert (marked, again) == (1, 0)  # one row updated; a second run finds nothing to do

    state = notice_row(db_url, notice)
    assert state.DeliveredAt is not None and state.LeasedBy is None
    assert state.DeliveryReceipt == "operator: kept the existing file (ADR-0048 D3 runbook)"
    summary = host.tick(past_due=False)
    assert summary is not None and summary.held == 0 and summary.refused == 0
    assert (pickup / f"{notice}.eml").read_bytes() == b"left behind\n"  # never overwritten
