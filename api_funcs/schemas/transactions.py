"""The bodies of api_funcs/routes/transactions.py."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import AliasGenerator, BaseModel, ConfigDict
from pydantic.alias_generators import to_snake

from api_funcs.decimal_json import MoneyOut, dumps
from api_funcs.schemas.fields import AzureTag, Money, Pin, UtcInstant


class MintBody(BaseModel):
    accountId: uuid.UUID
    recipientAzureTag: AzureTag
    amount: Money
    # A missing PIN is the PIN rung's 422 PIN_REQUIRED, after the daily check.
    pin: Pin | None = None


class TransferBody(BaseModel):
    accountId: uuid.UUID
    recipientAzureTag: AzureTag
    amount: Money
    # A missing authorization is the first rung, 401 AUTHORIZATION_REQUIRED.
    authorizationId: uuid.UUID | None = None


class InternalTransferBody(BaseModel):
    fromAccountId: uuid.UUID
    toAccountId: uuid.UUID
    amount: Money


class AccountAmountBody(BaseModel):
    accountId: uuid.UUID
    amount: Money


class Receipt(BaseModel):
    # Read off a shared.money receipt's snake_case attributes, so the body is rendered by the
    # very model the document publishes.
    model_config = ConfigDict(
        from_attributes=True, alias_generator=AliasGenerator(validation_alias=to_snake)
    )

    @classmethod
    def body(cls, receipt: object) -> dict[str, Any]:
        return cls.model_validate(receipt).model_dump()

    @classmethod
    def render(cls, receipt: object) -> str:
        """The body's JSON text, stored and replayed byte for byte (docs/http.md#idempotency)."""
        return dumps(cls.body(receipt))


class MintResponse(Receipt):
    authorizationId: uuid.UUID
    expiresAt: UtcInstant
    accountId: uuid.UUID
    recipientAzureTag: str
    amount: MoneyOut


class TransferResponse(Receipt):
    transactionId: uuid.UUID
    accountId: uuid.UUID
    recipientAzureTag: str
    amount: MoneyOut
    balance: MoneyOut
    createdAt: UtcInstant


class InternalTransferResponse(Receipt):
    transactionId: uuid.UUID
    fromAccountId: uuid.UUID
    toAccountId: uuid.UUID
    amount: MoneyOut
    balance: MoneyOut
    createdAt: UtcInstant


class RailResponse(Receipt):
    transactionId: uuid.UUID
    accountId: uuid.UUID
    amount: MoneyOut
    balance: MoneyOut
    createdAt: UtcInstant


class AllowanceResponse(Receipt):
    limit: MoneyOut
    used: MoneyOut
    remaining: MoneyOut
    resetsAt: UtcInstant
