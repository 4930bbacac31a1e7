"""The rung order of ADR-0050's table for the mint and the transfer (D4), the payee decisions,
the authorization's checks, the rows a transfer writes, and the midnight edge (D4.3)."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import select, update

from shared.audit.chain import AuditChain
from shared.audit.verify import walk_chain
from shared.db.engine import get_engine
from shared.db.schema import (
    Account,
    AuditEvent,
    AuthorizationStatus,
    Transaction,
    TransactionStatus,
    TransactionType,
    TransferAuthorization,
)
from shared.db.uow import unit_of_work
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import Bank, open_bank
from tests.support.users import WRONG_PIN, User, pin_failures


def _code(response: object) -> tuple[int, str]:
    return response.status_code, response.json()["errorCode"]  # type: ignore[attr-defined]


def _close(db_url: str, account_id: uuid.UUID) -> None:
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(update(Account).where(Account.Id == account_id).values(IsDeleted=True))
        session.commit()


def bank_customers(bank: Bank, n: int) -> list[User]:
    return [bank.customer() for _ in range(n)]


# --- the mint ---------------------------------------------------------------------------------


@pytest.mark.adr("0050", "D4", "D4.1")
def test_mint_rungs_account_then_payee_then_day_then_pin(db_url: str) -> None:
    """ADR-0050's table, mint row: each rung wins over every later one."""
    with open_bank(db_url) as bank:
        alice, bob, mallory = bank.customer(balance=100), bank.customer(), bank.customer()
        unknown_account, unknown_tag = uuid.uuid4(), "nobody-" + uuid.uuid4().hex[:8]
        # 1. the account: unknown → 404, another's → 403, even with every later rung failing.
        assert _code(
            bank.mint(alice, 9999, unknown_tag, account=unknown_account, pin=WRONG_PIN)
        ) == (404, "ACCOUNT_NOT_FOUND")
        assert _code(
            bank.mint(alice, 9999, unknown_tag, account=mallory.primary, pin=WRONG_PIN)
        ) == (403, "ACCOUNT_FORBIDDEN")
        # 2. the payee, before the day and the PIN.
        assert _code(bank.mint(alice, 9999, unknown_tag, pin=WRONG_PIN)) == (
            404,
            "PAYEE_NOT_FOUND",
        )
        assert _code(bank.mint(alice, 9999, alice, pin=WRONG_PIN)) == (422, "PAYEE_INVALID")
        # 3. the day, before the PIN (D4.1), with no PIN at all too.
        assert _code(bank.mint(alice, 9999, bob, pin=None)) == (422, "DAILY_LIMIT_EXCEEDED")
        assert pin_failures(db_url, alice.user_id) == 0
        # 4. the PIN.
        assert _code(bank.mint(alice, 100, bob, pin=None)) == (422, "PIN_REQUIRED")
        assert _code(bank.mint(alice, 100, bob, pin=WRONG_PIN)) == (401, "INVALID_PIN")
        assert pin_failures(db_url, alice.user_id) == 1


def test_mint_answers_pin_locked_with_retry_after_after_five_wrong_pins(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(), bank.customer()
        for _ in range(5):
            assert _code(bank.mint(alice, 100, bob, pin=WRONG_PIN))[0] == 401
        locked = bank.mint(alice, 100, bob)
        assert _code(locked) == (429, "PIN_LOCKED")
        assert int(locked.headers["Retry-After"]) > 0


def test_a_closed_account_of_ones_own_is_not_found_and_a_payee_with_no_open_account_is_invalid(
    db_url: str,
) -> None:
    """Decisions beyond the ADR: a closed account is invisible (404), as behind the API's
    soft-delete filter; a payee who cannot receive is 422 PAYEE_INVALID."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=100, accounts=2), bank.customer()
        _close(db_url, alice.account_ids[1])
        assert _code(bank.mint(alice, 10, bob, account=alice.account_ids[1])) == (
            404,
            "ACCOUNT_NOT_FOUND",
        )
        _close(db_url, bob.primary)
        assert _code(bank.mint(alice, 10, bob)) == (422, "PAYEE_INVALID")


@pytest.mark.adr("0042")
def test_mint_issues_an_authorization_bound_to_user_account_payee_amount_with_clock_expiry(
    db_url: str,
) -> None:
    clock = FakeClock(datetime(2026, 9, 7, 9, 30, tzinfo=UTC))
    with open_bank(db_url, clock, Transfers__AuthorizationSeconds="120") as bank:
        alice, bob = bank.customer(), bank.customer()
        minted = bank.mint(alice, 12.5, bob)  # no funds check: the balance is 0
        assert minted.status_code == 201
        body = minted.json()
        assert set(body) == {
            "authorizationId",
            "expiresAt",
            "accountId",
            "recipientAzureTag",
            "amount",
        }
        assert body["expiresAt"] == "2026-09-07T09:32:00Z"
        assert (body["accountId"], body["recipientAzureTag"], body["amount"]) == (
            str(alice.primary),
            bob.tag,
            12.5,
        )
        with unit_of_work(get_engine(db_url)) as session:
            row = session.get_one(TransferAuthorization, uuid.UUID(body["authorizationId"]))
        assert (row.UserId, row.AccountId, row.RecipientAzureTag, row.Amount, row.Status) == (
            alice.user_id,
            alice.primary,
            bob.tag,
            Decimal("12.5000"),
            AuthorizationStatus.PENDING.value,
        )
        assert row.ExpiresAt == clock.now() + timedelta(seconds=120)


# --- the transfer -----------------------------------------------------------------------------


@pytest.mark.adr("0050", "D4", "D4.2")
def test_transfer_rungs_authorization_required_then_payee_then_authorization_then_day(
    db_url: str,
) -> None:
    """ADR-0050's table, transfer row; D4.2: an invalid authorization wins over the day, so the
    daily check is no oracle."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        unknown_tag = "nobody-" + uuid.uuid4().hex[:8]
        assert _code(bank.transfer(alice, 9999, unknown_tag, None)) == (
            401,
            "AUTHORIZATION_REQUIRED",
        )
        forged = str(uuid.uuid4())
        assert _code(bank.transfer(alice, 9999, unknown_tag, forged)) == (404, "PAYEE_NOT_FOUND")
        assert _code(bank.transfer(alice, 9999, alice, forged)) == (422, "PAYEE_INVALID")
        assert _code(bank.transfer(alice, 9999, bob, forged)) == (401, "AUTHORIZATION_INVALID")


def test_transfer_authorization_must_match_user_account_payee_amount_and_be_unspent(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice, bob, carol = (
            bank.customer(balance=1000, accounts=2),
            bank.customer(),
            bank.customer(),
        )
        mallory = bank.customer(balance=1000)
        auth = bank.authorize(alice, 100, bob)
        invalid = (401, "AUTHORIZATION_INVALID")
        assert _code(bank.transfer(alice, 100.01, bob, auth)) == invalid  # amount
        assert _code(bank.transfer(alice, 100, carol, auth)) == invalid  # payee
        assert _code(bank.transfer(alice, 100, bob, auth, account=alice.account_ids[1])) == invalid
        assert _code(bank.transfer(mallory, 100, bob, auth, account=alice.primary)) == invalid
        assert bank.transfer(alice, 100, bob, auth).status_code == 201
        assert _code(bank.transfer(alice, 100, bob, auth)) == invalid  # spent


def test_an_expired_authorization_is_401_expired_but_someone_elses_is_only_invalid(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice, bob, mallory = bank.customer(balance=500), bank.customer(), bank.customer()
        auth = bank.authorize(alice, 100, bob)
        bank.clock.advance(300)  # ExpiresAt is exclusive: at the instant, it has expired
        assert _code(bank.transfer(mallory, 100, bob, auth)) == (401, "AUTHORIZATION_INVALID")
        assert _code(bank.transfer(alice, 100, bob, auth)) == (401, "AUTHORIZATION_EXPIRED")


def test_a_transfer_writes_both_ledger_rows_moves_both_balances_spends_and_audits(
    db_url: str,
) -> None:
    """Debit, credit to the payee's primary (oldest open) account, TransferOut with
    the tag, TransferIn, the authorization spent, one chained audit row."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=1000), bank.customer(balance=5, accounts=2)
        # Bob's second account is older: it is his primary.
        with unit_of_work(get_engine(db_url)) as session:
            session.execute(
                update(Account)
                .where(Account.Id == bob.account_ids[1])
                .values(CreatedAt=bank.clock.now() - timedelta(days=30))
            )
            session.commit()
        auth = bank.authorize(alice, 250.75, bob)
        bank.clock.advance(7)
        response = bank.transfer(alice, 250.75, bob, auth)
        assert response.status_code == 201, response.text
        body = response.json()
        assert set(body) == {
            "transactionId",
            "accountId",
            "recipientAzureTag",
            "amount",
            "balance",
            "createdAt",
        }
        assert (body["amount"], body["balance"], body["createdAt"]) == (
            250.75,
            749.25,
            "2026-09-07T12:00:07Z",
        )
        tx_id = uuid.UUID(body["transactionId"])
        with unit_of_work(get_engine(db_url)) as session:
            out = session.get_one(Transaction, tx_id)
            inflow = session.scalars(
                select(Transaction).where(Transaction.AccountId == bob.account_ids[1])
            ).one()
            sender = session.get_one(Account, alice.primary)
            receiver = session.get_one(Account, bob.account_ids[1])
            untouched = session.get_one(Account, bob.account_ids[0])
            spent = session.get_one(TransferAuthorization, uuid.UUID(auth))
            audit = session.scalars(
                select(AuditEvent).where(AuditEvent.ActorUserId == alice.user_id)
            ).one()
            report = walk_chain(session, AuditChain(base64.b64decode(CHAIN_KEY)))
        assert (out.Type, out.RecipientAzureTag, out.Status, out.Amount) == (
            TransactionType.TRANSFER_OUT.value,
            bob.tag,
            TransactionStatus.COMPLETED.value,
            Decimal("250.7500"),
        )
        assert out.CreatedAt == bank.clock.now()
        assert (inflow.Type, inflow.RecipientAzureTag, inflow.Amount) == (
            TransactionType.TRANSFER_IN.value,
            None,
            Decimal("250.7500"),
        )
        assert (sender.Balance, sender.Version) == (Decimal("749.2500"), 2)
        assert (receiver.Balance, untouched.Balance) == (Decimal("255.7500"), Decimal("5.0000"))
        assert (spent.Status, spent.TransactionId, spent.SpentAt) == (
            AuthorizationStatus.SPENT.value,
            tx_id,
            bank.clock.now(),
        )
        assert audit.Event == "TransferCompleted"
        assert json.loads(audit.Details or "{}")["transactionId"] == str(tx_id)
        assert report.intact


@pytest.mark.adr("0050", "D1", "D4.3")
def test_midnight_edge_a_mint_at_23_59_30_spent_at_00_00_10_is_decided_against_the_new_day(
    db_url: str,
) -> None:
    """ADR-0050 D4.3: the day of the spend decides. Day one is full (4,900 + the mint of 100 is
    exactly 5,000 and passes); at 00:00:10Z the spend counts against the new, empty day."""
    clock = FakeClock(datetime(2026, 9, 7, 12, 0, tzinfo=UTC))
    with open_bank(db_url, clock) as bank:
        alice, bob = bank.customer(balance=10_000), bank.customer()
        bank.pay(alice, 4900, bob)
        clock.set(datetime(2026, 9, 7, 23, 59, 30, tzinfo=UTC))
        late = bank.authorize(alice, 100, bob)
        # The refusing direction too: a day-one mint, spent after the new day filled up.
        other = bank.authorize(alice, 100, bob)
        clock.set(datetime(2026, 9, 8, 0, 0, 10, tzinfo=UTC))
        spent = bank.transfer(alice, 100, bob, late)
        assert spent.status_code == 201, spent.text
        assert spent.json()["createdAt"] == "2026-09-08T00:00:10Z"
        assert bank.allowance(alice) == {
            "limit": 5000,
            "used": 100,
            "remaining": 4900,
            "resetsAt": "2026-09-09T00:00:00Z",
        }
        bank.pay(alice, 4850, bob)
        refused = bank.transfer(alice, 100, bob, other)
        assert refused.status_code == 422
        assert {k: refused.json()[k] for k in ("used", "requested", "resetsAt")} == {
            "used": 4950,
            "requested": 100,
            "resetsAt": "2026-09-09T00:00:00Z",
        }


@pytest.mark.adr("0050", "D8")
def test_allowance_reads_limit_used_remaining_and_the_next_utc_midnight(db_url: str) -> None:
    clock = FakeClock(datetime(2026, 9, 7, 18, 0, tzinfo=UTC))
    with open_bank(db_url, clock, DailyLimit__Amount="750.50") as bank:
        alice, bob = bank.customer(balance=1000), bank.customer()
        assert bank.allowance(alice) == {
            "limit": 750.5,
            "used": 0,
            "remaining": 750.5,
            "resetsAt": "2026-09-08T00:00:00Z",
        }
        bank.pay(alice, 700.25, bob)
        assert bank.allowance(alice)["remaining"] == 50.25
        assert bank.client.get("/api/transactions/allowance").status_code == 401
