"""`GET /api/health`: anonymous, touches no secret and no database."""

from __future__ import annotations

from fastapi import APIRouter

from api_funcs.problem_docs import error_code_responses

router = APIRouter()


@router.get(
    "/api/health",
    name="health",
    operation_id="health",
    tags=["health"],
    summary="Liveness",
    # DESIGN §5: health refuses nothing and touches no database; it declares its 200 and no
    # problem response.
    responses=error_code_responses((), touches_database=False),
)
async def health() -> dict[str, str]:
    return {"status": "ok"}
