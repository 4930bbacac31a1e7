"""`POST /api/pin` (pin_enrol) and `PUT /api/pin` (pin_change), docs/http.md. The handlers only
translate; shared.identity.pin_service decides and commits."""

from __future__ import annotations

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict, Field

from api_funcs.decimal_json import DecimalJSONRoute
from api_funcs.deps import Chain, CurrentUser, HostServices
from api_funcs.pin_schema import Pin
from api_funcs.problem_docs import error_code_responses
from shared.audit.chain import AuditChainUnavailable
from shared.errors import Unauthenticated, ValidationFailed
from shared.identity.refusals import (
    InvalidPassword,
    InvalidPin,
    PinAlreadyEnrolled,
    PinLocked,
    PinRequired,
)

# The app's one body reader: bytes that are not UTF-8, or JSON nested past the recursion limit,
# are "not JSON" (400 VALIDATION_FAILED, docs/http.md), not FastAPI's generic 400.
router = APIRouter(route_class=DecimalJSONRoute, tags=["pin"])


class PinEnrolment(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Lengths bound the work a request can ask of PBKDF2; the PIN's format is the service's
    # rung (docs/http.md: after the password and the enrolment check), declared by `Pin`.
    password: str = Field(min_length=1, max_length=1024)
    pin: Pin


class PinChange(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Absent or blank is the 422 PIN_REQUIRED rung, not a body error.
    currentPin: Pin | None = None
    newPin: Pin


class PinOutcome(BaseModel):
    status: str


@router.post(
    "/api/pin",
    name="pin_enrol",
    operation_id="pin_enrol",
    summary="Enrol a PIN (behind the password)",
    status_code=status.HTTP_201_CREATED,
    responses=error_code_responses(
        (
            Unauthenticated,
            InvalidPassword,
            PinAlreadyEnrolled,
            ValidationFailed,
            AuditChainUnavailable,
        )
    ),
)
def pin_enrol(
    body: PinEnrolment, user_id: CurrentUser, services: HostServices, _: Chain
) -> PinOutcome:
    services.pin_changes.enrol(user_id, password=body.password, pin=body.pin)
    return PinOutcome(status="PinEnrolled")


@router.put(
    "/api/pin",
    name="pin_change",
    operation_id="pin_change",
    summary="Change the PIN (behind the current PIN)",
    responses=error_code_responses(
        (
            Unauthenticated,
            InvalidPin,
            PinRequired,
            PinLocked,
            ValidationFailed,
            AuditChainUnavailable,
        )
    ),
)
def pin_change(
    body: PinChange, user_id: CurrentUser, services: HostServices, _: Chain
) -> PinOutcome:
    services.pin_changes.change(user_id, current_pin=body.currentPin, new_pin=body.newPin)
    return PinOutcome(status="PinChanged")
