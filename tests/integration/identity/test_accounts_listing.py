"""`GET /api/accounts` (docs/http.md): the caller's accounts, closed ones included, balance a JSON
number; nobody else's."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import update

from shared.db.engine import get_engine
from shared.db.schema import Account
from shared.db.uow import unit_of_work
from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_settings
from tests.support.tokens import bearer
from tests.support.users import make_user


def test_the_caller_sees_their_own_accounts_with_balances_as_numbers_and_closed_flags(
    db_url: str,
) -> None:
    clock = FakeClock()
    me = make_user(db_url, clock, balance=Decimal("1234.56"), accounts=2)
    someone_else = make_user(db_url, clock, balance=5, accounts=1)
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(
            update(Account).where(Account.Id == me.account_ids[1]).values(IsDeleted=True)
        )
        session.commit()
    with api_client(db_url, clock) as client:
        response = client.get(
            "/api/accounts", headers=bearer(host_settings(db_url), clock, me.user_id)
        )
    assert response.status_code == 200
    # Oldest first, then by Id: these two were made in the same instant.
    assert sorted(response.json(), key=lambda a: a["id"]) == sorted(
        [
            {
                "id": str(me.account_ids[0]),
                "name": "Main",
                "balance": 1234.56,
                "currency": "EUR",
                "closed": False,
            },
            {
                "id": str(me.account_ids[1]),
                "name": "Account 2",
                "balance": 1234.56,
                "currency": "EUR",
                "closed": True,
            },
        ],
        key=lambda a: a["id"],
    )
    assert str(someone_else.account_ids[0]) not in response.text
    assert '"balance":1234.56' in response.text  # a JSON number, not a string


def test_a_user_with_no_accounts_gets_an_empty_list_and_no_token_gets_401(
    sqlite_url: str,
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock)
    with unit_of_work(get_engine(sqlite_url)) as session:
        session.execute(
            update(Account)
            .where(Account.UserId == user.user_id)
            .values(UserId=make_user(sqlite_url, clock).user_id)
        )
        session.commit()
    with api_client(sqlite_url, clock) as client:
        mine = client.get(
            "/api/accounts", headers=bearer(host_settings(sqlite_url), clock, user.user_id)
        )
        anonymous = client.get("/api/accounts")
    assert mine.status_code == 200 and mine.json() == []
    assert anonymous.status_code == 401
    assert anonymous.json()["errorCode"] == "UNAUTHENTICATED"
