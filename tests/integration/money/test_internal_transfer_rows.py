"""An internal transfer's ledger, on SQLite and PostgreSQL: a TransferOut row under the receipt's
transaction id on the source naming the target, a TransferIn row on the target naming the
source, neither with a RecipientAzureTag (so the day's limit does not count it); and a transfer
from an account to itself is refused, naming the field and the rule."""

from __future__ import annotations

import base64
import json
import uuid
from decimal import Decimal

import pytest
from sqlalchemy import select

from shared.audit.chain import AuditChain
from shared.clock import FakeClock
from shared.db.engine import get_engine
from shared.db.schema import AuditEvent, Transaction
from shared.db.uow import unit_of_work
from shared.errors import ValidationFailed
from shared.money.rails import INTERNAL_TRANSFER_COMPLETED, AccountRails
from shared.money.refusals import InsufficientFunds
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed
from tests.support.users import make_user


def _rails(db_url: str, clock: FakeClock) -> AccountRails:
    return AccountRails(
        get_engine(db_url), clock, AuditChain(base64.b64decode(CHAIN_KEY)), busy_timeout_seconds=5
    )


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
