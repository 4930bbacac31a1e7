"""The money path's request and response bodies (docs/http.md): camelCase JSON, money as a JSON
number with at most two decimals, above 0 and at most MONEY_MAX (ADR-0046, the one published
maximum), parsed as Decimal."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasGenerator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)
from pydantic.alias_generators import to_snake

from api_funcs import exact_json
from api_funcs.decimal_json import UnholdableNumber
from api_funcs.pin_schema import Pin
from api_funcs.stored_text import stored_text
from shared.db.schema import AspNetUser
from shared.money.refusals import utc_text
from shared.settings import MONEY_MAX

CENT = Decimal("0.01")


def _a_json_number(value: Any) -> Any:
    # Money travels as JSON numbers, not strings; a float never reaches here (bodies
    # are parsed with parse_float=Decimal) and a bool is not a number.
    if isinstance(value, UnholdableNumber):
        # 1e1000000000000000000 is JSON, and far outside what an amount may be.
        raise ValueError("must be above 0 and at most 100000")
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ValueError("must be a JSON number")
    return value


MONEY_SCHEMA: dict[str, Any] = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": int(MONEY_MAX),
    "multipleOf": 0.01,
    "description": "An amount in the account's currency: above 0, at most 100000, at most "
    "two decimals (ADR-0046: the one published maximum).",
}

Money = Annotated[
    Decimal,
    BeforeValidator(_a_json_number),
    Field(gt=0, le=MONEY_MAX, decimal_places=2),
    WithJsonSchema(MONEY_SCHEMA),
]


def _no_surrounding_space(tag: str) -> str:
    # SQL Server's `=` ignores trailing spaces, PostgreSQL's and SQLite's do not: refused here, a
    # tag gets the same answer on every database (docs/database.md).
    if tag != tag.strip():
        raise ValueError("must not begin or end with a space")
    return tag


# Compared with AspNetUsers.AzureTag and stored beside the money: storable on every database
# (api_funcs.stored_text: no NUL, which PostgreSQL's text cannot hold and refuses to compare; no
# lone surrogate; at most the column's 64 UTF-16 code units), else a body error naming it. The
# pattern and maxLength say so in the document.
AzureTag = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[^\x00]*$",
        description="A customer's AzureTag: at most 64 UTF-16 code units (as SQL Server's "
        "nvarchar(64) counts: a character beyond the BMP is two), no NUL.",
    ),
    stored_text(AspNetUser.AzureTag),
    AfterValidator(_no_surrounding_space),
]


def cents(amount: Decimal) -> Decimal:
    """The canonical form of a validated amount (100 and 100.00 are one amount)."""
    return amount.quantize(CENT)


# What a response carries: money as a JSON number (never a string), written with every digit by
# api_funcs.exact_json (a float would drop cents past ~15 significant digits), so the model keeps
# it a Decimal: bodies are dumped in python mode and encoded by exact_json, never by pydantic.
MoneyOut = Annotated[Decimal, WithJsonSchema({"type": "number"})]
# Instants as UTC `…Z` text.
UtcInstant = Annotated[
    datetime,
    PlainSerializer(utc_text, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


# --- requests ---------------------------------------------------------------------------------


class MintBody(BaseModel):
    accountId: uuid.UUID
    recipientAzureTag: AzureTag
    amount: Money
    # Optional here: a missing PIN is the PIN rung's 422 PIN_REQUIRED, after the daily check.
    pin: Pin | None = None


class TransferBody(BaseModel):
    accountId: uuid.UUID
    recipientAzureTag: AzureTag
    amount: Money
    # Optional here: a missing authorization is the first rung, 401 AUTHORIZATION_REQUIRED.
    authorizationId: uuid.UUID | None = None


class InternalTransferBody(BaseModel):
    fromAccountId: uuid.UUID
    toAccountId: uuid.UUID
    amount: Money


class AccountAmountBody(BaseModel):
    accountId: uuid.UUID
    amount: Money


# --- responses: the document's schemas, and what renders each body ----------------------------


class Receipt(BaseModel):
    """A response body read off a shared.money receipt (its snake_case attributes), so the body
    is rendered by the very model the document publishes (`render`)."""

    model_config = ConfigDict(
        from_attributes=True, alias_generator=AliasGenerator(validation_alias=to_snake)
    )

    @classmethod
    def body(cls, receipt: object) -> dict[str, Any]:
        """The body as exact_json encodes it: money stays a Decimal (MoneyOut)."""
        return cls.model_validate(receipt).model_dump()

    @classmethod
    def render(cls, receipt: object) -> str:
        """The body's JSON text (compact; stored and replayed byte-for-byte, ADR-0009)."""
        return exact_json.dumps(cls.body(receipt))


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
