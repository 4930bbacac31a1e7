"""`azurebank serve` over a database it cannot reach (PostgreSQL on a closed port): each request
that needs the database is 503 DATABASE_UNAVAILABLE with Retry-After, health stays 200, and the
server's own output holds no traceback, no SQL and no bound value (uvicorn prints an exception
that escapes the app whole)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from shared.clock import SystemClock
from shared.identity.tokens import issue_token
from shared.settings import load_settings
from tests.e2e.test_serve_health import ROOT, _env, _free_port
from tests.support import SIGNING_KEY


@pytest.mark.e2e
def test_serve_answers_503_database_unavailable_and_prints_no_traceback_or_sql() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{_free_port()}/azurebank"
    env = {**_env(url), "Auth__SigningKey": SIGNING_KEY}
    user_id = f"outage-{uuid.uuid4().hex}"
    token = issue_token(load_settings({"Auth__SigningKey": SIGNING_KEY}), SystemClock(), user_id)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "shared.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                health = httpx.get(f"{base}/api/health", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert health is not None and health.status_code == 200, "serve never answered"
        auth = {"Authorization": f"Bearer {token}"}
        accounts = httpx.get(f"{base}/api/accounts", headers=auth, timeout=30)
        deposit = httpx.post(
            f"{base}/api/transactions/deposit",
            json={"accountId": str(uuid.uuid4()), "amount": 5},
            headers={**auth, "Idempotency-Key": uuid.uuid4().hex},
            timeout=30,
        )
    finally:
        server.send_signal(signal.SIGINT)
        try:
            output, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            output, _ = server.communicate()
    for response in (accounts, deposit):
        assert response.status_code == 503, response.text
        assert response.json()["errorCode"] == "DATABASE_UNAVAILABLE"
        assert int(response.headers["Retry-After"]) >= 1
    assert server.returncode == 0, output
    assert "Database unavailable: OperationalError" in output
    for leak in ("Traceback", "Exception in ASGI application", "SELECT", "[SQL", user_id, token):
        assert leak not in output, leak
