"""`GET /api/health` (liveness) and `GET /api/health/ready` (readiness): anonymous, no secret."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from api_funcs.decimal_json import ExactJSONResponse
from api_funcs.deps import HostServices
from api_funcs.schemas.health import ReadinessAnswer

router = APIRouter(tags=["health"])


# Liveness refuses nothing and touches no database: its 200 and no problem response.
@router.get("/api/health", summary="Liveness")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/api/health/ready",
    summary="Readiness: the database, its schema, the audit chain's tail, the pickup target",
    response_model=ReadinessAnswer,
    responses={
        200: {"description": "Ready: every check is ok."},
        503: {"model": ReadinessAnswer, "description": "Not ready: the failing checks are named."},
    },
)
async def ready(services: HostServices) -> ExactJSONResponse:
    # A thread: the checks block on the database and the disk.
    report = await run_in_threadpool(services.readiness.check)
    return ExactJSONResponse(report.body(), status_code=200 if report.ready else 503)
