"""The bodies of api_funcs/routes/pin.py."""

from __future__ import annotations

from pydantic import BaseModel, Field

from api_funcs.schemas.fields import Pin


class PinEnrolment(BaseModel):
    # Bounded, like `Pin`, for the PBKDF2 work a request can ask for.
    password: str = Field(min_length=1, max_length=1024)
    pin: Pin


class PinChange(BaseModel):
    # Absent or blank is the 422 PIN_REQUIRED rung, not a body error.
    currentPin: Pin | None = None
    newPin: Pin


class PinOutcome(BaseModel):
    status: str
