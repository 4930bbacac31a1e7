"""ADR-0051 and ADR-0048 D1: the timer Function's own user code, invoked with a real
`azure.functions.timer.TimerRequest`, runs one NoticeSweep per tick when `Notices__Runner`
names the Function and none otherwise; a sweep that fails as a whole is logged at Error and the
next invocation delivers.

Each case runs in a fresh interpreter, because importing `function_app` is the host's start (the
settings are read there, once) — exactly as the Functions host loads it. The failure is real: the
notices table is renamed away under the running host, then put back.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkout import run_python
from tests.support.hosts import relay_environ
from tests.support.notices import just_now, notice_row, owed_notices

_HOST = textwrap.dedent(
    """
    import json, logging, os, sqlite3, sys

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append({"level": record.levelname, "name": record.name,
                            "message": record.getMessage(), "exc": bool(record.exc_info)})

    logging.getLogger().addHandler(Keep())
    logging.getLogger().setLevel(logging.INFO)

    import function_app  # the host's start: settings read and checked, once
    from azure.functions.timer import TimerRequest

    (timer,) = [f for f in function_app.app.get_functions()
                if f.get_function_name() == "notice_relay"]
    user_code = timer.get_user_function()
    pickup = os.environ.get("Notices__PickupDirectory")
    out = {"start": records[:], "steps": []}
    for step in json.loads(sys.argv[1]):
        del records[:]
        if "sql" in step:
            db = sqlite3.connect(step["db"])
            db.execute(step["sql"])
            db.commit()
            db.close()
            continue
        returned = user_code(TimerRequest(past_due=step["past_due"]))
        files = sorted(os.listdir(pickup)) if pickup else []
        out["steps"].append({"returned": returned, "records": records[:], "files": files})
    print(json.dumps(out))
    """
)


def _run_host(environ: dict[str, str], steps: list[dict[str, Any]]) -> dict[str, Any]:
    done = run_python("-c", _HOST, json.dumps(steps), settings=environ)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _relay_lines(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["name"].startswith("azurebank.notices")]


@pytest.mark.adr("0051", "D1")
def test_when_named_each_invocation_runs_one_sweep_and_a_late_tick_is_logged(
    sqlite_url: str, pickup: Path
) -> None:
    """ADR-0051: the Function the flag names runs one sweep a tick; a late tick is logged."""
    first = owed_notices(sqlite_url, start=just_now())[0].id
    result = _run_host(
        relay_environ(sqlite_url, pickup, "Function"),
        [{"past_due": True}, {"past_due": False}],
    )
    (announcement,) = [r for r in result["start"] if r["name"] == "azurebank.notices.relay"]
    assert announcement["level"] == "INFO"
    assert announcement["message"].startswith("Notice relay: live as function/")
    assert ", schedule 0 */1 * * * *, lease 120s, batch 100, into " in announcement["message"]

    late, on_time = result["steps"]
    assert late["files"] == [f"{first}.eml"]
    assert notice_row(sqlite_url, first).DeliveredAt is not None
    assert any(
        r["level"] == "WARNING" and "late (past due)" in r["message"] for r in late["records"]
    )
    # One sweep per tick: the late tick delivered the one owed notice; the next had nothing.
    assert sum("Notice delivered: " in r["message"] for r in late["records"]) == 1
    assert sum(r["message"].startswith("Notice sweep by function/") for r in late["records"]) == 1
    assert not any("late" in r["message"] for r in on_time["records"])
    assert on_time["files"] == late["files"]


@pytest.mark.adr("0051", "D4")
@pytest.mark.parametrize("runner", ["None", "Api"])
def test_when_not_named_the_flag_is_logged_once_and_no_invocation_sweeps(
    runner: str, sqlite_url: str, pickup: Path
) -> None:
    """ADR-0051 D4: a Function the flag does not name logs the flag once and never sweeps."""
    notice = owed_notices(sqlite_url, start=just_now())[0].id
    result = _run_host(
        relay_environ(sqlite_url, pickup, runner),
        [{"past_due": True}, {"past_due": False}, {"past_due": False}],
    )
    assert [(r["level"], r["message"]) for r in _relay_lines(result["start"])] == [
        ("INFO", f"Notice relay: Notices__Runner is {runner}; this process delivers nothing")
    ]
    for step in result["steps"]:
        assert step["files"] == []
        assert _relay_lines(step["records"]) == []  # not even the late tick: it returns at once
    assert notice_row(sqlite_url, notice).DeliveredAt is None


@pytest.mark.adr("0048", "D1")
def test_a_sweep_that_fails_whole_is_logged_at_error_and_the_next_tick_delivers(
    sqlite_url: str, pickup: Path
) -> None:
    """ADR-0048 D1: the catch-all per sweep, logged at Error; the next tick delivers."""
    notice = owed_notices(sqlite_url, start=just_now())[0].id
    db = sqlite_url.removeprefix("sqlite:///")
    result = _run_host(
        relay_environ(sqlite_url, pickup, "Function"),
        [
            {"db": db, "sql": 'ALTER TABLE "SubscriberNotices" RENAME TO "Away"'},
            {"past_due": False},
            {"db": db, "sql": 'ALTER TABLE "Away" RENAME TO "SubscriberNotices"'},
            {"past_due": False},
        ],
    )
    failed, recovered = result["steps"]
    errors = [r for r in failed["records"] if r["level"] == "ERROR"]
    assert errors, failed["records"]
    # By exception type only (ADR-0048 D4): no traceback, no driver message, no path.
    assert all("OperationalError" in r["message"] and not r["exc"] for r in errors)
    assert all(str(pickup) not in r["message"] and db not in r["message"] for r in errors)
    assert failed["files"] == []
    assert recovered["files"] == [f"{notice}.eml"]
    assert notice_row(sqlite_url, notice).DeliveredAt is not None
    assert uuid.UUID(recovered["files"][0].removesuffix(".eml")) == notice
