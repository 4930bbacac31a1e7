"""Idempotency keys on every money operation (ADR-0009, docs/http.md): a success stored with the
money and replayed byte-for-byte; a refusal never stored, never replayed; a key reused with another
body refused; a duplicate in flight waited for, then replayed (or, past the lock timeout, answered
409); a key never stranded by an attempt that died."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from shared.db.engine import get_engine
from shared.db.schema import Account, IdempotencyRecord, IdempotencyState, Transaction
from shared.db.uow import unit_of_work
from shared.money.applock_sql import take_daily_limit_lock
from shared.money.idempotency import HeldKey, claim_key, request_hash
from tests.support.money import (
    DEPOSIT,
    INTERNAL,
    TRANSFER,
    WITHDRAWAL,
    Bank,
    keyed,
    open_bank,
    unique_key,
)
from tests.support.users import User

pytestmark = pytest.mark.adr("0009")


def _ledger_rows(db_url: str, account_id: object) -> int:
    with unit_of_work(get_engine(db_url)) as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(Transaction)
                .where(Transaction.AccountId == account_id)
            )
            or 0
        )


def _balance(db_url: str, account_id: object) -> Decimal:
    with unit_of_work(get_engine(db_url)) as session:
        return session.get_one(Account, account_id).Balance


def _records(db_url: str, user_id: str) -> list[IdempotencyRecord]:
    with unit_of_work(get_engine(db_url)) as session:
        return list(
            session.scalars(select(IdempotencyRecord).where(IdempotencyRecord.UserId == user_id))
        )


# One request per money operation: (path, body) for a customer with two funded accounts.
def _operations(bank: Bank, alice: User, bob: User) -> dict[str, tuple[str, Any]]:
    auth = bank.authorize(alice, 10, bob)
    return {
        "transfer": (
            TRANSFER,
            {
                "accountId": str(alice.primary),
                "recipientAzureTag": bob.tag,
                "amount": 10,
                "authorizationId": auth,
            },
        ),
        "internal_transfer": (
            INTERNAL,
            {
                "fromAccountId": str(alice.account_ids[0]),
                "toAccountId": str(alice.account_ids[1]),
                "amount": 10,
            },
        ),
        "deposit": (DEPOSIT, {"accountId": str(alice.primary), "amount": 10}),
        "withdrawal": (WITHDRAWAL, {"accountId": str(alice.primary), "amount": 10}),
    }


@pytest.mark.parametrize("operation", ["transfer", "internal_transfer", "deposit", "withdrawal"])
def test_a_success_is_replayed_byte_for_byte_with_idempotency_replayed_and_moves_money_once(
    db_url: str, operation: str
) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=100, accounts=2), bank.customer()
        path, body = _operations(bank, alice, bob)[operation]
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        first = bank.client.post(path, json=body, headers=headers)
        assert first.status_code == 201, first.text
        balance, rows = _balance(db_url, alice.primary), _ledger_rows(db_url, alice.primary)
        bank.clock.advance(60)  # a replay is the first answer, not a new one
        second = bank.client.post(path, json=body, headers=headers)
        assert second.status_code == 201
        assert second.content == first.content
        assert second.headers["Idempotency-Replayed"] == "true"
        assert "idempotency-replayed" not in first.headers
        assert (_balance(db_url, alice.primary), _ledger_rows(db_url, alice.primary)) == (
            balance,
            rows,
        )


def test_the_same_amount_spelled_100_or_100_00_is_the_same_request(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=0)
        key = unique_key()
        headers = {**bank.headers(alice), "Idempotency-Key": key}
        first = bank.client.post(
            DEPOSIT,
            content=f'{{"accountId":"{alice.primary}","amount":100}}',
            headers={**headers, "content-type": "application/json"},
        )
        again = bank.client.post(
            DEPOSIT,
            content=f'{{"accountId":"{alice.primary}","amount":100.00}}',
            headers={**headers, "content-type": "application/json"},
        )
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.headers["Idempotency-Replayed"] == "true"
        assert _balance(db_url, alice.primary) == 100


@pytest.mark.adr("0050", "A3.4", "D7")
def test_a_refusal_is_never_stored_and_the_same_key_is_evaluated_afresh(db_url: str) -> None:
    """ADR-0009, ADR-0050 A3.4 / D7: refusals are not replayed. Here the second try succeeds
    because the world changed in between (funds arrived)."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=50), bank.customer()
        auth = bank.authorize(alice, 80, bob)
        key = unique_key()
        refused = bank.transfer(alice, 80, bob, auth, key=key)
        assert (refused.status_code, refused.json()["errorCode"]) == (422, "INSUFFICIENT_FUNDS")
        assert _records(db_url, alice.user_id) == []
        assert bank.rail(DEPOSIT, alice, {"accountId": str(alice.primary), "amount": 30})
        retried = bank.transfer(alice, 80, bob, auth, key=key)
        assert retried.status_code == 201, retried.text
        assert "idempotency-replayed" not in retried.headers


def test_the_same_key_with_another_body_is_422_idempotency_key_reused(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=100)
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        ok = bank.client.post(
            DEPOSIT, json={"accountId": str(alice.primary), "amount": 10}, headers=headers
        )
        reused = bank.client.post(
            DEPOSIT, json={"accountId": str(alice.primary), "amount": 11}, headers=headers
        )
        assert ok.status_code == 201
        assert (reused.status_code, reused.json()["errorCode"]) == (422, "IDEMPOTENCY_KEY_REUSED")
        assert _balance(db_url, alice.primary) == 110


def test_a_transfer_without_its_authorization_under_a_used_key_is_422_key_reused(
    db_url: str,
) -> None:
    # The key answers before the missing authorization does: the stored request is another body.
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        key = unique_key()
        spent = bank.transfer(alice, 10, bob, bank.authorize(alice, 10, bob), key=key)
        assert spent.status_code == 201, spent.text
        again = bank.transfer(alice, 10, bob, None, key=key)
        assert (again.status_code, again.json()["errorCode"]) == (422, "IDEMPOTENCY_KEY_REUSED")
        assert _balance(db_url, alice.primary) == 90


def test_a_completed_key_records_the_instant_its_success_was_stored(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        authorization = bank.authorize(alice, 10, bob)
        bank.clock.advance(5)
        assert bank.transfer(alice, 10, bob, authorization).status_code == 201
        (record,) = _records(db_url, alice.user_id)
        assert (record.State, record.CompletedAt) == (IdempotencyState.COMPLETED, bank.clock.now())


@pytest.mark.parametrize("path", [DEPOSIT, WITHDRAWAL])
def test_a_completed_deposit_or_withdrawal_key_records_the_instant_its_success_was_stored(
    db_url: str, path: str
) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=100)
        bank.clock.advance(5)
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        body = {"accountId": str(alice.primary), "amount": 10}
        assert bank.client.post(path, json=body, headers=headers).status_code == 201
        (record,) = _records(db_url, alice.user_id)
        assert (record.State, record.CompletedAt) == (IdempotencyState.COMPLETED, bank.clock.now())


def test_keys_are_scoped_to_the_user_and_the_operation(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer(balance=100)
        key = unique_key()

        def post(path: str, who: User) -> int:
            response = bank.client.post(
                path,
                json={"accountId": str(who.primary), "amount": 10},
                headers={**bank.headers(who), "Idempotency-Key": key},
            )
            return response.status_code

        assert [post(DEPOSIT, alice), post(WITHDRAWAL, alice), post(DEPOSIT, bob)] == [201] * 3
        assert _balance(db_url, alice.primary) == 100  # +10 −10, neither a replay
        assert _balance(db_url, bob.primary) == 110


@pytest.mark.parametrize("path", [TRANSFER, INTERNAL, DEPOSIT, WITHDRAWAL])
def test_money_operations_require_the_header(db_url: str, path: str) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=100, accounts=2)
        body = {
            "accountId": str(alice.primary),
            "fromAccountId": str(alice.account_ids[0]),
            "toAccountId": str(alice.account_ids[1]),
            "recipientAzureTag": "x",
            "amount": 1,
        }
        missing = bank.client.post(path, json=body, headers=bank.headers(alice))
        blank = bank.client.post(
            path, json=body, headers={**bank.headers(alice), "Idempotency-Key": "  "}
        )
        too_long = bank.client.post(
            path, json=body, headers={**bank.headers(alice), "Idempotency-Key": "k" * 256}
        )
    assert (missing.status_code, missing.json()["errorCode"]) == (400, "IDEMPOTENCY_KEY_REQUIRED")
    assert blank.json()["errorCode"] == "IDEMPOTENCY_KEY_REQUIRED"
    assert (too_long.status_code, too_long.json()["errors"][0]["field"]) == (
        400,
        "Idempotency-Key",
    )


@pytest.mark.parametrize("path", [TRANSFER, INTERNAL, DEPOSIT, WITHDRAWAL])
def test_a_bad_idempotency_key_header_is_400_naming_the_header_not_the_body(
    db_url: str, path: str
) -> None:
    """A key over 255 characters, or the header sent twice (which key would the request be
    remembered by?), is 400 VALIDATION_FAILED naming `Idempotency-Key`, titled as a header's
    fault, not the body's; nothing moves."""
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=100, accounts=2)
        body = {
            "accountId": str(alice.primary),
            "fromAccountId": str(alice.account_ids[0]),
            "toAccountId": str(alice.account_ids[1]),
            "recipientAzureTag": "x",
            "amount": 1,
        }
        auth = list(bank.headers(alice).items())
        too_long = bank.client.post(
            path, json=body, headers=[*auth, ("Idempotency-Key", "k" * 256)]
        )
        twice = bank.client.post(
            path,
            json=body,
            headers=[*auth, ("Idempotency-Key", unique_key()), ("Idempotency-Key", unique_key())],
        )
        same_twice = bank.client.post(
            path, json=body, headers=[*auth, ("Idempotency-Key", "k1"), ("Idempotency-Key", "k1")]
        )
    for response, message in (
        (twice, "must be sent once"),
        (same_twice, "must be sent once"),
        (too_long, "at most 255 characters"),
    ):
        assert response.status_code == 400, response.text
        problem = response.json()
        assert problem["errorCode"] == "VALIDATION_FAILED"
        assert problem["title"] == "The Idempotency-Key header is not valid."
        assert problem["errors"] == [{"field": "Idempotency-Key", "message": message}]
    assert _balance(db_url, alice.primary) == 100


def test_a_marker_left_committed_by_the_protocol_before_is_abandoned_and_the_retry_goes_through(
    db_url: str,
) -> None:
    """The code before the key was claimed in the money's transaction committed an InProgress
    marker first and completed it with the money; one left behind (its process died, its release
    failed) never had money. It is no record: the retry with its key goes through at once (not
    after five minutes), moves the money once, and is then replayed. Another key's marker is
    left alone: it is that key's retry which takes its place."""
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=0)
        key = unique_key()
        body = {"accountId": str(alice.primary), "amount": 10}
        canonical = {"accountId": str(alice.primary), "amount": "10.00"}
        with unit_of_work(get_engine(db_url)) as session:
            for marked in (key, unique_key()):
                session.add(
                    IdempotencyRecord(
                        UserId=alice.user_id,
                        Operation="deposit",
                        Key=marked,
                        RequestHash=request_hash("deposit", canonical),
                        State=IdempotencyState.IN_PROGRESS.value,
                        CreatedAt=bank.clock.now(),
                    )
                )
            session.commit()
        headers = {**bank.headers(alice), "Idempotency-Key": key}
        retried = bank.client.post(DEPOSIT, json=body, headers=headers)
        assert retried.status_code == 201, retried.text
        assert "idempotency-replayed" not in retried.headers
        again = bank.client.post(DEPOSIT, json=body, headers=headers)
        assert again.headers["Idempotency-Replayed"] == "true"
        assert again.content == retried.content
        assert _balance(db_url, alice.primary) == 10
        states = sorted(r.State for r in _records(db_url, alice.user_id))
        assert states == ["Completed", "InProgress"]


def _blocked(url: str) -> int:
    """How many sessions wait on a lock another holds (a claim on an uncommitted key row, a
    transfer on the application lock)."""
    engine = get_engine(url)
    sql = {
        # This test's database only: the server may serve other suites at the same time.
        "postgresql": "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE NOT l.granted AND a.datname = current_database()",
        "mssql": "SELECT count(*) FROM sys.dm_exec_requests WHERE blocking_session_id <> 0",
    }[engine.dialect.name]
    with unit_of_work(engine) as session:
        return int(session.scalar(text(sql)) or 0)


@pytest.mark.postgres
def test_a_duplicate_waits_the_lock_timeout_for_an_attempt_in_flight_then_answers_409(
    fresh_postgres_url: str,
) -> None:
    """An attempt in flight is a money transaction that claimed the key and has not ended (here
    a connection of the test's own, claiming as the money path claims). A duplicate waits for it
    at most Database__LockTimeoutSeconds (1 here), then answers 409 IDEMPOTENCY_IN_PROGRESS
    with Retry-After: 1 — only then. Once that transaction rolls back (its request refused, or
    its process dead) the next try goes through at once; the 409 was never stored."""
    url = fresh_postgres_url
    with open_bank(url, Database__LockTimeoutSeconds="1") as bank:
        alice = bank.customer(balance=0)
        key = unique_key()
        body = {"accountId": str(alice.primary), "amount": 10}
        canonical = {"accountId": str(alice.primary), "amount": "10.00"}
        in_flight = Session(get_engine(url))
        try:
            held = claim_key(
                in_flight,
                keyed(alice.user_id, "deposit", key=key, canonical=canonical),
                bank.clock.now(),
            )
            assert isinstance(held, HeldKey)
            started = time.monotonic()
            busy = bank.client.post(
                DEPOSIT, json=body, headers={**bank.headers(alice), "Idempotency-Key": key}
            )
            waited = time.monotonic() - started
        finally:
            in_flight.rollback()
            in_flight.close()
        assert (busy.status_code, busy.json()["errorCode"]) == (409, "IDEMPOTENCY_IN_PROGRESS")
        assert busy.headers["Retry-After"] == "1"
        assert 0.9 <= waited < 10, waited
        done = bank.client.post(
            DEPOSIT, json=body, headers={**bank.headers(alice), "Idempotency-Key": key}
        )
        assert done.status_code == 201, done.text
        assert "idempotency-replayed" not in done.headers
        assert _balance(url, alice.primary) == 10


def test_a_concurrent_duplicate_of_a_transfer_in_flight_waits_for_it_and_replays_it(
    server_url: str,
) -> None:
    """Real overlap on a server (PostgreSQL, SQL Server): the first request claims the key and
    parks on the application lock (held by another connection); the duplicate waits on the
    first's uncommitted key row; when the lock is released the first completes and the
    duplicate answers its replay, byte for byte. The money moves once."""
    url = server_url
    # Waits long enough that a loaded machine's slow start of the second request cannot run
    # either bound out before the lock is released (the bounds have tests of their own).
    waits = {
        "DailyLimit__LockTimeoutSeconds": "29",
        "Database__LockTimeoutSeconds": "29",
        "Database__StatementTimeoutSeconds": "60",
    }
    with open_bank(url, **waits) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        auth = bank.authorize(alice, 10, bob)
        key = unique_key()
        release, _ = _hold_lock(url, alice.user_id)
        results: dict[str, Any] = {}
        threads: list[threading.Thread] = []

        def send(name: str) -> None:
            thread = threading.Thread(
                target=lambda: results.update({name: bank.transfer(alice, 10, bob, auth, key=key)})
            )
            thread.start()
            threads.append(thread)

        try:
            send("first")
            _wait_until(lambda: _blocked(url) == 1, "the first to park on the lock")
            send("duplicate")
            _wait_until(lambda: _blocked(url) == 2, "the duplicate to wait on the key")
            assert results == {}
        finally:
            release()
            # Joined before the app's client closes, whatever failed above.
            for thread in threads:
                thread.join(timeout=60)
        assert results["first"].status_code == 201, results["first"].text
        assert "idempotency-replayed" not in results["first"].headers
        assert results["duplicate"].status_code == 201, results["duplicate"].text
        assert results["duplicate"].headers["Idempotency-Replayed"] == "true"
        assert results["duplicate"].content == results["first"].content
        assert _balance(url, alice.primary) == 90
        assert _ledger_rows(url, alice.primary) == 1


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _hold_lock(url: str, user_id: str) -> tuple[Callable[[], None], Any]:
    """The user's daily-limit lock, taken as a transfer takes it, held until released."""
    holder = Session(get_engine(url))
    take_daily_limit_lock(holder, user_id, 30)

    def release() -> None:
        holder.rollback()
        holder.close()

    return release, holder
