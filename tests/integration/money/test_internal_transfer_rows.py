"""The rails' ledger and audit rows, on SQLite and PostgreSQL. An internal transfer: a
TransferOut row under the receipt's transaction id on the source naming the target, a TransferIn
row on the target naming the source, neither with a RecipientAzureTag (so the day's limit does
not count it); a transfer from an account to itself is refused, naming the field and the rule.
Each rail refuses a cent more than the balance, naming both amounts, and audits what it moved."""

from __future__ import annotations

import base64
import json
import uuid
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from shared.audit.chain import AuditChain
from shared.db.engine import get_engine
from shared.db.schema import AuditEvent, Transaction
from shared.db.uow import unit_of_work
from shared.errors import ValidationFailed
from shared.money.rails import (
    DEPOSIT_COMPLETED,
    INTERNAL_TRANSFER_COMPLETED,
    WITHDRAWAL_COMPLETED,
    AccountRails,
)
from shared.money.refusals import InsufficientFunds
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed
from tests.support.users import make_user


def _rails(db_url: str, clock: FakeClock) -> AccountRails:
    return AccountRails(get_engine(db_url), clock, AuditChain(base64.b64decode(CHAIN_KEY)))


def test_an_internal_transfer_writes_a_transfer_out_and_a_transfer_in_naming_each_other(
    db_url: str,
) -> None:
    clock = FakeClock()
    owner = make_user(db_url, clock, balance=100, accounts=2)
    source, target = owner.account_ids
    answer = _rails(db_url, clock).internal_transfer(
        keyed(owner.user_id, "internal_transfer"), source, target, Decimal(25)
    )
    receipt = json.loads(answer.body)
    with unit_of_work(get_engine(db_url)) as session:
        rows = session.execute(
            select(
                Transaction.Id,
                Transaction.AccountId,
                Transaction.Type,
                Transaction.Amount,
                Transaction.Status,
                Transaction.RecipientAzureTag,
                Transaction.CounterpartyAccountId,
                Transaction.CreatedAt,
            ).order_by(Transaction.Type)
        ).all()
    transfer_in, transfer_out = (tuple(r) for r in rows)
    assert transfer_out == (
        uuid.UUID(receipt["transactionId"]),
        source,
        "TransferOut",
        Decimal(25),
        "Completed",
        None,
        target,
        clock.now(),
    )
    assert transfer_in[1:] == (
        target,
        "TransferIn",
        Decimal(25),
        "Completed",
        None,
        source,
        clock.now(),
    )
    assert transfer_in[0] != uuid.UUID(receipt["transactionId"])
    assert (receipt["balance"], receipt["fromAccountId"], receipt["toAccountId"]) == (
        75,
        str(source),
        str(target),
    )


def test_an_internal_transfer_to_the_same_account_is_refused_naming_the_field(
    db_url: str,
) -> None:
    clock = FakeClock()
    owner = make_user(db_url, clock, balance=100)
    with pytest.raises(ValidationFailed) as refused:
        _rails(db_url, clock).internal_transfer(
            keyed(owner.user_id, "internal_transfer"), owner.primary, owner.primary, Decimal(1)
        )
    assert refused.value.members == {
        "errors": [{"field": "toAccountId", "message": "must differ from fromAccountId"}]
    }


def test_an_internal_transfer_of_the_whole_balance_goes_and_a_cent_more_is_refused_naming_both(
    db_url: str,
) -> None:
    clock = FakeClock()
    owner = make_user(db_url, clock, balance=100, accounts=2)
    source, target = owner.account_ids
    rails = _rails(db_url, clock)
    with pytest.raises(InsufficientFunds) as refused:
        rails.internal_transfer(
            keyed(owner.user_id, "internal_transfer"), source, target, Decimal("100.01")
        )
    assert refused.value.members == {"available": Decimal(100), "requested": Decimal("100.01")}
    answer = rails.internal_transfer(
        keyed(owner.user_id, "internal_transfer"), source, target, Decimal(100)
    )
    receipt = json.loads(answer.body)
    assert receipt["balance"] == 0
    with unit_of_work(get_engine(db_url)) as session:
        audited = session.execute(
            select(AuditEvent.ActorUserId, AuditEvent.Details, AuditEvent.OccurredAt).where(
                AuditEvent.Event == INTERNAL_TRANSFER_COMPLETED
            )
        ).all()
    assert len(audited) == 1  # the refusal wrote none
    actor, details, occurred_at = audited[0]
    assert (actor, occurred_at) == (owner.user_id, clock.now())
    assert json.loads(details) == {
        "transactionId": receipt["transactionId"],
        "fromAccountId": str(source),
        "toAccountId": str(target),
        "amount": "100",
    }


@pytest.mark.parametrize("operation", ["deposit", "withdrawal"])
def test_a_deposit_or_withdrawal_writes_one_ledger_row_and_an_audit_row_naming_it(
    db_url: str, operation: str
) -> None:
    clock = FakeClock()
    owner = make_user(db_url, clock, balance=100)
    rails = _rails(db_url, clock)
    move = rails.deposit if operation == "deposit" else rails.withdrawal
    if operation == "withdrawal":
        with pytest.raises(InsufficientFunds) as refused:
            move(keyed(owner.user_id, operation), owner.primary, Decimal("100.01"))
        assert refused.value.members == {
            "available": Decimal(100),
            "requested": Decimal("100.01"),
        }
    receipt = json.loads(move(keyed(owner.user_id, operation), owner.primary, Decimal(100)).body)
    assert receipt["balance"] == (200 if operation == "deposit" else 0)
    event = DEPOSIT_COMPLETED if operation == "deposit" else WITHDRAWAL_COMPLETED
    with unit_of_work(get_engine(db_url)) as session:
        audited = session.execute(
            select(AuditEvent.ActorUserId, AuditEvent.Details, AuditEvent.OccurredAt).where(
                AuditEvent.Event == event
            )
        ).all()
        others = session.scalar(
            select(func.count()).where(
                AuditEvent.Event.in_([DEPOSIT_COMPLETED, WITHDRAWAL_COMPLETED]),
                AuditEvent.Event != event,
            )
        )
        ledger = session.execute(
            select(Transaction.Id, Transaction.Type, Transaction.Amount).where(
                Transaction.AccountId == owner.primary
            )
        ).all()
    assert (len(audited), others) == (1, 0)  # a refusal writes none, nor the other event
    actor, details, occurred_at = audited[0]
    assert (actor, occurred_at) == (owner.user_id, clock.now())
    assert json.loads(details) == {
        "transactionId": receipt["transactionId"],
        "accountId": str(owner.primary),
        "amount": "100",
    }
    assert [tuple(row) for row in ledger] == [
        (uuid.UUID(receipt["transactionId"]), operation.capitalize(), Decimal(100))
    ]
