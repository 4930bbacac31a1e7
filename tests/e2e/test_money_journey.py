"""A new customer's journey against a real `azurebank serve` process with the Api
runner: `users add` → `token` → enrol a PIN → its notice file appears in the pickup directory →
mint → transfer → the allowance shows the use. Everything goes through the command line and HTTP;
the code under test is this checkout's (cwd and PYTHONPATH are the repository root)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.hosts import CONTACT, SIGNING_KEY
from tests.support.leak_watch import LeakWatch
from tests.support.served import clean_environ, run_cli, served, wait_for

pytestmark = pytest.mark.e2e


def _environ(db_url: str, pickup: Path) -> dict[str, str]:
    return clean_environ(
        db_url,
        Auth__SigningKey=SIGNING_KEY,
        Notices__Runner="Api",
        Notices__PeriodSeconds="1",
        Notices__LeaseSeconds="3",
        Notices__PickupDirectory=str(pickup),
        Notices__Contact=CONTACT,
    )


def _cli(env: dict[str, str], *args: str) -> str:
    done = run_cli(env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_new_customer_enrols_a_pin_gets_the_notice_mints_transfers_and_sees_the_allowance(
    sqlite_url: str, tmp_path: Path, pickup: Path, leak_watch: LeakWatch
) -> None:
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

    with (
        served(env, tmp_path / "serve.log") as server,
        httpx.Client(base_url=server.base_url) as http,
    ):
        enrolled = http.post(
            "/api/pin", json={"password": password, "pin": "4821"}, headers=headers
        )
        assert enrolled.status_code == 201, enrolled.text
        wait_for(lambda: any(pickup.glob("*.eml")), "the PinEnrolled notice file")

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
    # ...and no log line of the server names the address (ADR-0017), nor any other secret.
    log = leak_watch.saw_text("serve output", server.output())
    leak_watch.secret("address", f"{tag}@example.test")
    leak_watch.secret("PIN", "4821")
    leak_watch.secret("password", password)
    leak_watch.secret("token", token)
    for response in (enrolled, minted, spent, allowance):
        leak_watch.saw(response)
    leak_watch.assert_clean()
    assert "Traceback" not in log
