"""Response JSON whose numbers are exactly the Decimals the server holds (docs/http.md#bodies).
`json.dumps` writes a number only from an int or a float, which keeps ~15 significant digits
(99999999999999.99 → …98), and its `default` hook can only make a Decimal a string."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

from fastapi.responses import JSONResponse


def number_text(value: Decimal) -> str:
    """A finite Decimal as a JSON number's text, every digit kept, no exponent and no trailing
    zero (5000.0100 → 5000.01: a float's text whenever the float was exact)."""
    if not value.is_finite():
        raise ValueError("a JSON number is finite")
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def dumps(value: Any, *, ensure_ascii: bool = True) -> str:
    """Compact JSON text of `value`, each Decimal written exactly (number_text), a UUID as text."""
    if isinstance(value, Decimal):
        return number_text(value)
    if isinstance(value, dict):
        return "{" + ",".join(_member(k, v, ensure_ascii) for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(item, ensure_ascii=ensure_ascii) for item in value) + "]"
    if isinstance(value, uuid.UUID):
        return f'"{value}"'
    # str, int, bool, None, float; anything else is a TypeError, as from json.dumps.
    return json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=False)


def _member(key: Any, item: Any, ensure_ascii: bool) -> str:
    if not isinstance(key, str):
        raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
    return json.dumps(key, ensure_ascii=ensure_ascii) + ":" + dumps(item, ensure_ascii=ensure_ascii)


class ExactJSONResponse(JSONResponse):
    """Starlette's JSONResponse, the same bytes but for each Decimal, which is written exactly."""

    def render(self, content: Any) -> bytes:
        return dumps(content, ensure_ascii=False).encode("utf-8")
