"""The money path against real `azurebank serve` processes on PostgreSQL: customers made in the
database, their tokens and authorizations on the system clock (a served host has no FakeClock),
keyed requests over HTTP, the customer's daily-limit lock held from a connection of the test's
own, and what the database holds at the end (balances, ledger rows, records)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from shared.clock import SystemClock
from shared.db.engine import get_engine
from shared.db.schema import Account, IdempotencyRecord, Transaction
from shared.db.uow import unit_of_work
from shared.identity.tokens import issue_token
from shared.money.applock_sql import take_daily_limit_lock
from shared.settings import load_settings
from tests.support.hosts import SIGNING_KEY
from tests.support.money import MINT, TRANSFER
from tests.support.users import PIN, User, enrol_pin, make_user


@dataclass(frozen=True)
class Customer:
    """A customer of a served host: the user and a bearer token issued on the system clock."""

    user: User
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def keyed(self, key: str) -> dict[str, str]:
        return {**self.auth, "Idempotency-Key": key}


def customer(db_url: str, *, balance: Decimal | int = 0, pin: bool = True) -> Customer:
    """A user with one account holding `balance` (and the suite's PIN), with a 60-minute token."""
    user = make_user(db_url, SystemClock(), balance=balance)
    if pin:
        enrol_pin(db_url, user.user_id, PIN)
    settings = load_settings({"Auth__SigningKey": SIGNING_KEY})
    return Customer(user, issue_token(settings, SystemClock(), user.user_id))


def transfer_body(payer: Customer, payee: Customer, amount: Any, authorization_id: str) -> Any:
    return {
        "accountId": str(payer.user.primary),
        "recipientAzureTag": payee.user.tag,
        "amount": amount,
        "authorizationId": authorization_id,
    }


def authorize(base_url: str, payer: Customer, payee: Customer, amount: Any) -> str:
    """A transfer authorization minted by the served host (its PIN step-up)."""
    minted = httpx.post(
        f"{base_url}{MINT}",
        json={
            "accountId": str(payer.user.primary),
            "recipientAzureTag": payee.user.tag,
            "amount": amount,
            "pin": PIN,
        },
        headers=payer.auth,
        timeout=30,
    )
    assert minted.status_code == 201, minted.text
    return str(minted.json()["authorizationId"])


def post_transfer(
    base_url: str, payer: Customer, body: Any, key: str, *, timeout: float = 60
) -> httpx.Response:
    return httpx.post(f"{base_url}{TRANSFER}", json=body, headers=payer.keyed(key), timeout=timeout)


class DailyLimitLockHeld:
    """The customer's daily-limit lock, taken as a transfer takes it, from a connection of the
    test's own, held until `release` (or the block's end): a transfer of that customer parks on
    it inside its money transaction."""

    def __init__(self, db_url: str, user_id: str) -> None:
        self._holder: Session | None = Session(get_engine(db_url))
        take_daily_limit_lock(self._holder, user_id, 30)

    def release(self) -> None:
        if self._holder is not None:
            self._holder.rollback()
            self._holder.close()
            self._holder = None

    def __enter__(self) -> DailyLimitLockHeld:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def advisory_lock_waiters(db_url: str) -> set[int]:
    """The PostgreSQL backends waiting for an advisory lock (a transfer parked on the lock)."""
    with unit_of_work(get_engine(db_url)) as session:
        rows = session.execute(
            text(
                "SELECT pid FROM pg_locks JOIN pg_stat_activity USING (pid)"
                " WHERE datname = current_database() AND locktype = 'advisory' AND NOT granted"
            )
        )
        return {int(pid) for (pid,) in rows}


def backend_alive(db_url: str, pid: int) -> bool:
    with unit_of_work(get_engine(db_url)) as session:
        found = session.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
        return bool(found)


def balance(db_url: str, account_id: uuid.UUID) -> Decimal:
    with unit_of_work(get_engine(db_url)) as session:
        return session.get_one(Account, account_id).Balance


def ledger_rows(db_url: str, account_id: uuid.UUID) -> int:
    with unit_of_work(get_engine(db_url)) as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(Transaction)
                .where(Transaction.AccountId == account_id)
            )
            or 0
        )


def records(db_url: str, user_id: str) -> list[tuple[str, str, int | None]]:
    """The user's idempotency records: (key, state, status)."""
    with unit_of_work(get_engine(db_url)) as session:
        return [
            (r.Key, r.State, r.ResponseStatus)
            for r in session.scalars(
                select(IdempotencyRecord).where(IdempotencyRecord.UserId == user_id)
            )
        ]
