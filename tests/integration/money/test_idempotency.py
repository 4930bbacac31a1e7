"""Idempotency keys on every money operation (ADR-0009, docs/http.md): a success stored with the
money and replayed byte-for-byte; a refusal never stored, never replayed; a key reused with another
body refused; a duplicate in flight answered 409."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shared.audit.chain import AuditChain
from shared.db.engine import get_engine
from shared.db.schema import Account, IdempotencyRecord, Transaction
from shared.db.uow import unit_of_work
from shared.money.applock_sql import take_daily_limit_lock
from shared.money.idempotency import IdempotencyKeys, StoredResponse, SuccessRecord, request_hash
from shared.money.rails import AccountRails
from tests.support.hosts import CHAIN_KEY
from tests.support.money import DEPOSIT, INTERNAL, TRANSFER, WITHDRAWAL, Bank, open_bank, unique_key
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


def test_a_duplicate_in_flight_is_409_and_a_marker_abandoned_by_a_dead_process_is_taken_over(
    db_url: str,
) -> None:
    """The InProgress marker is committed before the money; a process that died holding it left
    no money behind (completion is atomic with the money), so after its time it is taken over."""
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=0)
        key = unique_key()
        body = {"accountId": str(alice.primary), "amount": 10}
        keys = IdempotencyKeys(get_engine(db_url), bank.clock, lock_timeout_seconds=10)
        canonical = {"accountId": str(alice.primary), "amount": "10.00"}
        keys.claim(alice.user_id, "deposit", key, request_hash("deposit", canonical))

        def post(payload: dict[str, Any]) -> Any:
            return bank.client.post(
                DEPOSIT, json=payload, headers={**bank.headers(alice), "Idempotency-Key": key}
            )

        busy = post(body)
        assert (busy.status_code, busy.json()["errorCode"]) == (409, "IDEMPOTENCY_IN_PROGRESS")
        assert busy.headers["Retry-After"] == "1"
        other = post({**body, "amount": 11})
        assert other.json()["errorCode"] == "IDEMPOTENCY_KEY_REUSED"
        bank.clock.advance(299)
        assert post(body).status_code == 409
        bank.clock.advance(1)
        taken_over = post(body)
        assert taken_over.status_code == 201, taken_over.text
        assert _balance(db_url, alice.primary) == 10
        assert post(body).headers["Idempotency-Replayed"] == "true"


def _hold_lock(url: str, user_id: str) -> tuple[Callable[[], None], Any]:
    """The user's daily-limit lock, taken as a transfer takes it, held until released."""
    holder = Session(get_engine(url))
    take_daily_limit_lock(holder, user_id, 30)

    def release() -> None:
        holder.rollback()
        holder.close()

    return release, holder


def test_a_concurrent_duplicate_of_a_transfer_in_flight_answers_409(server_url: str) -> None:
    """Real overlap on a server (PostgreSQL, SQL Server): the first request waits on the
    application lock (held by another connection) with its marker committed; the duplicate
    answers 409 at once; when the lock is released the first completes, and a third try replays
    it."""
    url = server_url
    with open_bank(url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        auth = bank.authorize(alice, 10, bob)
        key = unique_key()
        release, _ = _hold_lock(url, alice.user_id)
        results: dict[str, Any] = {}
        first = threading.Thread(
            target=lambda: results.update(first=bank.transfer(alice, 10, bob, auth, key=key))
        )
        first.start()
        try:
            deadline = time.monotonic() + 30
            while not _records(url, alice.user_id) and time.monotonic() < deadline:
                time.sleep(0.02)
            duplicate = bank.transfer(alice, 10, bob, auth, key=key)
        finally:
            release()
        first.join(timeout=60)
        assert (duplicate.status_code, duplicate.json()["errorCode"]) == (
            409,
            "IDEMPOTENCY_IN_PROGRESS",
        )
        assert results["first"].status_code == 201, results["first"].text
        replay = bank.transfer(alice, 10, bob, auth, key=key)
        assert replay.content == results["first"].content
        assert replay.headers["Idempotency-Replayed"] == "true"


def test_a_request_that_outlived_its_marker_cannot_store_a_second_success(db_url: str) -> None:
    """The completion is conditional on the marker still being ours: if it was taken over while
    we ran, our money rolls back and we answer with the holder's stored success."""
    with open_bank(db_url) as bank:
        alice = bank.customer(balance=0)
        engine = get_engine(db_url)
        keys = IdempotencyKeys(engine, bank.clock, lock_timeout_seconds=10)
        rails = AccountRails(
            engine, bank.clock, AuditChain(base64.b64decode(CHAIN_KEY)), busy_timeout_seconds=10
        )
        canonical = {"accountId": str(alice.primary), "amount": "10.00"}
        key = unique_key()

        def deposit(success: Callable[[str], SuccessRecord]) -> object:
            # Meanwhile, another request took the stale marker over and completed the deposit.
            bank.clock.advance(301)
            winner = keys.run(
                alice.user_id,
                "deposit",
                key,
                canonical,
                lambda s2: rails.deposit(
                    alice.user_id, alice.primary, Decimal(10), on_success=lambda _: s2("W")
                ),
                status=201,
            )
            assert winner == (StoredResponse(201, "W"), False)
            return rails.deposit(
                alice.user_id, alice.primary, Decimal(10), on_success=lambda _: success("L")
            )

        answer = keys.run(alice.user_id, "deposit", key, canonical, deposit, status=201)
        assert answer == (StoredResponse(201, "W"), True)
        assert _balance(db_url, alice.primary) == 10  # one deposit, not two
        assert _ledger_rows(db_url, alice.primary) == 1
