"""The money path over HTTP (DESIGN §5): the mint, the transfer, the neighbouring rails and the
allowance read. Handlers parse, call `shared.money`, and render; every rule lives there."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from api_funcs.context import AppContext
from api_funcs.decimal_json import DecimalJSONRoute
from api_funcs.deps import Chain, Context, CurrentUser
from api_funcs.money_schemas import (
    AccountAmountBody,
    AllowanceResponse,
    InternalTransferBody,
    InternalTransferResponse,
    MintBody,
    MintResponse,
    RailResponse,
    TransferBody,
    TransferResponse,
    cents,
    money_number,
)
from api_funcs.problem_docs import REPLAYED_HEADER, error_code_responses, idempotency_key_parameter
from shared.audit.chain import AuditChain
from shared.db.uow import unit_of_work
from shared.errors import DomainError
from shared.identity.pins import verify_pin
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.idempotency import MAX_KEY_LENGTH, IdempotencyKeys, StoredResponse
from shared.money.mint import MintRequest, TransferMint
from shared.money.rails import AccountRails, InternalTransferReceipt, RailReceipt
from shared.money.refusals import IdempotencyKeyRequired, utc_text
from shared.money.transfers import TransferOrder, TransferReceipt, TransferService

router = APIRouter(route_class=DecimalJSONRoute, tags=["transactions"])

# The errorCodes each operation can answer, by status (DESIGN §5; the document declares them).
_BEARER = {401: ["UNAUTHENTICATED"]}
_BODY = {400: ["VALIDATION_FAILED"]}
_IDEMPOTENT = {
    400: ["VALIDATION_FAILED", "IDEMPOTENCY_KEY_REQUIRED"],
    409: ["IDEMPOTENCY_IN_PROGRESS"],
    422: ["IDEMPOTENCY_KEY_REUSED"],
    # AUDIT_CHAIN_UNAVAILABLE: Audit__ChainKey unset, or the chain's tail row missing.
    503: ["LOCK_TIMEOUT", "CONCURRENCY_CONFLICT", "AUDIT_CHAIN_UNAVAILABLE"],
}


def _merge(*tables: dict[int, list[str]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for table in tables:
        for status, codes in table.items():
            out.setdefault(status, []).extend(codes)
    return out


ERROR_CODES: dict[str, dict[int, list[str]]] = {
    # ADR-0050's rung table, then what every operation of its kind can answer.
    "mint": _merge(
        _BODY,
        _BEARER,
        {
            404: ["ACCOUNT_NOT_FOUND", "PAYEE_NOT_FOUND"],
            403: ["ACCOUNT_FORBIDDEN"],
            422: ["PAYEE_INVALID", "DAILY_LIMIT_EXCEEDED", "PIN_REQUIRED"],
            401: ["INVALID_PIN"],
            429: ["PIN_LOCKED"],
        },
    ),
    "transfer": _merge(
        _IDEMPOTENT,
        _BEARER,
        {
            401: ["AUTHORIZATION_REQUIRED", "AUTHORIZATION_EXPIRED", "AUTHORIZATION_INVALID"],
            404: ["PAYEE_NOT_FOUND"],
            422: ["PAYEE_INVALID", "DAILY_LIMIT_EXCEEDED", "INSUFFICIENT_FUNDS"],
        },
    ),
    "internal_transfer": _merge(
        _IDEMPOTENT,
        _BEARER,
        {404: ["ACCOUNT_NOT_FOUND"], 403: ["ACCOUNT_FORBIDDEN"], 422: ["INSUFFICIENT_FUNDS"]},
    ),
    "deposit": _merge(
        _IDEMPOTENT, _BEARER, {404: ["ACCOUNT_NOT_FOUND"], 403: ["ACCOUNT_FORBIDDEN"]}
    ),
    "withdrawal": _merge(
        _IDEMPOTENT,
        _BEARER,
        {404: ["ACCOUNT_NOT_FOUND"], 403: ["ACCOUNT_FORBIDDEN"], 422: ["INSUFFICIENT_FUNDS"]},
    ),
    "allowance": dict(_BEARER),
}


def _responses(operation: str, success: int, model: type[Any], *, replayable: bool) -> Any:
    responses: dict[int | str, dict[str, Any]] = error_code_responses(ERROR_CODES[operation])
    ok: dict[str, Any] = {"model": model, "description": "Done."}
    if replayable:
        ok["headers"] = REPLAYED_HEADER
    responses[success] = ok
    return responses


# --- collaborators, built per request from the host's context ----------------------------------


def _limit(ctx: AppContext) -> DailyOutflowLimit:
    return DailyOutflowLimit(ctx.settings.DailyLimit.Amount, ctx.clock)


def _lock_timeout(ctx: AppContext) -> int:
    return ctx.settings.DailyLimit.LockTimeoutSeconds


def _idempotency_key(request: Request) -> str:
    key = request.headers.get("idempotency-key")
    if key is None or not key.strip():
        raise IdempotencyKeyRequired()
    if len(key) > MAX_KEY_LENGTH:
        raise DomainError(
            "VALIDATION_FAILED",
            "The request body is not valid.",
            status=400,
            errors=[{"field": "Idempotency-Key", "message": "at most 255 characters"}],
        )
    return key


def _json_text(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def _answer(stored: StoredResponse, replayed: bool) -> Response:
    # The stored text itself, so a replay is byte-for-byte the first answer (ADR-0009).
    headers = {"Idempotency-Replayed": "true"} if replayed else None
    return Response(
        content=stored.body,
        status_code=stored.status,
        media_type="application/json",
        headers=headers,
    )


Store = Callable[[Session, str], None]


def _idempotent(
    ctx: AppContext,
    request: Request,
    user_id: str,
    operation: str,
    canonical: dict[str, Any],
    action: Callable[[Store], object],
) -> Response:
    key = _idempotency_key(request)
    keys = IdempotencyKeys(ctx.engine, ctx.clock, lock_timeout_seconds=_lock_timeout(ctx))
    stored, replayed = keys.run(user_id, operation, key, canonical, action, status=201)
    return _answer(stored, replayed)


# --- renderers --------------------------------------------------------------------------------


def _transfer_body(r: TransferReceipt) -> str:
    return _json_text(
        {
            "transactionId": str(r.transaction_id),
            "accountId": str(r.account_id),
            "recipientAzureTag": r.recipient_azure_tag,
            "amount": money_number(r.amount),
            "balance": money_number(r.balance),
            "createdAt": utc_text(r.created_at),
        }
    )


def _internal_body(r: InternalTransferReceipt) -> str:
    return _json_text(
        {
            "transactionId": str(r.transaction_id),
            "fromAccountId": str(r.from_account_id),
            "toAccountId": str(r.to_account_id),
            "amount": money_number(r.amount),
            "balance": money_number(r.balance),
            "createdAt": utc_text(r.created_at),
        }
    )


def _rail_body(r: RailReceipt) -> str:
    return _json_text(
        {
            "transactionId": str(r.transaction_id),
            "accountId": str(r.account_id),
            "amount": money_number(r.amount),
            "balance": money_number(r.balance),
            "createdAt": utc_text(r.created_at),
        }
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
def mint(body: MintBody, user_id: CurrentUser, ctx: Context) -> JSONResponse:
    settings = ctx.settings
    service = TransferMint(
        ctx.engine,
        ctx.clock,
        _limit(ctx),
        functools.partial(verify_pin, ctx.engine, ctx.clock, settings.Pin),
        authorization_seconds=settings.Transfers.AuthorizationSeconds,
    )
    grant = service.mint(
        user_id,
        MintRequest(body.accountId, body.recipientAzureTag, cents(body.amount), body.pin),
    )
    return JSONResponse(
        {
            "authorizationId": str(grant.authorization_id),
            "expiresAt": utc_text(grant.expires_at),
            "accountId": str(grant.account_id),
            "recipientAzureTag": grant.recipient_azure_tag,
            "amount": money_number(grant.amount),
        },
        status_code=201,
    )


@router.post(
    "/api/transactions/transfer",
    name="transfer",
    operation_id="transfer",
    summary="Spend a transfer authorization: an external transfer under the daily limit",
    status_code=201,
    response_model=None,
    responses=_responses("transfer", 201, TransferResponse, replayable=True),
    openapi_extra=idempotency_key_parameter(),
)
def transfer(
    request: Request, body: TransferBody, user_id: CurrentUser, ctx: Context, chain: Chain
) -> Response:
    amount = cents(body.amount)
    order = TransferOrder(body.accountId, body.recipientAzureTag, amount, body.authorizationId)
    service = TransferService(
        ctx.engine,
        ctx.clock,
        _limit(ctx),
        DailyLimitLock(_lock_timeout(ctx)),
        chain,
    )
    canonical = {
        "accountId": str(order.account_id),
        "recipientAzureTag": order.recipient_azure_tag,
        "amount": str(amount),
        "authorizationId": str(order.authorization_id) if order.authorization_id else None,
    }
    return _idempotent(
        ctx,
        request,
        user_id,
        "transfer",
        canonical,
        lambda store: service.transfer(
            user_id, order, on_success=lambda s, r: store(s, _transfer_body(r))
        ),
    )


def _rails(ctx: AppContext, chain: AuditChain) -> AccountRails:
    return AccountRails(ctx.engine, ctx.clock, chain, busy_timeout_seconds=_lock_timeout(ctx))


@router.post(
    "/api/transactions/internal-transfer",
    name="internal_transfer",
    operation_id="internal_transfer",
    summary="Move money between two of the caller's accounts (not counted, ADR-0050 D2)",
    status_code=201,
    response_model=None,
    responses=_responses("internal_transfer", 201, InternalTransferResponse, replayable=True),
    openapi_extra=idempotency_key_parameter(),
)
def internal_transfer(
    request: Request, body: InternalTransferBody, user_id: CurrentUser, ctx: Context, chain: Chain
) -> Response:
    amount = cents(body.amount)
    rails = _rails(ctx, chain)
    canonical = {
        "fromAccountId": str(body.fromAccountId),
        "toAccountId": str(body.toAccountId),
        "amount": str(amount),
    }
    return _idempotent(
        ctx,
        request,
        user_id,
        "internal_transfer",
        canonical,
        lambda store: rails.internal_transfer(
            user_id,
            body.fromAccountId,
            body.toAccountId,
            amount,
            on_success=lambda s, r: store(s, _internal_body(r)),
        ),
    )


@router.post(
    "/api/transactions/deposit",
    name="deposit",
    operation_id="deposit",
    summary="Deposit into one of the caller's accounts",
    status_code=201,
    response_model=None,
    responses=_responses("deposit", 201, RailResponse, replayable=True),
    openapi_extra=idempotency_key_parameter(),
)
def deposit(
    request: Request, body: AccountAmountBody, user_id: CurrentUser, ctx: Context, chain: Chain
) -> Response:
    amount = cents(body.amount)
    rails = _rails(ctx, chain)
    canonical = {"accountId": str(body.accountId), "amount": str(amount)}
    return _idempotent(
        ctx,
        request,
        user_id,
        "deposit",
        canonical,
        lambda store: rails.deposit(
            user_id, body.accountId, amount, on_success=lambda s, r: store(s, _rail_body(r))
        ),
    )


@router.post(
    "/api/transactions/withdrawal",
    name="withdrawal",
    operation_id="withdrawal",
    summary="Withdraw from one of the caller's accounts (not counted, ADR-0056)",
    status_code=201,
    response_model=None,
    responses=_responses("withdrawal", 201, RailResponse, replayable=True),
    openapi_extra=idempotency_key_parameter(),
)
def withdrawal(
    request: Request, body: AccountAmountBody, user_id: CurrentUser, ctx: Context, chain: Chain
) -> Response:
    amount = cents(body.amount)
    rails = _rails(ctx, chain)
    canonical = {"accountId": str(body.accountId), "amount": str(amount)}
    return _idempotent(
        ctx,
        request,
        user_id,
        "withdrawal",
        canonical,
        lambda store: rails.withdrawal(
            user_id, body.accountId, amount, on_success=lambda s, r: store(s, _rail_body(r))
        ),
    )


@router.get(
    "/api/transactions/allowance",
    name="allowance",
    operation_id="allowance",
    summary="What today's external transfers have left (beyond the ADR: its D8 read)",
    response_model=None,
    responses=_responses("allowance", 200, AllowanceResponse, replayable=False),
)
def allowance(user_id: CurrentUser, ctx: Context) -> JSONResponse:
    with unit_of_work(ctx.engine) as session:
        a = _limit(ctx).allowance(session, user_id)
    return JSONResponse(
        {
            "limit": money_number(a.limit),
            "used": money_number(a.used),
            "remaining": money_number(a.remaining),
            "resetsAt": utc_text(a.resets_at),
        }
    )
