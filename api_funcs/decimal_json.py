"""Request bodies with every JSON fraction read as a `Decimal`, the digits sent, never a float
(docs/http.md#bodies); every router with a body uses it, so whatever is not JSON is 400
VALIDATION_FAILED naming the body, and a number no Decimal or int holds refuses its own field."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any, Final

from fastapi import Request, Response
from fastapi.routing import APIRoute


class UnholdableNumber:
    """A JSON number past the decimal module's exponent limit or Python's digit limit, keeping
    none of its digits: a refusal never echoes what the caller sent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNHOLDABLE"


UNHOLDABLE: Final = UnholdableNumber()


def _fraction(text: str) -> Decimal | UnholdableNumber:
    try:
        return Decimal(text)
    except ArithmeticError:
        return UNHOLDABLE


def _integer(text: str) -> int | UnholdableNumber:
    try:
        return int(text)
    except ValueError:
        return UNHOLDABLE


def loads_decimal(body: bytes | str) -> Any:
    """JSON with fractions as Decimal; anything unparsable is a JSONDecodeError."""
    try:
        return json.loads(body, parse_float=_fraction, parse_int=_integer)
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
