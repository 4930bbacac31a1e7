"""Importing function_app.py opens nothing, and the host's indexing sees every
Function."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from api_funcs.functions import OPERATIONS, PAGES
from tests.support.checkout import run_python
from tests.support.connections import unused_port
from tests.support.hosts import CHAIN_KEY


@pytest.fixture(scope="module")
def indexed() -> dict[str, Any]:
    """What the host's indexing reads, from a fresh interpreter: get_functions() may run once per
    process; sockets and SQLAlchemy connections are watched from before the import."""
    port = unused_port()
    code = textwrap.dedent(
        """
        import json, socket
        attempts = []
        real = socket.socket.connect
        def watch(self, address):
            attempts.append(repr(address))
            return real(self, address)
        socket.socket.connect = watch
        # psycopg connects through libpq, which no Python socket sees: watch SQLAlchemy too.
        from sqlalchemy import event
        from sqlalchemy.engine import Engine
        event.listen(Engine, "engine_connect", lambda conn: attempts.append("engine_connect"))
        import function_app
        from shared.db import engine as engines
        attempts.extend(f"engine built for {u}" for u in engines._engines)
        fns = {f.get_function_name(): json.loads(f.get_function_json())
               for f in function_app.app.get_functions()}
        print(json.dumps({"attempts": attempts, "functions": fns}))
        """
    )
    settings = {
        "Database__Url": f"postgresql+psycopg://nobody@127.0.0.1:{port}/nothing",
        "Audit__ChainKey": CHAIN_KEY,
    }
    out = run_python("-c", code, settings=settings, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _http_trigger(function: dict[str, Any]) -> dict[str, Any] | None:
    return next((b for b in function["bindings"] if b["type"] == "httpTrigger"), None)


def test_importing_function_app_with_an_unreachable_database_connects_to_nothing(
    indexed: dict[str, Any],
) -> None:
    assert indexed["attempts"] == []


def test_health_is_an_anonymous_get_function_on_route_health(indexed: dict[str, Any]) -> None:
    trigger = _http_trigger(indexed["functions"]["health"])
    assert trigger is not None
    assert trigger["route"] == "health"
    assert trigger["authLevel"] == "ANONYMOUS"
    assert trigger["methods"] == ["GET"]


def test_every_operation_is_one_named_http_function_with_its_route_methods_and_auth_level(
    indexed: dict[str, Any],
) -> None:
    http = {
        name: trigger
        for name, fn in indexed["functions"].items()
        if (trigger := _http_trigger(fn)) is not None
    }
    assert set(http) == {op.name for op in (*OPERATIONS, *PAGES)}
    for op in (*OPERATIONS, *PAGES):
        trigger = http[op.name]
        assert trigger["route"] == op.route
        assert sorted(trigger["methods"]) == sorted(op.methods)
        assert trigger["authLevel"] == op.auth_level.name
        # Every /api operation but health and ready carries authLevel function; the
        # API page and its document are pages, anonymous (the app answers 404 while it is off).
        anonymous = {"health", "ready", *(page.name for page in PAGES)}
        expected = "ANONYMOUS" if op.name in anonymous else "FUNCTION"
        assert trigger["authLevel"] == expected, op.name


# The identity operations, `pin_enrol` and `pin_change` two Functions on one
# route told apart by method.
IDENTITY_OPERATIONS = {
    "accounts": ("accounts", ["GET"]),
    "pin_enrol": ("pin", ["POST"]),
    "pin_change": ("pin", ["PUT"]),
}


def test_the_host_indexes_pin_enrol_and_pin_change_as_two_functions_on_one_route(
    indexed: dict[str, Any],
) -> None:
    for name, (route, methods) in IDENTITY_OPERATIONS.items():
        trigger = _http_trigger(indexed["functions"][name])
        assert trigger is not None, name
        assert [trigger["route"], trigger["methods"], trigger["authLevel"]] == [
            route,
            methods,
            "FUNCTION",
        ]
