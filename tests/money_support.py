"""Helpers for the money-path tests: customers with a PIN, and one call per step of the journey
through HTTP (mint → transfer), so probes read like the ADR's table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx2 as httpx
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from shared.clock import FakeClock
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.identity.passwords import hash_secret
from shared.settings import Settings
from tests.support import FAST_HASH, api_client, bearer, host_environ, make_user, unique_key

PIN = "4821"
WRONG_PIN = "1111"
MINT = "/api/transactions/transfer/authorizations"
TRANSFER = "/api/transactions/transfer"
INTERNAL = "/api/transactions/internal-transfer"
DEPOSIT = "/api/transactions/deposit"
WITHDRAWAL = "/api/transactions/withdrawal"
ALLOWANCE = "/api/transactions/allowance"


@dataclass(frozen=True)
class Customer:
    user_id: str
    tag: str
    account_ids: list[uuid.UUID]

    @property
    def primary(self) -> uuid.UUID:
        return self.account_ids[0]


def enrol_pin(db_url: str, user_id: str, pin: str = PIN) -> None:
    """Store a PIN hash as enrolment would (the format the API verifies)."""
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(
            update(AspNetUser)
            .where(AspNetUser.Id == user_id)
            .values(PinHash=hash_secret(pin, iterations=FAST_HASH))
        )
        session.commit()


def pin_failures(db_url: str, user_id: str) -> int:
    with unit_of_work(get_engine(db_url)) as session:
        count = session.scalar(
            select(AspNetUser.PinAccessFailedCount).where(AspNetUser.Id == user_id)
        )
    return int(count or 0)


class Bank:
    """One test host (the FastAPI app over `db_url`, on a FakeClock) and its customers."""

    def __init__(self, db_url: str, clock: FakeClock, client: TestClient, settings: Settings):
        self.db_url = db_url
        self.clock = clock
        self.client = client
        self.settings = settings

    def customer(
        self, *, balance: Decimal | int | str = 0, accounts: int = 1, pin: str | None = PIN
    ) -> Customer:
        tag = f"user-{uuid.uuid4().hex[:12]}"
        user = make_user(self.db_url, self.clock, balance=balance, accounts=accounts, tag=tag)
        if pin is not None:
            enrol_pin(self.db_url, user.user_id, pin)
        return Customer(user.user_id, tag, list(user.account_ids))

    def headers(self, who: Customer) -> dict[str, str]:
        """A bearer token issued now, on the bank's clock (tests move the clock by hours)."""
        return bearer(self.settings, self.clock, who.user_id)

    def mint(
        self,
        who: Customer,
        amount: Any,
        payee: Customer | str,
        *,
        account: uuid.UUID | None = None,
        pin: str | None = PIN,
    ) -> httpx.Response:
        body: dict[str, Any] = {
            "accountId": str(account or who.primary),
            "recipientAzureTag": payee if isinstance(payee, str) else payee.tag,
            "amount": amount,
        }
        if pin is not None:
            body["pin"] = pin
        return self.client.post(MINT, json=body, headers=self.headers(who))

    def transfer(
        self,
        who: Customer,
        amount: Any,
        payee: Customer | str,
        authorization_id: str | None,
        *,
        account: uuid.UUID | None = None,
        key: str | None = None,
    ) -> httpx.Response:
        body: dict[str, Any] = {
            "accountId": str(account or who.primary),
            "recipientAzureTag": payee if isinstance(payee, str) else payee.tag,
            "amount": amount,
        }
        if authorization_id is not None:
            body["authorizationId"] = authorization_id
        return self.client.post(
            TRANSFER,
            json=body,
            headers={**self.headers(who), "Idempotency-Key": key or unique_key()},
        )

    def authorize(
        self, who: Customer, amount: Any, payee: Customer, *, account: uuid.UUID | None = None
    ) -> str:
        minted = self.mint(who, amount, payee, account=account)
        assert minted.status_code == 201, minted.text
        return str(minted.json()["authorizationId"])

    def pay(
        self, who: Customer, amount: Any, payee: Customer, *, account: uuid.UUID | None = None
    ) -> httpx.Response:
        """Mint and spend: one external transfer that must succeed."""
        auth = self.authorize(who, amount, payee, account=account)
        spent = self.transfer(who, amount, payee, auth, account=account)
        assert spent.status_code == 201, spent.text
        return spent

    def rail(self, path: str, who: Customer, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(
            path, json=body, headers={**self.headers(who), "Idempotency-Key": unique_key()}
        )

    def allowance(self, who: Customer) -> dict[str, Any]:
        response = self.client.get(ALLOWANCE, headers=self.headers(who))
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@contextmanager
def open_bank(db_url: str, clock: FakeClock | None = None, **environ: str) -> Iterator[Bank]:
    from shared.settings import load_settings

    clock = clock or FakeClock()
    env = host_environ(db_url, **environ)
    with api_client(db_url, clock, env) as client:
        yield Bank(db_url, clock, client, load_settings(env))
