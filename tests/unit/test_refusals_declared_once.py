"""DESIGN §5: each refusal is declared once, on its class; an operation's OpenAPI responses,
their extension members and headers (Retry-After, WWW-Authenticate) are derived from the refusal
classes the operation lists (api_funcs/problem_docs.py), so the document follows the classes."""

from __future__ import annotations

from typing import Any

from api_funcs.app import create_app
from api_funcs.context import AppContext
from api_funcs.problem_docs import error_code_responses
from api_funcs.routes.transactions import REFUSALS
from shared.errors import Refusal
from shared.money.refusals import DailyLimitExceeded, InsufficientFunds
from shared.settings import load_settings


def _schema_of(responses: dict[Any, Any], status: int, code: str) -> dict[str, Any]:
    one_of = responses[status]["content"]["application/problem+json"]["schema"]["oneOf"]
    (schema,) = [s for s in one_of if s["properties"]["errorCode"]["enum"] == [code]]
    return dict(schema)


def test_each_money_operations_document_lists_exactly_the_codes_of_its_refusal_classes() -> None:
    document = create_app(AppContext(load_settings({}))).openapi()
    operations = {
        op["operationId"]: op for path in document["paths"].values() for op in path.values()
    }
    for name, refusals in REFUSALS.items():
        declared = {
            (int(status), code)
            for status, entry in operations[name]["responses"].items()
            if "x-error-codes" in entry
            for code in entry["x-error-codes"]
        }
        # What every operation on the database can answer besides its own refusals.
        expected = {(r.status, r.error_code) for r in refusals} | {
            (503, "LOCK_TIMEOUT"),
            (503, "DATABASE_UNAVAILABLE"),
        }
        assert declared == expected, name


def test_members_and_headers_come_from_the_class() -> None:
    responses = error_code_responses((DailyLimitExceeded, InsufficientFunds))
    daily = _schema_of(responses, 422, "DAILY_LIMIT_EXCEEDED")
    assert set(DailyLimitExceeded.member_types) <= set(daily["required"])
    # ADR-0050 D7: never `remaining`.
    assert daily["not"] == {"anyOf": [{"required": ["remaining"]}]}
    funds = _schema_of(responses, 422, "INSUFFICIENT_FUNDS")
    assert set(funds["properties"]) >= {"available", "requested"}
    assert "headers" not in responses[422]
    assert set(responses[503]["headers"]) == {"Retry-After"}  # DATABASE_UNAVAILABLE's


def test_a_new_refusal_reaches_the_document_with_its_members_by_itself() -> None:
    class OverdraftCapReached(Refusal):
        error_code = "OVERDRAFT_CAP_REACHED"
        title = "The overdraft cap is reached."
        member_types = {"cap": "number"}  # noqa: RUF012 - a test's throwaway class
        retry_after = 60

    responses = error_code_responses((OverdraftCapReached,), touches_database=False)
    schema = _schema_of(responses, 422, "OVERDRAFT_CAP_REACHED")
    assert schema["properties"]["cap"] == {"type": "number"}
    assert set(responses[422]["headers"]) == {"Retry-After"}
