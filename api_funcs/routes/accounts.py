"""`GET /api/accounts` (accounts): the caller's accounts (docs/http.md)."""

from __future__ import annotations

from fastapi import APIRouter

from api_funcs.decimal_json import ExactJSONResponse
from api_funcs.deps import CurrentUser, HostServices
from api_funcs.problem_docs import error_code_responses
from api_funcs.schemas.accounts import AccountView
from shared.accounts.listing import list_accounts
from shared.db.uow import unit_of_work
from shared.errors import Unauthenticated

router = APIRouter(tags=["accounts"])


@router.get(
    "/api/accounts",
    summary="The caller's accounts",
    response_model=list[AccountView],
    responses=error_code_responses((Unauthenticated,)),
)
def accounts(user_id: CurrentUser, services: HostServices) -> ExactJSONResponse:
    with unit_of_work(services.engine) as session:
        listed = list_accounts(session, user_id)
    # Rendered by decimal_json, not by FastAPI's encoder (which writes a Decimal through a float).
    return ExactJSONResponse([AccountView.model_validate(a).model_dump() for a in listed])
