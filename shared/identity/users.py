"""Creating users and their accounts (`azurebank users add`, the quick start, tests)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.schema import Account, AspNetUser
from shared.errors import Conflict
from shared.identity.passwords import DEFAULT_ITERATIONS, hash_secret


class UserExists(Conflict):
    error_code = "USER_EXISTS"
    title = "A user with that email or AzureTag already exists."


@dataclass(frozen=True)
class NewUser:
    user_id: str
    account_ids: list[uuid.UUID]


def add_user(
    session: Session,
    clock: Clock,
    *,
    email: str,
    password: str,
    azure_tag: str,
    balance: Decimal = Decimal(0),
    accounts: int = 1,
    hash_iterations: int = DEFAULT_ITERATIONS,
) -> NewUser:
    """A user with `accounts` open accounts holding `balance` each. Does not commit."""
    if _taken(session, email, azure_tag):
        raise UserExists
    user = _identity_row(email, password, azure_tag, hash_iterations)
    session.add(user)
    # No relationship() ties the rows, so flush the parent before its children (foreign keys).
    session.flush()
    now = clock.now()
    created = [
        Account(
            Id=uuid.uuid4(),
            UserId=user.Id,
            Name="Main" if i == 0 else f"Account {i + 1}",
            Balance=balance,
            Currency="EUR",
            IsDeleted=False,
            CreatedAt=now,
            Version=1,
        )
        for i in range(accounts)
    ]
    session.add_all(created)
    session.flush()
    return NewUser(user.Id, [a.Id for a in created])


def _taken(session: Session, email: str, azure_tag: str) -> bool:
    taken = session.scalar(
        select(AspNetUser.Id).where(
            or_(
                # As the payee lookup compares it (shared/money/payees.py): `Bob` takes `bob`.
                AspNetUser.NormalizedAzureTag == func.upper(azure_tag),
                AspNetUser.NormalizedEmail == email.upper(),
            )
        )
    )
    return taken is not None


def _identity_row(email: str, password: str, azure_tag: str, hash_iterations: int) -> AspNetUser:
    """AspNetUsers' full Identity row: every column the .NET API reads."""
    return AspNetUser(
        Id=str(uuid.uuid4()),
        UserName=email,
        NormalizedUserName=email.upper(),
        Email=email,
        NormalizedEmail=email.upper(),
        EmailConfirmed=True,
        PasswordHash=hash_secret(password, iterations=hash_iterations),
        SecurityStamp=uuid.uuid4().hex.upper(),
        ConcurrencyStamp=str(uuid.uuid4()),
        PhoneNumberConfirmed=False,
        TwoFactorEnabled=False,
        LockoutEnabled=True,
        AccessFailedCount=0,
        AzureTag=azure_tag,
        PinAccessFailedCount=0,
    )
