"""JSON with Decimals both ways, never a float (docs/http.md#bodies): a body's fractions are read
as the digits sent, and each Decimal is written exactly, where `json.dumps` keeps ~15 digits."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Annotated, Any, Final

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import WithJsonSchema

# Money out keeps its Decimal: bodies are dumped in python mode and written by dumps below.
MoneyOut = Annotated[Decimal, WithJsonSchema({"type": "number"})]


def cents(amount: Decimal) -> Decimal:
    """The canonical form of an amount (100 and 100.00 are one amount)."""
    return amount.quantize(Decimal("0.01"))


class UnholdableNumber:
    """A JSON number past the decimal module's exponent limit or Python's digit limit, keeping
    none of its digits: a refusal never echoes what the caller sent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNHOLDABLE"


UNHOLDABLE: Final = UnholdableNumber()


def _or_unholdable(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parsed(text: str) -> Any:
        try:
            return parse(text)
        except (ArithmeticError, ValueError):
            return UNHOLDABLE

    return parsed


def loads_decimal(body: bytes | str) -> Any:
    """JSON with fractions as Decimal; anything unparsable is a JSONDecodeError."""
    try:
        return json.loads(body, parse_float=_or_unholdable(Decimal), parse_int=_or_unholdable(int))
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        # Bad UTF-8, nesting past the recursion limit: still "not JSON" to the caller
        # (400 VALIDATION_FAILED naming the body), never a 500.
        raise json.JSONDecodeError(type(exc).__name__, "", 0) from None


class DecimalJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_decimal(await self.body())
        return self._json


class DecimalJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def decimal_json_handler(request: Request) -> Response:
            return await handler(DecimalJSONRequest(request.scope, request.receive))

        return decimal_json_handler


def number_text(value: Decimal) -> str:
    """A finite Decimal as a JSON number's text, every digit kept, no exponent and no trailing
    zero (5000.0100 → 5000.01: a float's text whenever the float was exact)."""
    if not value.is_finite():
        raise ValueError("a JSON number is finite")
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


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
