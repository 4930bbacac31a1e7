"""Request bodies parsed with every JSON fraction as a `Decimal`, never a float (docs/database.md,
docs/http.md): `0.1` arrives as Decimal('0.1') exactly as the client wrote it, so "at most two
decimals" is a question about the digits sent, not about a binary approximation of them. Every
router with a request body uses it, so anything that is not JSON reaches the caller as 400
VALIDATION_FAILED naming the body (docs/http.md), whatever made it unreadable.

A number that is JSON but that no Decimal or int can hold (an exponent past the decimal module's
limit, `1e1000000000000000000`: decimal.InvalidOperation, an ArithmeticError; an integer past
Python's digit limit: a ValueError) is read as UNHOLDABLE, so the field holding it is refused by
name (400 VALIDATION_FAILED naming `amount`), not the whole body."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any, Final

from fastapi import Request, Response
from fastapi.routing import APIRoute


class UnholdableNumber:
    """The value of a JSON number too large (or too finely exponented) to hold. It keeps none of
    the number's digits: a refusal never echoes what the caller sent."""

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
    """An APIRoute whose handler reads the body through DecimalJSONRequest."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def decimal_json_handler(request: Request) -> Response:
            return await handler(DecimalJSONRequest(request.scope, request.receive))

        return decimal_json_handler
