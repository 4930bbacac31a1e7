"""The money path over HTTP (docs/http.md): parse, call `shared.money` (every rule), render."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from api_funcs.decimal_json import DecimalJSONRoute, ExactJSONResponse, cents
from api_funcs.deps import AUDITED, CurrentUser, HostServices
from api_funcs.problem_docs import Refusals, error_code_responses
from api_funcs.schemas import transactions as bodies
from api_funcs.schemas.fields import compared_text_refusal
from shared.audit.chain import AuditChainUnavailable
from shared.db.uow import unit_of_work
from shared.errors import LockTimeout, Unauthenticated, ValidationFailed
from shared.identity.refusals import InvalidPin, PinAttemptOutcomeUnknown, PinLocked, PinRequired
from shared.money import refusals as money
from shared.money.idempotency import MAX_KEY_LENGTH, Answer, IdempotencyClaim, request_hash
from shared.money.mint import MintRequest
from shared.money.rails import InternalTransferReceipt, RailReceipt
from shared.money.transfers import TransferOrder, TransferReceipt

router = APIRouter(route_class=DecimalJSONRoute, tags=["transactions"])

# The refusals each operation can raise, in rung order (docs/decisions.md#adr-0050-rung-table),
# then what every operation of its kind can answer; the document is derived from these classes.
_IDEMPOTENT: Refusals = (
    ValidationFailed,
    money.IdempotencyKeyRequired,
    money.IdempotencyInProgress,
    money.IdempotencyKeyReused,
    LockTimeout,
    money.ConcurrencyConflict,
    AuditChainUnavailable,  # Audit__ChainKey unset, or the chain's tail row missing
    money.OutcomeUnknown,  # the commit sent and its outcome not learnt (docs/http.md#faults)
    Unauthenticated,
)
_ACCOUNT: Refusals = (money.AccountNotFound, money.AccountForbidden)

REFUSALS: dict[str, Refusals] = {
    "mint": (
        ValidationFailed,
        Unauthenticated,
        money.AccountNotFound,
        money.PayeeNotFound,
        money.AccountForbidden,
        money.PayeeInvalid,
        money.DailyLimitExceeded,
        PinRequired,
        InvalidPin,
        PinLocked,
        # A commit of the PIN check's or of the mint's own, sent and its outcome not learnt.
        PinAttemptOutcomeUnknown,
        money.MintOutcomeUnknown,
    ),
    "transfer": (
        *_IDEMPOTENT,
        money.AuthorizationRequired,
        money.AuthorizationExpired,
        money.AuthorizationInvalid,
        money.PayeeNotFound,
        money.PayeeInvalid,
        money.DailyLimitExceeded,
        money.InsufficientFunds,
    ),
    "internal_transfer": (*_IDEMPOTENT, *_ACCOUNT, money.InsufficientFunds),
    "deposit": (*_IDEMPOTENT, *_ACCOUNT),
    "withdrawal": (*_IDEMPOTENT, *_ACCOUNT, money.InsufficientFunds),
    "allowance": (Unauthenticated,),
}


def _responses(operation: str, success: int, model: type[Any], **ok: Any) -> Any:
    responses = error_code_responses(REFUSALS[operation])
    return {**responses, success: {"model": model, "description": "Done.", **ok}}


# A money operation's `openapi_extra`: the handler reads the header itself, so its absence is
# 400 IDEMPOTENCY_KEY_REQUIRED, not a generic 400.
IDEMPOTENCY_KEY_PARAMETER = {
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": True,
            "description": "Unique per intended operation (ADR-0009); a retry with the same key "
            "and body replays the first success with Idempotency-Replayed: true. Sent once: two "
            "of them are 400 VALIDATION_FAILED naming Idempotency-Key.",
            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
        }
    ]
}
REPLAYED_HEADER = {
    "Idempotency-Replayed": {
        "description": "`true` when this is the stored answer to an earlier request with the "
        "same key and body.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}


def _idempotency_key(request: Request) -> str:
    keys = request.headers.getlist("idempotency-key")
    if len(keys) < 2 and not "".join(keys).strip():
        raise money.IdempotencyKeyRequired()
    # Two keys name two requests (which would it be remembered by?); one is compared with
    # IdempotencyRecords.Key, whose unique index on SQL Server takes `abc` and `abc ` as one key.
    reason = "must be sent once" if keys[1:] else compared_text_refusal(keys[0], MAX_KEY_LENGTH)
    if reason is not None:
        # Titled for the header (the body may be fine).
        title = "The Idempotency-Key header is not valid."
        raise ValidationFailed("Idempotency-Key", reason, title=title)
    return keys[0]


def _answer(answer: Answer) -> Response:
    # The stored text itself, so a replay is byte for byte the first answer.
    headers = {"Idempotency-Replayed": "true"} if answer.replayed else None
    return Response(answer.body, answer.status, headers, media_type="application/json")


Route = TypeVar("Route", bound=Callable[..., Any])
R = TypeVar("R")


@dataclass(frozen=True)
class MoneyOperation(Generic[R]):
    """An idempotent money operation at /api/transactions/<name>, its 201 body rendering R."""

    name: str
    summary: str
    response: type[bodies.Receipt]

    def route(self) -> Callable[[Route], Route]:
        return router.post(
            f"/api/transactions/{self.name.replace('_', '-')}",
            name=self.name,
            summary=self.summary,
            status_code=201,
            response_model=None,
            responses=_responses(self.name, 201, self.response, headers=REPLAYED_HEADER),
            openapi_extra=IDEMPOTENCY_KEY_PARAMETER,
            dependencies=[AUDITED],
        )

    def claim(self, request: Request, user_id: str, body: BaseModel) -> IdempotencyClaim[R]:
        """The request under its Idempotency-Key, for the service's money transaction to claim."""
        key = _idempotency_key(request)
        # Amounts to the cent, so 100 and 100.00 are one request.
        amounts = {name: str(cents(value)) for name, value in body if isinstance(value, Decimal)}
        hash_ = request_hash(self.name, {**body.model_dump(mode="json"), **amounts})
        return IdempotencyClaim(user_id, self.name, key, hash_, 201, self.response.render)


TRANSFER = MoneyOperation[TransferReceipt](
    "transfer",
    "Spend a transfer authorization: an external transfer under the daily limit",
    bodies.TransferResponse,
)
INTERNAL_TRANSFER = MoneyOperation[InternalTransferReceipt](
    "internal_transfer",
    "Move money between two of the caller's accounts (not counted, ADR-0050 D2)",
    bodies.InternalTransferResponse,
)
DEPOSIT = MoneyOperation[RailReceipt](
    "deposit", "Deposit into one of the caller's accounts", bodies.RailResponse
)
WITHDRAWAL = MoneyOperation[RailReceipt](
    "withdrawal",
    "Withdraw from one of the caller's accounts (not counted, ADR-0056)",
    bodies.RailResponse,
)


@router.post(
    "/api/transactions/transfer/authorizations",
    summary="Check the PIN and issue a transfer authorization (ADR-0042, ADR-0050 D4.1)",
    status_code=201,
    response_model=None,
    responses=_responses("mint", 201, bodies.MintResponse),
)
def mint(body: bodies.MintBody, user_id: CurrentUser, services: HostServices) -> ExactJSONResponse:
    request = MintRequest(body.accountId, body.recipientAzureTag, cents(body.amount), body.pin)
    grant = services.mint.mint(user_id, request)
    return ExactJSONResponse(bodies.MintResponse.body(grant), status_code=201)


@TRANSFER.route()
def transfer(
    request: Request, body: bodies.TransferBody, user_id: CurrentUser, services: HostServices
) -> Response:
    claim = TRANSFER.claim(request, user_id, body)
    amount = cents(body.amount)
    order = TransferOrder(body.accountId, body.recipientAzureTag, amount, body.authorizationId)
    return _answer(services.transfers.transfer(claim, order))


@INTERNAL_TRANSFER.route()
def internal_transfer(
    request: Request,
    body: bodies.InternalTransferBody,
    user_id: CurrentUser,
    services: HostServices,
) -> Response:
    claim = INTERNAL_TRANSFER.claim(request, user_id, body)
    source, target, amount = body.fromAccountId, body.toAccountId, cents(body.amount)
    return _answer(services.rails.internal_transfer(claim, source, target, amount))


@DEPOSIT.route()
def deposit(
    request: Request, body: bodies.AccountAmountBody, user_id: CurrentUser, services: HostServices
) -> Response:
    claim = DEPOSIT.claim(request, user_id, body)
    return _answer(services.rails.deposit(claim, body.accountId, cents(body.amount)))


@WITHDRAWAL.route()
def withdrawal(
    request: Request, body: bodies.AccountAmountBody, user_id: CurrentUser, services: HostServices
) -> Response:
    claim = WITHDRAWAL.claim(request, user_id, body)
    return _answer(services.rails.withdrawal(claim, body.accountId, cents(body.amount)))


@router.get(
    "/api/transactions/allowance",
    summary="What today's external transfers have left (beyond the ADR: its D8 read)",
    response_model=None,
    responses=_responses("allowance", 200, bodies.AllowanceResponse),
)
def allowance(user_id: CurrentUser, services: HostServices) -> ExactJSONResponse:
    with unit_of_work(services.engine) as session:
        today = services.limit.allowance(session, user_id)
    return ExactJSONResponse(bodies.AllowanceResponse.body(today))
