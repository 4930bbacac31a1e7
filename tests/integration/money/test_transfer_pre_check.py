"""ADR-0050 D4.2, the transfer's pre-check, which reads the payee, the authorization and the
day's sum in ONE statement (`pre_check` in shared/money/transfers.py) and judges them in the
rungs' order: every combination of a failing payee, a failing authorization and a full day
answers with the first failing rung, through the API, on SQLite and PostgreSQL.

The combinations are few enough to enumerate (4 payees × 8 authorizations × 2 days), so every
one is run rather than sampled."""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import insert, update

from shared.db.engine import get_engine
from shared.db.schema import (
    Account,
    AuthorizationStatus,
    Transaction,
    TransactionStatus,
    TransactionType,
    TransferAuthorization,
)
from shared.db.uow import unit_of_work
from tests.support.money import Bank, open_bank

AMOUNT = Decimal(100)
LIMIT = Decimal(5000)  # the default DailyLimit__Amount

PAYEES = ("unknown", "oneself", "cannot receive", "good")
AUTHORIZATIONS = (
    "missing",
    "another user's",
    "another account's",
    "another payee's",
    "another amount's",
    "spent",
    "expired",
    "good",
)
DAYS = ("room", "full")


def _expected(payee: str, authorization: str, day: str) -> tuple[int, str] | int:
    if payee == "unknown":
        return 404, "PAYEE_NOT_FOUND"
    if payee != "good":
        return 422, "PAYEE_INVALID"
    if authorization == "expired":
        return 401, "AUTHORIZATION_EXPIRED"
    if authorization != "good":
        return 401, "AUTHORIZATION_INVALID"
    if day == "full":
        return 422, "DAILY_LIMIT_EXCEEDED"
    return 201


def _authorize(bank: Bank, **row: object) -> uuid.UUID:
    """An authorization as the mint writes it, expiring five minutes from now."""
    now = bank.clock.now()
    authorization_id = uuid.uuid4()
    with unit_of_work(get_engine(bank.db_url)) as session:
        values = {
            "Id": authorization_id,
            "Amount": AMOUNT,
            "Status": AuthorizationStatus.PENDING.value,
            "CreatedAt": now,
            "ExpiresAt": now + timedelta(minutes=5),
        }
        session.execute(insert(TransferAuthorization).values({**values, **row}))
        session.commit()
    return authorization_id


def _write(bank: Bank, statement: object) -> None:
    with unit_of_work(get_engine(bank.db_url)) as session:
        session.execute(statement)  # type: ignore[call-overload]
        session.commit()


def _attempt(bank: Bank, payee: str, authorization: str, day: str) -> tuple[int, str] | int:
    alice = bank.customer(balance=LIMIT * 2, accounts=2, pin=None)
    bob, carol, mallory = (bank.customer(pin=None) for _ in range(3))
    mine = {"UserId": alice.user_id, "AccountId": alice.primary, "RecipientAzureTag": bob.tag}
    rows = {
        "another user's": {**mine, "UserId": mallory.user_id, "AccountId": mallory.primary},
        "another account's": {**mine, "AccountId": alice.account_ids[1]},
        "another payee's": {**mine, "RecipientAzureTag": carol.tag},
        "another amount's": {**mine, "Amount": AMOUNT + Decimal("0.01")},
    }
    if authorization == "missing":
        authorization_id = uuid.uuid4()
    else:
        authorization_id = _authorize(bank, **rows.get(authorization, mine))
    if authorization == "spent":
        _write(
            bank,
            update(TransferAuthorization)
            .where(TransferAuthorization.Id == authorization_id)
            .values(Status=AuthorizationStatus.SPENT.value, SpentAt=bank.clock.now()),
        )
    if day == "full":  # what is left of the day is less than the amount
        _write(
            bank,
            insert(Transaction).values(
                Id=uuid.uuid4(),
                AccountId=alice.account_ids[1],
                Type=TransactionType.TRANSFER_OUT.value,
                Amount=LIMIT - AMOUNT + Decimal(1),
                Status=TransactionStatus.COMPLETED.value,
                RecipientAzureTag=carol.tag,
                CreatedAt=bank.clock.now(),
            ),
        )
    if payee == "cannot receive":
        _write(bank, update(Account).where(Account.UserId == bob.user_id).values(IsDeleted=True))
    tag = {"unknown": "nobody-" + uuid.uuid4().hex[:8], "oneself": alice.tag}.get(payee, bob.tag)
    if authorization == "expired":
        # ExpiresAt is exclusive: at the instant, it has expired. Eight combinations move the
        # clock forty minutes from noon in all, so every combination stays on one day.
        bank.clock.advance(300)
    response = bank.transfer(alice, int(AMOUNT), tag, str(authorization_id))
    if response.status_code == 201:
        return 201
    return response.status_code, response.json()["errorCode"]


@pytest.mark.adr("0050", "D4.2")
def test_the_pre_check_answers_with_the_first_failing_rung_of_every_combination(
    db_url: str,
) -> None:
    """Payee, then the authorization (invalid before expired), then the day: whatever else
    fails with it, each rung wins over every later one, so the one read that answers all three
    is judged as the three reads were."""
    with open_bank(db_url) as bank:
        answers = {
            combination: _attempt(bank, *combination)
            for combination in itertools.product(PAYEES, AUTHORIZATIONS, DAYS)
        }
    wrong = {
        combination: (answer, _expected(*combination))
        for combination, answer in answers.items()
        if answer != _expected(*combination)
    }
    assert wrong == {}
