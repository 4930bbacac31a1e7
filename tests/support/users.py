"""Users for the tests: one `add_user`, in the caller's unit of work, writing the Identity row
the API writes; `make_user` commits one in its own. Each user has a unique tag and address, so
tests sharing a database never depend on order or on each other."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.identity import users
from shared.identity.passwords import hash_secret
from tests.support.clock import FakeClock

# PBKDF2 at the production 100,000 iterations costs ~0.1 s a hash; tests that make many users
# use one iteration. Verification reads the count from the hash, so both verify the same way.
FAST_HASH = 1
PASSWORD = "correct horse battery staple"
PIN = "4821"
WRONG_PIN = "1111"
# The default Email of `add_user`: an address of the suite's test domain, made from the tag.
FRESH = "a fresh address"


@dataclass(frozen=True)
class User:
    """A user a test added: its id, its accounts (oldest first), its tag and its Email."""

    user_id: str
    account_ids: list[uuid.UUID]
    tag: str
    email: str | None

    @property
    def primary(self) -> uuid.UUID:
        return self.account_ids[0]


def add_user(
    session: Session,
    clock: Clock | None = None,
    *,
    balance: Decimal | int | str = 0,
    accounts: int = 1,
    password: str = PASSWORD,
    tag: str | None = None,
    email: str | None = FRESH,
) -> User:
    """A user with `accounts` accounts holding `balance` each, flushed, not committed. Its Email
    is `<tag>@example.test` unless `email` gives another, which may be None or blank: the notice
    tests' addresses the API would never store."""
    tag = tag or f"user-{uuid.uuid4().hex[:12]}"
    address = f"{tag}@example.test"
    new = users.add_user(
        session,
        clock or FakeClock(),
        email=address,
        password=password,
        azure_tag=tag,
        balance=Decimal(balance),
        accounts=accounts,
        hash_iterations=FAST_HASH,
    )
    if email != FRESH:
        address = email  # type: ignore[assignment]
        session.execute(
            update(AspNetUser)
            .where(AspNetUser.Id == new.user_id)
            .values(Email=email, NormalizedEmail=email.upper() if email else None)
        )
        session.flush()
    return User(new.user_id, list(new.account_ids), tag, address)


def make_user(
    db_url: str,
    clock: Clock | None = None,
    *,
    balance: Decimal | int | str = 0,
    accounts: int = 1,
    password: str = PASSWORD,
    tag: str | None = None,
) -> User:
    """`add_user`, committed in a unit of work of its own."""
    with unit_of_work(get_engine(db_url)) as session:
        user = add_user(
            session, clock, balance=balance, accounts=accounts, password=password, tag=tag
        )
        session.commit()
    return user


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
