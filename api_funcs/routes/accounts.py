"""`GET /api/accounts` (accounts): the caller's accounts (docs/http.md)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel
from sqlalchemy.orm import Session

from api_funcs.deps import CurrentUser, get_session
from api_funcs.exact_json import ExactJSONResponse
from api_funcs.money_schemas import CENT, MoneyOut
from api_funcs.problem_docs import error_code_responses
from shared.accounts.listing import list_accounts
from shared.errors import Unauthenticated

router = APIRouter(tags=["accounts"])


class AccountView(BaseModel):
    id: uuid.UUID
    name: str
    # A JSON number with at most two decimals, every digit kept (exact_json).
    balance: MoneyOut
    currency: str
    closed: bool


@router.get(
    "/api/accounts",
    name="accounts",
    operation_id="accounts",
    summary="The caller's accounts",
    response_model=list[AccountView],
    responses=error_code_responses((Unauthenticated,)),
)
def accounts(
    user_id: CurrentUser, session: Annotated[Session, Depends(get_session)]
) -> ExactJSONResponse:
    # Rendered by exact_json, not by FastAPI's encoder (which writes a Decimal through a float).
    return ExactJSONResponse(
        [
            AccountView(
                id=a.id,
                name=a.name,
                balance=a.balance.quantize(CENT),
                currency=a.currency,
                closed=a.closed,
            ).model_dump()
            for a in list_accounts(session, user_id)
        ]
    )
