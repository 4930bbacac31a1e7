"""`azurebank serve` over a database it cannot reach (PostgreSQL on a closed port): each request
that needs the database is 503 DATABASE_UNAVAILABLE with Retry-After, health stays 200, and the
server's own output holds no traceback, no SQL and no bound value (uvicorn prints an exception
that escapes the app whole)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from shared.clock import SystemClock
from shared.identity.tokens import issue_token
from shared.settings import load_settings
from tests.support.connections import unused_port
from tests.support.hosts import SIGNING_KEY
from tests.support.served import clean_environ, served


@pytest.mark.e2e
def test_serve_answers_503_database_unavailable_and_prints_no_traceback_or_sql(
    tmp_path: Path,
) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{unused_port()}/azurebank"
    env = clean_environ(url, Auth__SigningKey=SIGNING_KEY)
    user_id = f"outage-{uuid.uuid4().hex}"
    token = issue_token(load_settings({"Auth__SigningKey": SIGNING_KEY}), SystemClock(), user_id)
    with served(env, tmp_path / "serve.log") as server:
        health = server.health
        assert health is not None and health.status_code == 200, "serve never answered"
        base = server.base_url
        auth = {"Authorization": f"Bearer {token}"}
        accounts = httpx.get(f"{base}/api/accounts", headers=auth, timeout=30)
        deposit = httpx.post(
            f"{base}/api/transactions/deposit",
            json={"accountId": str(uuid.uuid4()), "amount": 5},
            headers={**auth, "Idempotency-Key": uuid.uuid4().hex},
            timeout=30,
        )
    for response in (accounts, deposit):
        assert response.status_code == 503, response.text
        assert response.json()["errorCode"] == "DATABASE_UNAVAILABLE"
        assert int(response.headers["Retry-After"]) >= 1
    output = server.output()
    assert server.returncode == 0, output
    assert "Database unavailable: OperationalError" in output
    for leak in ("Traceback", "Exception in ASGI application", "SELECT", "[SQL", user_id, token):
        assert leak not in output, leak
