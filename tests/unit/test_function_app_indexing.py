"""DESIGN §2: importing function_app.py opens nothing, and the host's indexing sees every
Function (issue 2, acceptance 2)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from api_funcs.functions import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def indexed() -> dict[str, Any]:
    """What the host's indexing reads, from a fresh interpreter: get_functions() may run once per
    process (FACTS), and socket.connect is watched from before the import."""
    port = _closed_port()
    code = textwrap.dedent(
        f"""
        import json, os, socket
        os.environ["Database__Url"] = "postgresql+psycopg://nobody@127.0.0.1:{port}/nothing"
        attempts = []
        real = socket.socket.connect
        def watch(self, address):
            attempts.append(repr(address))
            return real(self, address)
        socket.socket.connect = watch
        import function_app
        fns = {{f.get_function_name(): json.loads(f.get_function_json())
               for f in function_app.app.get_functions()}}
        print(json.dumps({{"attempts": attempts, "functions": fns}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    )
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
    assert set(http) == {op.name for op in OPERATIONS}
    for op in OPERATIONS:
        trigger = http[op.name]
        assert trigger["route"] == op.route
        assert sorted(trigger["methods"]) == sorted(op.methods)
        assert trigger["authLevel"] == op.auth_level.name
        # DESIGN §5: every /api operation but health carries authLevel function on Azure.
        expected = "ANONYMOUS" if op.name == "health" else "FUNCTION"
        assert trigger["authLevel"] == expected, op.name
