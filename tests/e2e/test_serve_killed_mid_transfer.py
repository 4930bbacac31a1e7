"""A transfer whose `azurebank serve` is SIGKILLed between the key's claim and the commit: the
retry with the same Idempotency-Key, on the next server, gets its definitive answer within 2 s
of that server answering — the transfer done once, under the authorization minted before the
crash — and a further retry replays it byte for byte.

The first attempt is parked inside its money transaction by the customer's daily-limit lock,
held from a connection of the test's own, and the server is killed there. The lock stays held
while the retry runs: the dead attempt's PostgreSQL backend is still waiting on it, and the key
must be free anyway (its transaction ends with its client), so the retry reaches the same lock
and is released there."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.hosts import SIGNING_KEY
from tests.support.served import clean_environ, served, wait_for
from tests.support.served_money import (
    DailyLimitLockHeld,
    advisory_lock_waiters,
    authorize,
    backend_alive,
    balance,
    customer,
    ledger_rows,
    post_transfer,
    transfer_body,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

BOUND = 2.0  # seconds from a live server answering to the retry's definitive answer


def test_a_transfer_killed_mid_transaction_is_done_once_by_the_retry_within_two_seconds(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    url = fresh_postgres_url
    env = clean_environ(url, Auth__SigningKey=SIGNING_KEY)
    alice, bob = customer(url, balance=100), customer(url, pin=False)
    key = uuid.uuid4().hex
    answers: dict[str, Any] = {}

    def send(name: str, base_url: str) -> None:
        try:
            answers[name] = post_transfer(base_url, alice, body, key)
        except httpx.TransportError as exc:  # the server died under it
            answers[name] = exc

    with DailyLimitLockHeld(url, alice.user.user_id) as lock:
        with served(env, tmp_path / "killed.log") as doomed:
            body = transfer_body(alice, bob, 10, authorize(doomed.base_url, alice, bob, 10))
            first = threading.Thread(target=send, args=("first", doomed.base_url))
            first.start()
            wait_for(lambda: bool(advisory_lock_waiters(url)), "the transfer to park on the lock")
            (parked,) = advisory_lock_waiters(url)
            doomed.process.send_signal(signal.SIGKILL)
            doomed.process.wait(timeout=30)
            first.join(timeout=30)
        assert isinstance(answers["first"], httpx.TransportError), answers["first"]
        with served(env, tmp_path / "next.log") as live:
            answering = time.monotonic()
            retry = threading.Thread(target=send, args=("retry", live.base_url))
            retry.start()

            def decided_or_past_the_key() -> bool:
                # Past the key: the retry waits on the lock the test holds, and the dead
                # attempt's backend is gone.
                waiting = advisory_lock_waiters(url)
                past = bool(waiting) and parked not in waiting and not backend_alive(url, parked)
                return "retry" in answers or past

            wait_for(decided_or_past_the_key, "the retry to answer or reach the lock", BOUND * 5)
            lock.release()
            retry.join(timeout=30)
            answered = time.monotonic() - answering
            done = answers["retry"]
            assert not isinstance(done, Exception), done
            assert done.status_code == 201, done.text
            assert "idempotency-replayed" not in done.headers
            assert answered < BOUND, (
                f"the retry answered {answered:.2f} s after the server was live"
            )
            print(f"the retry answered {answered:.2f} s after the next server was live")
            again = post_transfer(live.base_url, alice, body, key)
    assert (again.status_code, again.headers.get("idempotency-replayed")) == (201, "true")
    assert again.content == done.content
    assert balance(url, alice.user.primary) == Decimal("90.0000")
    assert ledger_rows(url, alice.user.primary) == 1
