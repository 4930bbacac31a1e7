"""The bodies of api_funcs/routes/health.py."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

State = Literal["ok", "failing"]


class ReadinessAnswer(BaseModel):
    status: State
    checks: dict[str, State] = Field(
        description="database, schema, auditChain, and pickup on a host that delivers notices",
        examples=[{"database": "ok", "schema": "ok", "auditChain": "ok", "pickup": "ok"}],
    )
