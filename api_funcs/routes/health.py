"""`GET /api/health` (liveness): anonymous, touches no secret and no database; and
`GET /api/health/ready` (readiness): anonymous, touches no secret, names each check ok or failing
(shared/readiness.py) and says nothing more."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from api_funcs.deps import Context
from api_funcs.exact_json import ExactJSONResponse
from api_funcs.problem_docs import error_code_responses

router = APIRouter()


@router.get(
    "/api/health",
    name="health",
    operation_id="health",
    tags=["health"],
    summary="Liveness",
    # Health refuses nothing and touches no database; it declares its 200 and no
    # problem response.
    responses=error_code_responses((), touches_database=False),
)
async def health() -> dict[str, str]:
    return {"status": "ok"}


State = Literal["ok", "failing"]


class ReadinessAnswer(BaseModel):
    status: State
    checks: dict[str, State] = Field(
        description="database, schema, auditChain, and pickup on a host that delivers notices",
        examples=[{"database": "ok", "schema": "ok", "auditChain": "ok", "pickup": "ok"}],
    )


@router.get(
    "/api/health/ready",
    name="ready",
    operation_id="ready",
    tags=["health"],
    summary="Readiness: the database, its schema, the audit chain's tail, the pickup target",
    response_model=ReadinessAnswer,
    responses={
        200: {"description": "Ready: every check is ok."},
        503: {"model": ReadinessAnswer, "description": "Not ready: the failing checks are named."},
    },
)
async def ready(ctx: Context) -> ExactJSONResponse:
    # A thread: the checks block on the database and the disk.
    report = await run_in_threadpool(ctx.services.readiness.check)
    return ExactJSONResponse(report.body(), status_code=200 if report.ready else 503)
