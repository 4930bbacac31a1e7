"""Every request and response body the OpenAPI document publishes, and the field types they share
(docs/http.md#bodies). Route modules declare none of their own."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

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
from shared.db.schema import AspNetUser
from shared.db.storable_text import column_length, unstorable_reason
from shared.identity.pins import PIN_PATTERN
from shared.money.refusals import utc_text
from shared.settings import MONEY_MAX

# --- field types -------------------------------------------------------------------------------


def _a_json_number(value: Any) -> Any:
    # Bodies parse fractions as Decimal (api_funcs.decimal_json); a string or a bool is no number.
    if isinstance(value, UnholdableNumber):
        raise ValueError("must be above 0 and at most 100000")
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ValueError("must be a JSON number")
    return value


Money = Annotated[
    Decimal,
    BeforeValidator(_a_json_number),
    Field(gt=0, le=MONEY_MAX, decimal_places=2),
    WithJsonSchema(
        {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": int(MONEY_MAX),
            "multipleOf": 0.01,
            "description": "An amount in the account's currency: above 0, at most 100000, at "
            "most two decimals (ADR-0046: the one published maximum).",
        }
    ),
]


def cents(amount: Decimal) -> Decimal:
    """The canonical form of a validated amount (100 and 100.00 are one amount)."""
    return amount.quantize(Decimal("0.01"))


def compared_text_refusal(text: str, units: int) -> str | None:
    """Why `text` is no value every database stores and compares alike in a column of `units`
    (docs/money.md#request-bodies), or None; SQL Server's `=` ignores trailing spaces."""
    reason = unstorable_reason(text, units)
    if reason is None and text != text.strip():
        return "must not begin or end with a space"
    return reason


_TAG_UNITS = column_length(AspNetUser.AzureTag)


def _storable_tag(tag: str) -> str:
    reason = compared_text_refusal(tag, _TAG_UNITS)
    if reason is not None:
        raise ValueError(reason)
    return tag


AzureTag = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[^\x00]*$",
        description="A customer's AzureTag: at most 64 UTF-16 code units (as SQL Server's "
        "nvarchar(64) counts: a character beyond the BMP is two), no NUL.",
    ),
    AfterValidator(_storable_tag),
]

# The pattern only documents a PIN: its format is the service's rung (docs/http.md), so the one
# body rule is the bound on the PBKDF2 work a request can ask for.
Pin = Annotated[
    str,
    Field(max_length=64),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": f"^{PIN_PATTERN.pattern}$",
            "minLength": 4,
            "maxLength": 6,
            "description": "4 to 6 ASCII digits.",
        }
    ),
]

# Money out keeps its Decimal: bodies are dumped in python mode and written by exact_json.
MoneyOut = Annotated[Decimal, WithJsonSchema({"type": "number"})]
UtcInstant = Annotated[
    datetime,
    PlainSerializer(utc_text, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]

# --- requests ----------------------------------------------------------------------------------


class PinEnrolment(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Bounded, like `Pin`, for the PBKDF2 work a request can ask for.
    password: str = Field(min_length=1, max_length=1024)
    pin: Pin


class PinChange(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Absent or blank is the 422 PIN_REQUIRED rung, not a body error.
    currentPin: Pin | None = None
    newPin: Pin


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


# --- responses ---------------------------------------------------------------------------------

State = Literal["ok", "failing"]


class ReadinessAnswer(BaseModel):
    status: State
    checks: dict[str, State] = Field(
        description="database, schema, auditChain, and pickup on a host that delivers notices",
        examples=[{"database": "ok", "schema": "ok", "auditChain": "ok", "pickup": "ok"}],
    )


class AccountView(BaseModel):
    id: uuid.UUID
    name: str
    balance: MoneyOut
    currency: str
    closed: bool


class PinOutcome(BaseModel):
    status: str


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
