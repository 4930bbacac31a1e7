"""`POST /api/pin` (pin_enrol) and `PUT /api/pin` (pin_change): shared.identity decides, commits."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from api_funcs.decimal_json import DecimalJSONRoute
from api_funcs.deps import AUDITED, CurrentUser, HostServices
from api_funcs.problem_docs import Refusals, error_code_responses
from api_funcs.schemas.pin import PinChange, PinEnrolment, PinOutcome
from shared.audit.chain import AuditChainUnavailable
from shared.errors import DomainError, Unauthenticated, ValidationFailed
from shared.identity import refusals as identity

router = APIRouter(route_class=DecimalJSONRoute, tags=["pin"], dependencies=[AUDITED])


def _responses(*rungs: type[DomainError], unknown: Refusals) -> Any:
    # Besides its own rungs, every PIN write answers for the caller's token, a malformed PIN, the
    # audit chain it writes to and, last, a commit of its own whose outcome is `unknown`.
    return error_code_responses(
        (Unauthenticated, *rungs, ValidationFailed, AuditChainUnavailable, *unknown)
    )


@router.post(
    "/api/pin",
    summary="Enrol a PIN (behind the password)",
    status_code=status.HTTP_201_CREATED,
    responses=_responses(
        identity.InvalidPassword,
        identity.PinAlreadyEnrolled,
        unknown=(identity.PinEnrolmentOutcomeUnknown,),
    ),
)
def pin_enrol(body: PinEnrolment, user_id: CurrentUser, services: HostServices) -> PinOutcome:
    services.pin_changes.enrol(user_id, password=body.password, pin=body.pin)
    return PinOutcome(status="PinEnrolled")


@router.put(
    "/api/pin",
    summary="Change the PIN (behind the current PIN)",
    responses=_responses(
        identity.InvalidPin,
        identity.PinRequired,
        identity.PinLocked,
        # The PIN check's commit, then the change's: the same code, each its own title.
        unknown=(identity.PinAttemptOutcomeUnknown, identity.PinChangeOutcomeUnknown),
    ),
)
def pin_change(body: PinChange, user_id: CurrentUser, services: HostServices) -> PinOutcome:
    services.pin_changes.change(user_id, current_pin=body.currentPin, new_pin=body.newPin)
    return PinOutcome(status="PinChanged")
