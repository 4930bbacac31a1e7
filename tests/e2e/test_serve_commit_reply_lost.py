"""A money operation whose COMMIT reached PostgreSQL and committed, but whose reply never reached
`azurebank serve` (the suite's fault proxy between them cuts both sides right after the server
answered the COMMIT). The app cannot know from the error whether the money moved; it must not
say "nothing changed". It asks the key again on a fresh connection: the record committed, so it
answers the success it stored (its own, not marked a replay). When even that cannot reach the
database, it answers 503 OUTCOME_UNKNOWN, which says so; the retry with the same key then
replays. Either way the money moved exactly once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.hosts import SIGNING_KEY
from tests.support.money import WITHDRAWAL
from tests.support.served import clean_environ, served
from tests.support.served_money import (
    authorize,
    balance,
    customer,
    ledger_rows,
    post_transfer,
    records,
    transfer_body,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


class _ThenUnreachable(FaultProxy):
    """COMMIT_REPLY_LOST, and the moment the reply is dropped every connection is reset and
    every new one refused: the app cannot ask the database what became of its commit."""

    def _commit_cut(self) -> None:
        super()._commit_cut()
        # Switched from another thread: set_mode waits for the open relays, this one among them.
        threading.Thread(target=self.set_mode, args=(Mode.RESET,), daemon=True).start()


@pytest.fixture
def upstream(fresh_postgres_url: str) -> tuple[str, int]:
    parsed = make_url(fresh_postgres_url)
    return parsed.host or "127.0.0.1", parsed.port or 5432


@pytest.fixture
def proxy(upstream: tuple[str, int]) -> Iterator[FaultProxy]:
    with FaultProxy(upstream) as running:
        yield running


def test_a_transfer_whose_commit_reply_is_lost_answers_its_success_and_the_retry_replays_it(
    fresh_postgres_url: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    url = fresh_postgres_url
    env = clean_environ(proxy.url(url), Auth__SigningKey=SIGNING_KEY)
    alice, bob = customer(url, balance=100), customer(url, pin=False)
    key = uuid.uuid4().hex
    with served(env, tmp_path / "serve.log") as server:
        body = transfer_body(alice, bob, 10, authorize(server.base_url, alice, bob, 10))
        proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
        first = post_transfer(server.base_url, alice, body, key)
        assert proxy.count("commit_cut") == 1, "the proxy never cut a COMMIT"
        again = post_transfer(server.base_url, alice, body, key)
    assert first.status_code == 201, first.text
    assert "idempotency-replayed" not in first.headers
    assert (again.status_code, again.headers.get("idempotency-replayed")) == (201, "true")
    assert again.content == first.content
    assert balance(url, alice.user.primary) == Decimal("90.0000")
    assert ledger_rows(url, alice.user.primary) == 1
    assert "transfer: the connection was lost during COMMIT; asking the key" in server.output()


def test_a_lost_commit_the_app_cannot_ask_about_is_503_outcome_unknown_and_the_retry_resolves_it(
    fresh_postgres_url: str, upstream: tuple[str, int], tmp_path: Path
) -> None:
    url = fresh_postgres_url
    alice = customer(url, balance=100, pin=False)
    key = uuid.uuid4().hex
    withdrawal = {"accountId": str(alice.user.primary), "amount": 30}
    with _ThenUnreachable(upstream) as proxy:
        env = clean_environ(proxy.url(url), Auth__SigningKey=SIGNING_KEY)
        with served(env, tmp_path / "serve.log") as server:
            proxy.set_mode(Mode.COMMIT_REPLY_LOST)
            unknown = httpx.post(
                f"{server.base_url}{WITHDRAWAL}",
                json=withdrawal,
                headers=alice.keyed(key),
                timeout=60,
            )
            assert proxy.count("commit_cut") == 1, "the proxy never cut a COMMIT"
            proxy.set_mode(Mode.PASS)
            retried = httpx.post(
                f"{server.base_url}{WITHDRAWAL}",
                json=withdrawal,
                headers=alice.keyed(key),
                timeout=60,
            )
    assert unknown.status_code == 503, unknown.text
    problem = unknown.json()
    assert problem["errorCode"] == "OUTCOME_UNKNOWN"
    assert "not known" in problem["title"] and "same Idempotency-Key is safe" in problem["title"]
    assert "nothing" not in problem["title"].lower()
    assert int(unknown.headers["Retry-After"]) >= 1
    # The commit had landed: the retry replays it, and the money moved once.
    assert (retried.status_code, retried.headers.get("idempotency-replayed")) == (201, "true")
    assert retried.json()["balance"] == 70
    assert balance(url, alice.user.primary) == Decimal("70.0000")
    assert ledger_rows(url, alice.user.primary) == 1
    assert [(state, status) for _key, state, status in records(url, alice.user.user_id)] == [
        ("Completed", 201)
    ]
