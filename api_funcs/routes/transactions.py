"""The money path over HTTP (docs/http.md): the mint, the transfer, the neighbouring rails and the
allowance read. Handlers parse, call `shared.money`, and render; every rule lives there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from api_funcs.decimal_json import DecimalJSONRoute
from api_funcs.deps import Chain, CurrentUser, HostServices
from api_funcs.exact_json import ExactJSONResponse
from api_funcs.money_schemas import (
    AccountAmountBody,
    AllowanceResponse,
    InternalTransferBody,
    InternalTransferResponse,
    MintBody,
    MintResponse,
    RailResponse,
    Receipt,
    TransferBody,
    TransferResponse,
    cents,
)
from api_funcs.problem_docs import (
    REPLAYED_HEADER,
    Refusals,
    error_code_responses,
    idempotency_key_parameter,
)
from shared.audit.chain import AuditChainUnavailable
from shared.db.storable_text import unstorable_reason
from shared.db.uow import unit_of_work
from shared.errors import DomainError, LockTimeout, Unauthenticated, ValidationFailed
from shared.identity.refusals import InvalidPin, PinLocked, PinRequired
from shared.money.idempotency import MAX_KEY_LENGTH, Answer, IdempotencyClaim, request_hash
from shared.money.mint import MintRequest
from shared.money.rails import InternalTransferReceipt, RailReceipt
from shared.money.refusals import (
    AccountForbidden,
    AccountNotFound,
    AuthorizationExpired,
    AuthorizationInvalid,
    AuthorizationRequired,
    ConcurrencyConflict,
    DailyLimitExceeded,
    IdempotencyInProgress,
    IdempotencyKeyRequired,
    IdempotencyKeyReused,
    InsufficientFunds,
    OutcomeUnknown,
    PayeeInvalid,
    PayeeNotFound,
)
from shared.money.transfers import TransferOrder, TransferReceipt

router = APIRouter(route_class=DecimalJSONRoute, tags=["transactions"])

# The refusals each operation can raise, in ADR-0050's rung order, then what every operation of
# its kind can answer (docs/http.md; the document is derived from these classes).
_BEARER: Refusals = (Unauthenticated,)
_IDEMPOTENT: Refusals = (
    ValidationFailed,
    IdempotencyKeyRequired,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    LockTimeout,
    ConcurrencyConflict,
    # Audit__ChainKey unset, or the chain's tail row missing.
    AuditChainUnavailable,
    # The connection lost during the commit, and the database not reachable to ask again.
    OutcomeUnknown,
)
_ACCOUNT: Refusals = (AccountNotFound, AccountForbidden)

REFUSALS: dict[str, Refusals] = {
    "mint": (
        ValidationFailed,
        *_BEARER,
        AccountNotFound,
        PayeeNotFound,
        AccountForbidden,
        PayeeInvalid,
        DailyLimitExceeded,
        PinRequired,
        InvalidPin,
        PinLocked,
    ),
    "transfer": (
        *_IDEMPOTENT,
        *_BEARER,
        AuthorizationRequired,
        AuthorizationExpired,
        AuthorizationInvalid,
        PayeeNotFound,
        PayeeInvalid,
        DailyLimitExceeded,
        InsufficientFunds,
    ),
    "internal_transfer": (*_IDEMPOTENT, *_BEARER, *_ACCOUNT, InsufficientFunds),
    "deposit": (*_IDEMPOTENT, *_BEARER, *_ACCOUNT),
    "withdrawal": (*_IDEMPOTENT, *_BEARER, *_ACCOUNT, InsufficientFunds),
    "allowance": _BEARER,
}


def _responses(operation: str, success: int, model: type[Any], *, replayable: bool) -> Any:
    responses: dict[int | str, dict[str, Any]] = error_code_responses(REFUSALS[operation])
    ok: dict[str, Any] = {"model": model, "description": "Done."}
    if replayable:
        ok["headers"] = REPLAYED_HEADER
    responses[success] = ok
    return responses


# --- what every idempotent money operation does (ADR-0009) -------------------------------------


def _idempotency_key(request: Request) -> str:
    keys = request.headers.getlist("idempotency-key")
    if len(keys) > 1:
        # Two keys name two requests: which one would this be remembered by?
        raise _bad_key("must be sent once")
    key = keys[0] if keys else None
    if key is None or not key.strip():
        raise IdempotencyKeyRequired()
    # Stored in and compared with IdempotencyRecords.Key: a NUL failed in PostgreSQL's driver.
    reason = unstorable_reason(key, MAX_KEY_LENGTH)
    if reason is not None:
        raise _bad_key(reason)
    if key != key.strip():
        # SQL Server's `=` and unique index ignore trailing spaces; refused here, `abc` and
        # `abc ` never meet in the database (docs/database.md). HTTP strips them anyway.
        raise _bad_key("must not begin or end with a space")
    return key


def _bad_key(message: str) -> DomainError:
    # Titled for the header (the body may be fine).
    return ValidationFailed(
        "Idempotency-Key", message, title="The Idempotency-Key header is not valid."
    )


def _canonical(body: BaseModel) -> dict[str, Any]:
    """The request as its key remembers it: the parsed fields, amounts to the cent (so 100 and
    100.00 are one request)."""
    amounts = {name: str(cents(value)) for name, value in body if isinstance(value, Decimal)}
    return {**body.model_dump(mode="json"), **amounts}


def _answer(answer: Answer) -> Response:
    # The stored text itself, so a replay is byte-for-byte the first answer (ADR-0009).
    headers = {"Idempotency-Replayed": "true"} if answer.replayed else None
    return Response(
        content=answer.body,
        status_code=answer.status,
        media_type="application/json",
        headers=headers,
    )


Route = TypeVar("Route", bound=Callable[..., Any])
R = TypeVar("R")


@dataclass(frozen=True)
class MoneyOperation(Generic[R]):
    """An idempotent money operation: its Function name, route and success body (201), which
    renders the service's receipt (R)."""

    name: str
    path: str
    summary: str
    response: type[Receipt]

    def route(self) -> Callable[[Route], Route]:
        """The operation's POST, declaring its refusals, the Idempotency-Key it requires and
        the Idempotency-Replayed header of a replay."""
        return router.post(
            self.path,
            name=self.name,
            operation_id=self.name,
            summary=self.summary,
            status_code=201,
            response_model=None,
            responses=_responses(self.name, 201, self.response, replayable=True),
            openapi_extra=idempotency_key_parameter(),
        )

    def claim(self, request: Request, user_id: str, body: BaseModel) -> IdempotencyClaim[R]:
        """The request under its Idempotency-Key, for the service's money transaction to claim:
        its success is 201 with the receipt rendered by the published model."""
        key = _idempotency_key(request)
        hash_ = request_hash(self.name, _canonical(body))
        return IdempotencyClaim(user_id, self.name, key, hash_, 201, self.response.render)


TRANSFER = MoneyOperation[TransferReceipt](
    "transfer",
    "/api/transactions/transfer",
    "Spend a transfer authorization: an external transfer under the daily limit",
    TransferResponse,
)
INTERNAL_TRANSFER = MoneyOperation[InternalTransferReceipt](
    "internal_transfer",
    "/api/transactions/internal-transfer",
    "Move money between two of the caller's accounts (not counted, ADR-0050 D2)",
    InternalTransferResponse,
)
DEPOSIT = MoneyOperation[RailReceipt](
    "deposit",
    "/api/transactions/deposit",
    "Deposit into one of the caller's accounts",
    RailResponse,
)
WITHDRAWAL = MoneyOperation[RailReceipt](
    "withdrawal",
    "/api/transactions/withdrawal",
    "Withdraw from one of the caller's accounts (not counted, ADR-0056)",
    RailResponse,
)


# --- routes -----------------------------------------------------------------------------------


@router.post(
    "/api/transactions/transfer/authorizations",
    name="mint",
    operation_id="mint",
    summary="Check the PIN and issue a transfer authorization (ADR-0042, ADR-0050 D4.1)",
    status_code=201,
    response_model=None,
    responses=_responses("mint", 201, MintResponse, replayable=False),
)
def mint(body: MintBody, user_id: CurrentUser, services: HostServices) -> ExactJSONResponse:
    request = MintRequest(body.accountId, body.recipientAzureTag, cents(body.amount), body.pin)
    grant = services.mint.mint(user_id, request)
    return ExactJSONResponse(MintResponse.body(grant), status_code=201)


@TRANSFER.route()
def transfer(
    request: Request, body: TransferBody, user_id: CurrentUser, services: HostServices, _: Chain
) -> Response:
    claim = TRANSFER.claim(request, user_id, body)
    order = TransferOrder(
        body.accountId, body.recipientAzureTag, cents(body.amount), body.authorizationId
    )
    return _answer(services.transfers.transfer(claim, order))


@INTERNAL_TRANSFER.route()
def internal_transfer(
    request: Request,
    body: InternalTransferBody,
    user_id: CurrentUser,
    services: HostServices,
    _: Chain,
) -> Response:
    claim = INTERNAL_TRANSFER.claim(request, user_id, body)
    source, target, amount = body.fromAccountId, body.toAccountId, cents(body.amount)
    return _answer(services.rails.internal_transfer(claim, source, target, amount))


@DEPOSIT.route()
def deposit(
    request: Request,
    body: AccountAmountBody,
    user_id: CurrentUser,
    services: HostServices,
    _: Chain,
) -> Response:
    claim = DEPOSIT.claim(request, user_id, body)
    return _answer(services.rails.deposit(claim, body.accountId, cents(body.amount)))


@WITHDRAWAL.route()
def withdrawal(
    request: Request,
    body: AccountAmountBody,
    user_id: CurrentUser,
    services: HostServices,
    _: Chain,
) -> Response:
    claim = WITHDRAWAL.claim(request, user_id, body)
    return _answer(services.rails.withdrawal(claim, body.accountId, cents(body.amount)))


@router.get(
    "/api/transactions/allowance",
    name="allowance",
    operation_id="allowance",
    summary="What today's external transfers have left (beyond the ADR: its D8 read)",
    response_model=None,
    responses=_responses("allowance", 200, AllowanceResponse, replayable=False),
)
def allowance(user_id: CurrentUser, services: HostServices) -> ExactJSONResponse:
    with unit_of_work(services.engine) as session:
        today = services.limit.allowance(session, user_id)
    return ExactJSONResponse(AllowanceResponse.body(today))
