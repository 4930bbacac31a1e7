"""The caller's accounts, open and closed (`GET /api/accounts`, docs/http.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.db.schema import Account


@dataclass(frozen=True)
class AccountSummary:
    id: uuid.UUID
    name: str
    balance: Decimal
    currency: str
    closed: bool


def list_accounts(session: Session, user_id: str) -> list[AccountSummary]:
    """Every account the user owns, oldest first, closed ones included (`IsDeleted`)."""
    rows = session.execute(
        # In AccountSummary's field order.
        select(Account.Id, Account.Name, Account.Balance, Account.Currency, Account.IsDeleted)
        .where(Account.UserId == user_id)
        .order_by(Account.CreatedAt, Account.Id)
    )
    return [AccountSummary(*row) for row in rows]
