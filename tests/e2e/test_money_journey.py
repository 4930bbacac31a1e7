"""Issue 6: a new customer's journey against a real `azurebank serve` process with the Api
runner: `users add` → `token` → enrol a PIN → its notice file appears in the pickup directory →
mint → transfer → the allowance shows the use. Everything goes through the command line and HTTP;
the code under test is this checkout's (cwd and PYTHONPATH are the repository root)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import CHAIN_KEY, SIGNING_KEY

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # a bound on a slow shared machine, not a speed claim
CLI = [sys.executable, "-m", "shared.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _environ(db_url: str, pickup: Path) -> dict[str, str]:
    sections = {"database", "notices", "noticesstorage", "dailylimit", "auth", "audit", "pin"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k.replace(":", "__").split("__")[0].lower() not in sections | {"transfers"}
    }
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "Database__Url": db_url,
            "Auth__SigningKey": SIGNING_KEY,
            "Audit__ChainKey": CHAIN_KEY,
            "Notices__Runner": "Api",
            "Notices__PeriodSeconds": "1",
            "Notices__LeaseSeconds": "3",
            "Notices__PickupDirectory": str(pickup),
            "Notices__Contact": "AzureBank support, +1 555 0100",
        }
    )
    return env


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [*CLI, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT:.0f}s waiting for {what}")
        time.sleep(0.2)


@contextmanager
def _serving(env: dict[str, str], log: Path) -> Iterator[str]:
    port = _free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*CLI, "serve", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return httpx.get(f"{base}/api/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return process.poll() is not None  # died: stop waiting, the assert below tells

    try:
        _wait_for(answers, "serve to answer")
        assert process.poll() is None, log.read_text()
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=WAIT)


def test_a_new_customer_enrols_a_pin_gets_the_notice_mints_transfers_and_sees_the_allowance(
    sqlite_url: str, tmp_path: Path
) -> None:
    pickup = tmp_path / "pickup"
    pickup.mkdir()
    env = _environ(sqlite_url, pickup)
    tag = f"journey-{uuid.uuid4().hex[:8]}"
    password = "a long journey password"
    alice = json.loads(
        _cli(
            env,
            "users",
            "add",
            "--email",
            f"{tag}@example.test",
            "--password",
            password,
            "--azure-tag",
            tag,
            "--balance",
            "1000",
        )
    )
    payee_tag = f"{tag}-payee"
    _cli(
        env,
        "users",
        "add",
        "--email",
        f"{payee_tag}@example.test",
        "--password",
        password,
        "--azure-tag",
        payee_tag,
    )
    token = _cli(env, "token", "--user", alice["userId"])
    headers = {"Authorization": f"Bearer {token}"}
    account = alice["accountIds"][0]

    with _serving(env, tmp_path / "serve.log") as base, httpx.Client(base_url=base) as http:
        enrolled = http.post(
            "/api/pin", json={"password": password, "pin": "4821"}, headers=headers
        )
        assert enrolled.status_code == 201, enrolled.text
        _wait_for(lambda: any(pickup.glob("*.eml")), "the PinEnrolled notice file")

        minted = http.post(
            "/api/transactions/transfer/authorizations",
            json={
                "accountId": account,
                "recipientAzureTag": payee_tag,
                "amount": 250.5,
                "pin": "4821",
            },
            headers=headers,
        )
        assert minted.status_code == 201, minted.text
        transfer: dict[str, Any] = {
            "accountId": account,
            "recipientAzureTag": payee_tag,
            "amount": 250.5,
            "authorizationId": minted.json()["authorizationId"],
        }
        spent = http.post(
            "/api/transactions/transfer",
            json=transfer,
            headers={**headers, "Idempotency-Key": uuid.uuid4().hex},
        )
        assert spent.status_code == 201, spent.text
        assert spent.json()["balance"] == 749.5
        allowance = http.get("/api/transactions/allowance", headers=headers)
        assert allowance.status_code == 200
        assert allowance.json()["used"] == 250.5
        assert allowance.json()["remaining"] == 4749.5

    (notice,) = list(pickup.glob("*.eml"))
    text = notice.read_text()
    assert f"{tag}@example.test" in text  # the notice is addressed to the customer...
    log = (tmp_path / "serve.log").read_text()
    assert f"{tag}@example.test" not in log  # ...and no log line names the address (ADR-0017)
    assert "4821" not in log and token not in log
    assert "Traceback" not in log
