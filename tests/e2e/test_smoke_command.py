"""`azurebank smoke` against a real `azurebank serve`: the same command that proves a deployed
instance proves a local one. It passes, step by step, against a healthy server; against a server
whose daily limit makes the mint answer 422 it fails naming that step, and the steps that needed
the mint are not run; against nothing listening it fails at the first step. The token, the PIN
and the function key it sends are never in what it prints."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from azurebank_cli import exits
from tests.support.connections import unused_port
from tests.support.hosts import SIGNING_KEY
from tests.support.leak_watch import LeakWatch, assert_no_secret_shapes
from tests.support.served import ServedProcess, clean_environ, run_cli, served

pytestmark = pytest.mark.e2e

PASSWORD = "a long smoke-test password"
PIN = "135790"
FUNCTION_KEY = "smoke-function-key-" + "f" * 24
STEPS = ["health", "ready", "openapi", "accounts", "pin", "mint", "transfer", "replay"]
STEPS += ["allowance", "limit"]


@dataclass(frozen=True)
class Payer:
    user_id: str
    payee: str


def _cli(env: dict[str, str], *args: str) -> str:
    done = run_cli(env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@contextmanager
def _instance(
    sqlite_url: str, tmp_path: Path, **settings: str
) -> Iterator[tuple[ServedProcess, Payer, dict[str, str]]]:
    """A served app with a payer holding 1000.00 and a PIN, and a payee."""
    env = clean_environ(sqlite_url, Auth__SigningKey=SIGNING_KEY, **settings)
    tag = f"smoke-{uuid.uuid4().hex[:8]}"
    payer = json.loads(
        _cli(
            env,
            "users",
            "add",
            "--email",
            f"{tag}@example.test",
            "--password",
            PASSWORD,
            "--azure-tag",
            tag,
            "--balance",
            "1000",
        )
    )
    _cli(
        env,
        "users",
        "add",
        "--email",
        f"{tag}-payee@example.test",
        "--password",
        PASSWORD,
        "--azure-tag",
        f"{tag}-payee",
    )
    token = _cli(env, "token", "--user", payer["userId"])
    with served(env, tmp_path / "serve.log") as server:
        enrolled = httpx.post(
            f"{server.base_url}/api/pin",
            json={"password": PASSWORD, "pin": PIN},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert enrolled.status_code == 201, enrolled.text
        yield server, Payer(payer["userId"], f"{tag}-payee"), env


def _smoke(env: dict[str, str], base_url: str, payer: Payer | None, *extra: str) -> tuple[int, str]:
    journey = ["--user", payer.user_id, "--payee", payer.payee] if payer else []
    done = run_cli(
        {**env, "AZUREBANK_PIN": PIN, "AZUREBANK_FUNCTION_KEY": FUNCTION_KEY},
        "smoke",
        "--base-url",
        base_url,
        "--timeout",
        "10",
        *journey,
        *extra,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


def _watched(leak_watch: LeakWatch, output: str) -> None:
    leak_watch.saw_text("smoke output", output)
    leak_watch.secret("PIN", PIN)
    leak_watch.secret("password", PASSWORD)
    leak_watch.secret("function key", FUNCTION_KEY)
    leak_watch.assert_clean()
    assert_no_secret_shapes("smoke output", output)  # a token, the suite's keys


def test_smoke_passes_every_step_against_a_healthy_instance(
    sqlite_url: str, tmp_path: Path, leak_watch: LeakWatch
) -> None:
    with _instance(sqlite_url, tmp_path) as (server, payer, env):
        code, output = _smoke(env, server.base_url + "/api/", payer)
        as_json = _smoke(env, server.base_url, payer, "--json")
    assert code == exits.OK, output
    lines = output.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [f"✓ {name}" for name in STEPS]
    assert "✓ mint: 201" in lines and "✓ limit: 422 DAILY_LIMIT_EXCEEDED" in lines
    assert lines[-1] == f"smoke: {len(STEPS)} of {len(STEPS)} steps held"
    report = json.loads(as_json[1].splitlines()[0])
    assert as_json[0] == exits.OK and report["ok"] is True
    assert [s["name"] for s in report["steps"]] == STEPS
    _watched(leak_watch, output + as_json[1])


def test_smoke_fails_naming_the_step_whose_answer_is_wrong(
    sqlite_url: str, tmp_path: Path, leak_watch: LeakWatch
) -> None:
    # A day's limit of 0.50: the 1.00 mint is refused before the PIN is checked.
    with _instance(sqlite_url, tmp_path, DailyLimit__Amount="0.50") as (server, payer, env):
        code, output = _smoke(env, server.base_url, payer)
    assert code == exits.FAILURE, output
    lines = output.splitlines()
    assert "✓ pin: 200" in lines
    assert "✗ mint: 422 DAILY_LIMIT_EXCEEDED (expected 201)" in lines
    for later in ("transfer", "replay", "allowance", "limit"):
        assert f"✗ {later}: not run: mint did not hold" in lines
    assert lines[-1] == (
        f"smoke: 5 of {len(STEPS)} steps held; failed: mint, transfer, replay, allowance, limit"
    )
    _watched(leak_watch, output)


def test_smoke_without_an_instance_fails_at_health(tmp_path: Path) -> None:
    env = clean_environ(f"sqlite:///{tmp_path}/unused.db")
    code, output = _smoke(env, f"http://127.0.0.1:{unused_port()}", None)
    assert code == exits.FAILURE
    assert output.splitlines()[0] == "✗ health: no answer (URLError) (expected 200)"
