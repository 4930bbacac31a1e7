"""ADR-0051: the metadata the Functions host reads, through the library's own
indexing (`app.get_functions()`): the timer on `%Notices__Schedule%` with `useMonitor`, every
HTTP Function's route, and unique function names.

`get_functions()` may be called once per process, so it runs once, in a fresh
interpreter, for the whole session.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from api_funcs.functions import OPERATIONS, PAGES
from tests.support.checkout import run_python
from tests.support.hosts import CHAIN_KEY, CONTACT

_INDEX = textwrap.dedent(
    """
    import json
    import function_app
    print(json.dumps([
        {"name": f.get_function_name(), "json": json.loads(f.get_function_json())}
        for f in function_app.app.get_functions()
    ]))
    """
)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    # The Functions host refuses to start without a database URL; nothing connects to it.
    settings = {
        "Database__Url": f"sqlite:///{tmp_path_factory.mktemp('idx') / 'never-opened.db'}",
        "Audit__ChainKey": CHAIN_KEY,
    }
    out = run_python("-c", _INDEX, settings=settings, check=True)
    result: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_the_relay_timer_runs_on_the_schedule_setting_with_the_monitor_on(
    indexed: list[dict[str, Any]],
) -> None:
    (relay,) = [f for f in indexed if f["name"] == "notice_relay"]
    (binding,) = relay["json"]["bindings"]
    assert binding == {
        "direction": "IN",
        "type": "timerTrigger",
        "name": "timer",
        "schedule": "%Notices__Schedule%",
        "useMonitor": True,
    }


def test_every_http_function_is_indexed_with_its_route_and_methods(
    indexed: list[dict[str, Any]],
) -> None:
    http: dict[str, dict[str, Any]] = {}
    for f in indexed:
        for b in f["json"]["bindings"]:
            if b["type"] == "httpTrigger":
                http[f["name"]] = b
    assert set(http) == {op.name for op in (*OPERATIONS, *PAGES)}
    for op in (*OPERATIONS, *PAGES):
        assert http[op.name]["route"] == op.route
        assert http[op.name]["methods"] == list(op.methods)


def test_function_names_are_unique_and_the_timer_is_the_only_other_function(
    indexed: list[dict[str, Any]],
) -> None:
    names = [f["name"] for f in indexed]
    assert len(names) == len(set(names))
    assert set(names) == {op.name for op in (*OPERATIONS, *PAGES)} | {"notice_relay"}


_START_NAMED = textwrap.dedent(
    """
    import json, logging
    from sqlalchemy import Engine, event
    logging.basicConfig(level=logging.INFO)
    attempts = []
    event.listen(Engine, "do_connect", lambda *a: attempts.append("connect"))
    import function_app
    print(json.dumps({"attempts": attempts, "delivers": function_app.host.relay.delivers}))
    """
)


def test_importing_function_app_named_as_the_runner_opens_no_database_connection(
    tmp_path: Path,
) -> None:
    # The host's start validates and announces, but the engine waits for the first
    # tick. SQLAlchemy's hook sees every attempt (psycopg connects through libpq, not Python).
    pickup = tmp_path / "pickup"
    pickup.mkdir()
    settings = {
        "Database__Url": "postgresql+psycopg://nobody@127.0.0.1:9/nothing",
        "Audit__ChainKey": CHAIN_KEY,
        "Notices__Runner": "Function",
        "Notices__PickupDirectory": str(pickup),
        "Notices__Contact": CONTACT,
    }
    out = run_python("-c", _START_NAMED, settings=settings, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"attempts": [], "delivers": True}
    assert "Notice relay: live as function/" in out.stderr
