"""The field types the request bodies share (money out is api_funcs.decimal_json.MoneyOut)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, WithJsonSchema

from api_funcs.decimal_json import UnholdableNumber
from shared.clock import utc_text
from shared.db.schema import AspNetUser
from shared.db.types import column_length, unstorable_reason
from shared.identity.pins import PIN_PATTERN
from shared.settings import MONEY_MAX


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

UtcInstant = Annotated[
    datetime,
    PlainSerializer(utc_text, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
