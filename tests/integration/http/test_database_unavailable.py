"""A database the host cannot reach is 503 DATABASE_UNAVAILABLE with Retry-After, not a 500
(docs/http.md: no input yields a 500; the client may retry). Logged at Error by the exception's
type only: a driver's text holds SQL and, on PostgreSQL, values (a constraint's DETAIL shows the
failing row whatever hide_parameters says). No database error leaves the app for the server to
log: uvicorn prints an escaped exception's whole text.

The outage is real: the app's Database__Url names PostgreSQL on a closed port of 127.0.0.1, so
psycopg's connect is refused; no mock."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from shared.db.engine import build_engine, get_engine
from shared.db.uow import unit_of_work
from shared.errors import DatabaseUnavailable
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.connections import unused_port
from tests.support.hosts import host_environ, make_app
from tests.support.money import DEPOSIT, MINT, open_bank, unique_key
from tests.support.tokens import bearer

USER_ID = f"user-{uuid.uuid4().hex}"  # a bound parameter of the bearer's user lookup

# Every operation that touches the database (all but health), with a body that gets past
# validation, so the first database read is what fails. The account is a fixed id: the bodies
# are in the test ids, which must be the same in every run to be selected by node id.
ACCOUNT = "c26e0436-69f0-4a5e-9a51-3f6c1d2b8e70"
REQUESTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/accounts", None),
    ("GET", "/api/transactions/allowance", None),
    ("POST", "/api/pin", {"password": "correct horse battery staple", "pin": "4821"}),
    ("PUT", "/api/pin", {"currentPin": "4821", "newPin": "602817"}),
    ("POST", MINT, {"accountId": ACCOUNT, "recipientAzureTag": "bob", "amount": 5, "pin": "4821"}),
    (
        "POST",
        "/api/transactions/transfer",
        {"accountId": ACCOUNT, "recipientAzureTag": "bob", "amount": 5},
    ),
    (
        "POST",
        "/api/transactions/internal-transfer",
        {"fromAccountId": ACCOUNT, "toAccountId": str(uuid.uuid4()), "amount": 5},
    ),
    ("POST", DEPOSIT, {"accountId": ACCOUNT, "amount": 5}),
    ("POST", "/api/transactions/withdrawal", {"accountId": ACCOUNT, "amount": 5}),
]


@pytest.fixture
def unreachable_url() -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:{unused_port()}/azurebank"


@pytest.fixture
def outage_client(unreachable_url: str) -> Iterator[TestClient]:
    settings = load_settings(host_environ(unreachable_url))
    app = make_app(settings, clock=FakeClock(), db_url=unreachable_url)
    # raise_server_exceptions=True: an exception that left the app would fail the request here,
    # as it would reach uvicorn's error log in a served host.
    with TestClient(app, raise_server_exceptions=True) as client:
        yield client


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS, ids=lambda v: str(v)[:30])
def test_an_unreachable_database_is_503_database_unavailable_with_retry_after_for_every_operation(
    outage_client: TestClient,
    unreachable_url: str,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    headers = {
        **bearer(load_settings(host_environ(unreachable_url)), FakeClock(), USER_ID),
        "Idempotency-Key": unique_key(),
    }
    caplog.set_level(logging.DEBUG)
    response = outage_client.request(method, path, json=body, headers=headers)
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert int(response.headers["Retry-After"]) >= 1
    problem = response.json()
    assert problem["errorCode"] == "DATABASE_UNAVAILABLE"
    assert problem["type"].endswith("/database-unavailable")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage().split(" (trace")[0] for r in errors] == [
        "Database unavailable: OperationalError"
    ]
    assert errors[0].exc_info is None
    # Nothing the driver said: no SQL, no host or port, no bound parameter. (psycopg's own
    # DEBUG line names the host and port it tried: a driver's diagnostics, not ours.)
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("azurebank")]
    said = "\n".join(ours + [r.getMessage() for r in errors]) + response.text
    for leak in ("SELECT", "AspNetUsers", "Connection refused", unreachable_url[-20:], USER_ID):
        assert leak not in said


def test_health_still_answers_200_while_the_database_is_down(outage_client: TestClient) -> None:
    assert outage_client.get("/api/health").status_code == 200


def test_the_document_declares_503_database_unavailable_on_every_operation_but_health() -> None:
    """Health touches no database; readiness declares its own 503 (the failing check named)."""
    app = make_app(load_settings(host_environ("sqlite:///never-opened.db")))
    operations = {
        op["operationId"]: op for path in app.openapi()["paths"].values() for op in path.values()
    }
    assert len(operations) == 11
    for name, op in operations.items():
        declared = op["responses"].get("503", {})
        if name == "health":
            assert declared == {}
            continue
        if name == "ready":
            # Readiness answers an unreachable database itself: 503 naming `database` failing.
            schema = declared["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ReadinessAnswer"}
            continue
        assert "DATABASE_UNAVAILABLE" in declared["x-error-codes"], name
        assert "Retry-After" in declared["headers"], name
        codes = [
            s["properties"]["errorCode"]["enum"][0]
            for s in declared["content"]["application/problem+json"]["schema"]["oneOf"]
        ]
        assert "DATABASE_UNAVAILABLE" in codes, name


# --- which driver errors are an outage --------------------------------------------------------


def test_a_refused_connect_is_an_outage(unreachable_url: str) -> None:
    engine = build_engine(unreachable_url)
    try:
        with pytest.raises(DatabaseUnavailable), engine.connect():
            pass
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_server_that_drops_the_connection_mid_transaction_is_an_outage(postgres_url: str) -> None:
    engine = build_engine(postgres_url)
    try:
        with engine.connect() as victim:
            pid = victim.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with engine.connect() as killer:
                killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            with pytest.raises(DatabaseUnavailable):
                victim.execute(text("SELECT 1"))
            assert victim.invalidated
    finally:
        engine.dispose()


def test_a_failed_statement_on_a_live_connection_is_not_an_outage(db_url: str) -> None:
    with unit_of_work(get_engine(db_url)) as session, pytest.raises(SQLAlchemyError):
        session.execute(text('SELECT 1 FROM "NoSuchTable"'))


# --- no database error leaves the app (uvicorn would print its text) -------------------------


@pytest.mark.postgres
def test_a_constraint_failure_is_a_500_logged_by_type_and_its_failing_row_never_escapes(
    fresh_postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL's DETAIL ("Failing row contains (…)") carries the row's values into the
    exception's text even with hide_parameters. A CHECK the app does not know makes a deposit
    fail that way; the answer is our 500 and the exception never reaches the server's log."""
    with unit_of_work(get_engine(fresh_postgres_url)) as session:
        session.execute(
            text('ALTER TABLE "Accounts" ADD CONSTRAINT test_cap CHECK ("Balance" < 1000)')
        )
        session.commit()
    caplog.set_level(logging.DEBUG)
    with open_bank(fresh_postgres_url) as bank:
        alice = bank.customer(balance=990, pin=None)
        app = bank.client.app
        with TestClient(app, raise_server_exceptions=True) as strict:
            response = strict.post(
                DEPOSIT,
                json={"accountId": str(alice.primary), "amount": 20},
                headers={**bank.headers(alice), "Idempotency-Key": unique_key()},
            )
    assert response.status_code == 500, response.text
    assert response.json()["errorCode"] == "INTERNAL_ERROR"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage().split(" (trace")[0] for r in errors] == ["Unhandled IntegrityError"]
    for leak in ("Failing row", alice.user_id, str(alice.primary), "test_cap"):
        assert leak not in caplog.text
