"""A connection lost during COMMIT leaves the money's outcome unknown to the app; the key's claim
finds it out (shared/money/idempotency.py). Here the server ends the session in the middle of the
commit, so the transaction did NOT commit: the app, asking the key again on a fresh connection,
finds it free, moves the money in that run and answers 201 — once, never twice, and never a 503
that guesses. The commit that landed, its reply lost (the suite's fault proxy drops it), answers
its own first answer, in process here as through the served app in
tests/e2e/test_serve_commit_reply_lost.py.

The commit is made slow on purpose, and real: a deferred constraint trigger on the key's record
sleeps at COMMIT, and the test terminates the backend while it sleeps there."""

from __future__ import annotations

import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import func, select, text

from shared.db.engine import get_engine
from shared.db.schema import Account, Transaction
from shared.db.uow import unit_of_work
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.money import WITHDRAWAL, open_bank, unique_key

pytestmark = pytest.mark.postgres

_SLOW_COMMITS = [
    """CREATE FUNCTION test_sleep_at_commit() RETURNS trigger LANGUAGE plpgsql AS
       $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$""",
    """CREATE CONSTRAINT TRIGGER test_sleep_at_commit AFTER UPDATE ON "IdempotencyRecords"
       DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_sleep_at_commit()""",
]


def _committing(url: str) -> int | None:
    """The backend sleeping inside a COMMIT, if one is."""
    with unit_of_work(get_engine(url)) as session:
        pid = session.scalar(
            text(
                "SELECT pid FROM pg_stat_activity "
                "WHERE query = 'COMMIT' AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()"
            )
        )
    return None if pid is None else int(pid)


def test_a_commit_the_server_aborted_under_a_lost_connection_is_done_once_by_the_next_run(
    fresh_postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = fresh_postgres_url
    caplog.set_level("WARNING", logger="azurebank.money")
    with open_bank(url) as bank:
        alice = bank.customer(balance=100, pin=None)
        with unit_of_work(get_engine(url)) as session:
            for statement in _SLOW_COMMITS:
                session.execute(text(statement))
            session.commit()
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        body = {"accountId": str(alice.primary), "amount": 30}
        answers: dict[str, Any] = {}
        request = threading.Thread(
            target=lambda: answers.update(
                first=bank.client.post(WITHDRAWAL, json=body, headers=headers)
            )
        )
        request.start()
        deadline = time.monotonic() + 30
        while (pid := _committing(url)) is None:
            assert time.monotonic() < deadline and request.is_alive(), answers
            time.sleep(0.02)
        with unit_of_work(get_engine(url)) as session:
            assert session.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        request.join(timeout=60)
        first = answers["first"]
        again = bank.client.post(WITHDRAWAL, json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert "idempotency-replayed" not in first.headers
    assert "withdrawal: the connection was lost during COMMIT; asking the key" in caplog.messages
    assert (again.status_code, again.headers.get("idempotency-replayed")) == (201, "true")
    assert again.content == first.content
    with unit_of_work(get_engine(url)) as session:
        assert session.get_one(Account, alice.primary).Balance == Decimal("70.0000")
        ledger = select(func.count()).where(Transaction.AccountId == alice.primary)
        assert session.scalar(ledger) == 1


def test_a_commit_that_landed_with_its_reply_lost_answers_its_own_first_answer_not_a_replay(
    fresh_postgres_url: str,
) -> None:
    # The suite's fault proxy drops the reply to the transfer's COMMIT, which the server made:
    # the app asks the key, finds its own answer stored, and answers it as the first answer.
    with (
        FaultProxy.in_front_of(fresh_postgres_url) as proxy,
        open_bank(proxy.url(fresh_postgres_url)) as bank,
    ):
        alice, bob = bank.customer(balance=100), bank.customer()
        authorization = bank.authorize(alice, 30, bob)
        proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
        first = bank.transfer(alice, 30, bob, authorization)
        assert proxy.count("commit_cut") == 1
    assert first.status_code == 201, first.text
    assert "idempotency-replayed" not in first.headers
    with unit_of_work(get_engine(fresh_postgres_url)) as session:
        assert session.get_one(Account, alice.primary).Balance == Decimal("70.0000")
