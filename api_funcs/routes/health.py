"""`GET /api/health`: anonymous, touches no secret and no database."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()


@router.get("/api/health", name="health", tags=["health"], summary="Liveness")
async def health() -> dict[str, str]:
    return {"status": "ok"}
