"""ADR-0050's probe table A1–A8, through HTTP, on SQLite and PostgreSQL: the codes, bodies and rows
each probe recorded. The clock is the ADR's day (2026-09-07, resets 2026-09-08T00:00:00Z) and the
limit its default, 5,000 (D6)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from sqlalchemy import func, select, update

from shared.db.engine import get_engine
from shared.db.schema import (
    Account,
    AuditEvent,
    AuthorizationStatus,
    Transaction,
    TransactionType,
    TransferAuthorization,
)
from shared.db.uow import unit_of_work
from tests.support.money import DEPOSIT, INTERNAL, WITHDRAWAL, Bank, open_bank
from tests.support.users import WRONG_PIN, User, pin_failures

RESETS_AT = "2026-09-08T00:00:00Z"


def _refusal(response: object, code: str) -> dict[str, object]:
    assert response.status_code == 422, response.text  # type: ignore[attr-defined]
    body: dict[str, object] = response.json()  # type: ignore[attr-defined]
    assert body["errorCode"] == code
    return body


def _limit_figures(body: dict[str, object]) -> dict[str, object]:
    return {k: body[k] for k in ("limit", "used", "requested", "resetsAt")}


def _authorizations(db_url: str, user_id: str) -> list[TransferAuthorization]:
    with unit_of_work(get_engine(db_url)) as session:
        return list(
            session.scalars(
                select(TransferAuthorization).where(TransferAuthorization.UserId == user_id)
            )
        )


def _status_of(db_url: str, authorization_id: str) -> str:
    with unit_of_work(get_engine(db_url)) as session:
        row = session.get_one(TransferAuthorization, uuid.UUID(authorization_id))
        return row.Status


def _use(bank: Bank, who: User, amount: int, payee: User) -> None:
    bank.pay(who, amount, payee)


@pytest.mark.adr("0050", "A1", "D4.1")
@pytest.mark.adr("0049", "D4")
def test_over_limit_mint_with_wrong_pin_answers_422_three_times_and_spends_no_attempt(
    db_url: str,
) -> None:
    """A1 / D4.1: the daily check sits before the PIN, so the wrong PIN is never tried."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=10_000), bank.customer()
        assert pin_failures(db_url, alice.user_id) == 0
        for _ in range(3):
            body = _refusal(bank.mint(alice, 5000.01, bob, pin=WRONG_PIN), "DAILY_LIMIT_EXCEEDED")
            assert body["title"] == "Daily transfer limit exceeded."
            assert _limit_figures(body) == {
                "limit": 5000,
                "used": 0,
                "requested": 5000.01,
                "resetsAt": RESETS_AT,
            }
        assert pin_failures(db_url, alice.user_id) == 0  # PinAccessFailedCount 0 → 0
        assert _authorizations(db_url, alice.user_id) == []  # nothing minted
        assert bank.mint(alice, 100, bob).status_code == 201  # A1.4


@pytest.mark.adr("0050", "A2", "D4.1")
def test_the_bound_is_inclusive_used_4000_mint_1000_01_refused_mint_1000_issued(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=10_000), bank.customer()
        _use(bank, alice, 4000, bob)
        body = _refusal(bank.mint(alice, 1000.01, bob), "DAILY_LIMIT_EXCEEDED")
        assert _limit_figures(body) == {
            "limit": 5000,
            "used": 4000,
            "requested": 1000.01,
            "resetsAt": RESETS_AT,
        }
        assert bank.mint(alice, 1000, bob).status_code == 201  # A2.4


@pytest.mark.adr("0050", "A3", "D4.1", "D4.3")
@pytest.mark.adr("0009")
def test_the_mint_does_not_reserve_and_a_refused_spend_is_re_evaluated_not_replayed(
    db_url: str,
) -> None:
    """A3 and ADR-0009: a refusal is never stored, so B's key again answers 422 afresh."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=10_000), bank.customer()
        _use(bank, alice, 4000, bob)
        auth_a = bank.authorize(alice, 1000, bob)  # A3.1: 201
        auth_b = bank.authorize(alice, 1000, bob)  # A3.1: 201, the mint reserved nothing
        assert bank.transfer(alice, 1000, bob, auth_a).status_code == 201
        key_b = "probe-a3-key-b"
        first = bank.transfer(alice, 1000, bob, auth_b, key=key_b)
        body = _refusal(first, "DAILY_LIMIT_EXCEEDED")
        assert _limit_figures(body) == {
            "limit": 5000,
            "used": 5000,
            "requested": 1000,
            "resetsAt": RESETS_AT,
        }
        assert _status_of(db_url, auth_b) == AuthorizationStatus.PENDING.value
        again = bank.transfer(alice, 1000, bob, auth_b, key=key_b)  # A3.4
        assert _refusal(again, "DAILY_LIMIT_EXCEEDED")["used"] == 5000
        assert "idempotency-replayed" not in again.headers
        assert again.json()["traceId"] != body["traceId"]  # evaluated afresh, not replayed
        assert _status_of(db_url, auth_b) == AuthorizationStatus.PENDING.value


@pytest.mark.adr("0050", "A4", "D4")
def test_daily_before_balance_on_the_transfer_and_the_mint_has_no_balance_rung(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=5200), bank.customer()
        pending_400 = bank.authorize(alice, 400, bob)  # minted while the day was empty
        _use(bank, alice, 4900, bob)  # used 4,900, balance 300
        body = _refusal(bank.transfer(alice, 400, bob, pending_400), "DAILY_LIMIT_EXCEEDED")
        assert _limit_figures(body) == {
            "limit": 5000,
            "used": 4900,
            "requested": 400,
            "resetsAt": RESETS_AT,
        }

        # A4.3: used 4,600 and balance 300: a mint of 401 answers the daily code.
        carol, dave = bank.customer(balance=4900), bank.customer()
        _use(bank, carol, 4600, dave)
        assert _refusal(bank.mint(carol, 401, dave), "DAILY_LIMIT_EXCEEDED")["used"] == 4600

        # A4.4: with the day intact, a spend of 400 on a balance of 300 is INSUFFICIENT_FUNDS.
        erin, frank = bank.customer(balance=300), bank.customer()
        auth = bank.authorize(erin, 400, frank)  # no mint checks funds
        funds = _refusal(bank.transfer(erin, 400, frank, auth), "INSUFFICIENT_FUNDS")
        assert {k: funds[k] for k in ("available", "requested")} == {
            "available": 300,
            "requested": 400,
        }
        assert "remaining" not in funds


@pytest.mark.adr("0050", "A5", "D2")
@pytest.mark.adr("0056")
def test_an_exhausted_day_still_allows_internal_transfer_withdrawal_and_deposit(
    db_url: str,
) -> None:
    """A5 / D2: internal transfers, withdrawals (ADR-0056) and inflows are not counted."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=6000, accounts=2), bank.customer()
        _use(bank, alice, 5000, bob)
        assert bank.allowance(alice)["remaining"] == 0
        internal = bank.rail(
            INTERNAL,
            alice,
            {
                "fromAccountId": str(alice.account_ids[0]),
                "toAccountId": str(alice.account_ids[1]),
                "amount": 100,
            },
        )
        withdraw = bank.rail(WITHDRAWAL, alice, {"accountId": str(alice.primary), "amount": 100})
        deposit = bank.rail(DEPOSIT, alice, {"accountId": str(alice.primary), "amount": 100})
        assert [internal.status_code, withdraw.status_code, deposit.status_code] == [201] * 3
        assert bank.allowance(alice)["used"] == 5000  # none of the three counted


@pytest.mark.adr("0050", "A6", "D3")
def test_a_closed_accounts_outflow_still_counts_and_the_day_ends_at_exactly_5000(
    db_url: str,
) -> None:
    """A6 / D3: no IsDeleted filter; money that left a drained-then-closed account left today."""
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=4600, accounts=2), bank.customer()
        spare = alice.account_ids[1]
        bank.pay(alice, 4600, bob, account=spare)
        with unit_of_work(get_engine(db_url)) as session:
            session.execute(update(Account).where(Account.Id == spare).values(IsDeleted=True))
            session.commit()
        body = _refusal(bank.mint(alice, 500, bob), "DAILY_LIMIT_EXCEEDED")  # A6.3
        assert (body["used"], body["requested"]) == (4600, 500)
        bank.pay(alice, 400, bob)  # A6.4: 201
        assert bank.allowance(alice)["used"] == 5000


@pytest.mark.adr("0050", "A7", "D2")
@pytest.mark.adr("0044")
def test_the_senders_rows_three_external_outflows_of_5000_audit_for_successes_only(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=10_000), bank.customer()
        _use(bank, alice, 4000, bob)
        refused_auth = bank.authorize(alice, 1000, bob)
        _use(bank, alice, 600, bob)
        _refusal(bank.transfer(alice, 1000, bob, refused_auth), "DAILY_LIMIT_EXCEEDED")
        _refusal(bank.mint(alice, 401, bob), "DAILY_LIMIT_EXCEEDED")
        _use(bank, alice, 400, bob)
        with unit_of_work(get_engine(db_url)) as session:
            rows = session.execute(
                select(func.count(), func.sum(Transaction.Amount)).where(
                    Transaction.AccountId == alice.primary,
                    Transaction.Type == TransactionType.TRANSFER_OUT.value,
                    Transaction.RecipientAzureTag.is_not(None),
                )
            ).one()
            audited = session.scalar(
                select(func.count()).where(
                    AuditEvent.ActorUserId == alice.user_id, AuditEvent.Event == "TransferCompleted"
                )
            )
        assert (rows[0], rows[1]) == (3, Decimal("5000.0000"))
        assert audited == 3  # the successes only (ADR-0044: refusals are log-only)
        assert _status_of(db_url, refused_auth) == AuthorizationStatus.PENDING.value


@pytest.mark.adr("0050", "A8", "D7")
def test_the_422_body_carries_figures_as_top_level_json_numbers_and_never_remaining(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=10_000), bank.customer()
        _use(bank, alice, 4000, bob)
        response = bank.mint(alice, 1500.5, bob)
        body = _refusal(response, "DAILY_LIMIT_EXCEEDED")
        assert response.headers["content-type"] == "application/problem+json"
        for member in ("limit", "used", "requested"):
            assert isinstance(body[member], int | float) and not isinstance(body[member], bool)
        assert isinstance(body["resetsAt"], str) and body["resetsAt"] == RESETS_AT
        assert isinstance(body["traceId"], str) and body["traceId"]
        assert body["status"] == 422
        assert "remaining" not in body
        # The raw text shows numbers, not strings.
        assert '"requested":1500.5' in response.text and '"limit":5000' in response.text
