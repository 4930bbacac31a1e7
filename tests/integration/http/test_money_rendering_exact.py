"""Money travels as a JSON number (docs/http.md) whose digits are exactly the Decimal the server
holds, however many there are: a float keeps about 15 significant digits, so a balance of
99999999999999.99 (within Accounts.Balance's Numeric(18,4)) rendered through one came out as
99999999999999.98. On SQLite and PostgreSQL, the large balance set directly in the database."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

from sqlalchemy import update

from shared.db.engine import get_engine
from shared.db.schema import Account
from shared.db.uow import unit_of_work
from tests.support.money import DEPOSIT, INTERNAL, WITHDRAWAL, open_bank, unique_key

LARGE = Decimal("99999999999999.98")
EXPECTED = "99999999999999.99"


def _set_balance(db_url: str, account_id: uuid.UUID, balance: Decimal) -> None:
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(update(Account).where(Account.Id == account_id).values(Balance=balance))
        session.commit()


def test_a_deposit_onto_a_large_balance_renders_every_cent_and_replays_byte_for_byte(
    db_url: str,
) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer()
        _set_balance(db_url, alice.primary, LARGE)
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        body = {"accountId": str(alice.primary), "amount": 0.01}
        first = bank.client.post(DEPOSIT, json=body, headers=headers)
        again = bank.client.post(DEPOSIT, json=body, headers=headers)
        listed = bank.client.get("/api/accounts", headers=bank.headers(alice))
    assert first.status_code == 201, first.text
    assert f'"balance":{EXPECTED},' in first.text  # a JSON number, every digit
    assert json.loads(first.text, parse_float=Decimal)["balance"] == Decimal(EXPECTED)
    assert again.headers["Idempotency-Replayed"] == "true"
    assert again.content == first.content
    assert listed.status_code == 200, listed.text
    assert f'"balance":{EXPECTED},' in listed.text


def test_internal_transfers_and_withdrawals_render_a_large_balance_exactly(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer(accounts=2)
        _set_balance(db_url, alice.account_ids[0], Decimal("99999999999999.94"))
        _set_balance(db_url, alice.account_ids[1], Decimal("10"))
        moved = bank.rail(
            INTERNAL,
            alice,
            {
                "fromAccountId": str(alice.account_ids[0]),
                "toAccountId": str(alice.account_ids[1]),
                "amount": 0.01,
            },
        )
        taken = bank.rail(
            WITHDRAWAL, alice, {"accountId": str(alice.account_ids[0]), "amount": 100000}
        )
    assert moved.status_code == 201, moved.text
    assert '"balance":99999999999999.93,' in moved.text  # a float says …94
    assert taken.status_code == 201, taken.text
    assert '"balance":99999999899999.93,' in taken.text  # a float says …94
