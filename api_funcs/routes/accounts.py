"""`GET /api/accounts` (accounts): the caller's accounts (DESIGN §5)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, PlainSerializer
from sqlalchemy.orm import Session

from api_funcs.deps import CurrentUser, get_session
from api_funcs.problem_docs import error_code_responses
from shared.accounts.listing import list_accounts

router = APIRouter(tags=["accounts"])

# DESIGN §5: money travels as a JSON number with at most two decimals.
JsonMoney = Annotated[
    Decimal,
    PlainSerializer(lambda d: float(d.quantize(Decimal("0.01"))), return_type=float),
]


class AccountView(BaseModel):
    id: uuid.UUID
    name: str
    balance: JsonMoney
    currency: str
    closed: bool


@router.get(
    "/api/accounts",
    name="accounts",
    operation_id="accounts",
    summary="The caller's accounts",
    responses=error_code_responses({401: ["UNAUTHENTICATED"]}),
)
def accounts(
    user_id: CurrentUser, session: Annotated[Session, Depends(get_session)]
) -> list[AccountView]:
    return [
        AccountView(id=a.id, name=a.name, balance=a.balance, currency=a.currency, closed=a.closed)
        for a in list_accounts(session, user_id)
    ]
