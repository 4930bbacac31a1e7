"""The money path through HTTP: one test host (the FastAPI app on a FakeClock) and its
customers, with one call per step of the journey (mint → transfer), so probes read like the ADR's
table."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import httpx2 as httpx
from fastapi.testclient import TestClient

from api_funcs.schemas.transactions import (
    InternalTransferResponse,
    RailResponse,
    Receipt,
    TransferResponse,
)
from shared.money.idempotency import IdempotencyClaim, request_hash
from shared.settings import Settings, load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_environ
from tests.support.tokens import bearer
from tests.support.users import PIN, User, enrol_pin, make_user

MINT = "/api/transactions/transfer/authorizations"
TRANSFER = "/api/transactions/transfer"
INTERNAL = "/api/transactions/internal-transfer"
DEPOSIT = "/api/transactions/deposit"
WITHDRAWAL = "/api/transactions/withdrawal"
ALLOWANCE = "/api/transactions/allowance"


def unique_key() -> str:
    """An Idempotency-Key no other request of the run sends."""
    return uuid.uuid4().hex + os.urandom(2).hex()


_RESPONSES: dict[str, type[Receipt]] = {
    "transfer": TransferResponse,
    "internal_transfer": InternalTransferResponse,
    "deposit": RailResponse,
    "withdrawal": RailResponse,
}


def keyed(
    user_id: str,
    operation: str = "transfer",
    *,
    key: str | None = None,
    canonical: dict[str, Any] | None = None,
) -> IdempotencyClaim[Any]:
    """A claim for calling a money service directly: `user_id`'s `operation` under `key` (one of
    its own unless given), its request hash that of `canonical` (the route's canonical body),
    its success 201 with the receipt rendered as the route renders it."""
    return IdempotencyClaim(
        user_id,
        operation,
        key or unique_key(),
        request_hash(operation, canonical or {}),
        201,
        _RESPONSES[operation].render,
    )


class Bank:
    """One test host (the FastAPI app over `db_url`, on a FakeClock) and its customers."""

    def __init__(self, db_url: str, clock: FakeClock, client: TestClient, settings: Settings):
        self.db_url = db_url
        self.clock = clock
        self.client = client
        self.settings = settings

    def customer(
        self, *, balance: Decimal | int | str = 0, accounts: int = 1, pin: str | None = PIN
    ) -> User:
        user = make_user(self.db_url, self.clock, balance=balance, accounts=accounts)
        if pin is not None:
            enrol_pin(self.db_url, user.user_id, pin)
        return user

    def headers(self, who: User) -> dict[str, str]:
        """A bearer token issued now, on the bank's clock (tests move the clock by hours)."""
        return bearer(self.settings, self.clock, who.user_id)

    @staticmethod
    def _payment(
        who: User, amount: Any, payee: User | str, account: uuid.UUID | None
    ) -> dict[str, Any]:
        """What mint and transfer both send: the account, the payee's tag, the amount."""
        return {
            "accountId": str(account or who.primary),
            "recipientAzureTag": payee if isinstance(payee, str) else payee.tag,
            "amount": amount,
        }

    def mint(
        self,
        who: User,
        amount: Any,
        payee: User | str,
        *,
        account: uuid.UUID | None = None,
        pin: str | None = PIN,
    ) -> httpx.Response:
        body = self._payment(who, amount, payee, account)
        if pin is not None:
            body["pin"] = pin
        return self.client.post(MINT, json=body, headers=self.headers(who))

    def transfer(
        self,
        who: User,
        amount: Any,
        payee: User | str,
        authorization_id: str | None,
        *,
        account: uuid.UUID | None = None,
        key: str | None = None,
    ) -> httpx.Response:
        body = self._payment(who, amount, payee, account)
        if authorization_id is not None:
            body["authorizationId"] = authorization_id
        return self.client.post(
            TRANSFER,
            json=body,
            headers={**self.headers(who), "Idempotency-Key": key or unique_key()},
        )

    def authorize(
        self, who: User, amount: Any, payee: User, *, account: uuid.UUID | None = None
    ) -> str:
        minted = self.mint(who, amount, payee, account=account)
        assert minted.status_code == 201, minted.text
        return str(minted.json()["authorizationId"])

    def pay(
        self, who: User, amount: Any, payee: User, *, account: uuid.UUID | None = None
    ) -> httpx.Response:
        """Mint and spend: one external transfer that must succeed."""
        auth = self.authorize(who, amount, payee, account=account)
        spent = self.transfer(who, amount, payee, auth, account=account)
        assert spent.status_code == 201, spent.text
        return spent

    def rail(self, path: str, who: User, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(
            path, json=body, headers={**self.headers(who), "Idempotency-Key": unique_key()}
        )

    def allowance(self, who: User) -> dict[str, Any]:
        response = self.client.get(ALLOWANCE, headers=self.headers(who))
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@contextmanager
def open_bank(db_url: str, clock: FakeClock | None = None, **environ: str) -> Iterator[Bank]:
    clock = clock or FakeClock()
    env = host_environ(db_url, **environ)
    with api_client(db_url, clock, env) as client:
        yield Bank(db_url, clock, client, load_settings(env))
