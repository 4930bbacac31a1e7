"""Where a transfer's money lands, on SQLite and PostgreSQL: the payee's primary account — the
oldest of the payee's open accounts, the smaller Id between two as old — and nowhere else, not
even in an older account of the bank's or a closed one of the payee's."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import update

from shared.db.engine import get_engine
from shared.db.schema import Account
from shared.db.uow import unit_of_work
from tests.support.money import open_bank

LOW_ID = uuid.UUID(int=1)
HIGH_ID = uuid.UUID(int=2**128 - 1)


def _balances(db_url: str) -> dict[uuid.UUID, Decimal]:
    with unit_of_work(get_engine(db_url)) as session:
        return {a.Id: a.Balance for a in session.query(Account)}


def test_the_payees_oldest_open_account_receives_and_no_other_account_moves(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        start = bank.clock.now()
        bystander = bank.customer(balance=50)  # the bank's oldest account
        alice, bob = bank.customer(balance=100), bank.customer(pin=None)
        with unit_of_work(get_engine(db_url)) as session:
            # Bob: his first account closed, then two accounts as old as each other (the one
            # with the higher Id written first), then a newer one.
            session.execute(
                update(Account)
                .where(Account.Id == bob.primary)
                .values(IsDeleted=True, CreatedAt=start + timedelta(hours=1))
            )
            session.execute(
                update(Account)
                .where(Account.Id == bystander.primary)
                .values(CreatedAt=start - timedelta(days=1))
            )
            for account_id, hours in ((HIGH_ID, 2), (LOW_ID, 2), (uuid.uuid4(), 3)):
                session.add(
                    Account(
                        Id=account_id,
                        UserId=bob.user_id,
                        Name="Savings",
                        Balance=Decimal(0),
                        Currency="EUR",
                        IsDeleted=False,
                        CreatedAt=start + timedelta(hours=hours),
                        Version=1,
                    )
                )
                session.flush()
            session.commit()
        before = _balances(db_url)
        bank.pay(alice, 10, bob)
    after = _balances(db_url)
    moved = {a: after[a] - before[a] for a in after if after[a] != before[a]}
    assert moved == {alice.primary: Decimal(-10), LOW_ID: Decimal(10)}
