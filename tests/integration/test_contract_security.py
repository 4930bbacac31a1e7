"""Contract audit, security (docs/http.md, ADR-0017): no address, PIN,
password, token or secret in any log line or error text, even with DEBUG logging and SQLAlchemy's
own statement logging switched on by an operator; identity only from a verified bearer token."""

from __future__ import annotations

import logging
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from shared.db.engine import build_engine
from shared.identity.tokens import issue_token
from tests.support import CHAIN_KEY, SIGNING_KEY, api_client, host_settings, make_user
from tests.support.clock import FakeClock

SECRET_PARAMETER = "alice.secret@example.test"


def test_a_failed_statement_never_carries_its_bound_parameters(db_url: str) -> None:
    """A driver error's text is what reaches a traceback or a careless log line; with
    hide_parameters it names the statement, never the values (an address, a hash)."""
    engine = build_engine(db_url)
    try:
        with engine.connect() as conn, pytest.raises(DBAPIError) as caught:
            conn.execute(
                text('SELECT 1 FROM "NoSuchTable" WHERE "Email" = :email'),
                {"email": SECRET_PARAMETER},
            )
    finally:
        engine.dispose()
    assert SECRET_PARAMETER not in str(caught.value)


def test_sqlalchemys_statement_log_never_shows_bound_parameters(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator who turns on `sqlalchemy.engine` at INFO sees statements, not values."""
    engine = build_engine(db_url)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT :email"), {"email": SECRET_PARAMETER}).all()
    finally:
        engine.dispose()
        logging.getLogger("sqlalchemy.engine").setLevel(logging.NOTSET)
    assert any("SELECT" in r.getMessage() for r in caplog.records), "statement logging was off"
    assert SECRET_PARAMETER not in caplog.text


@pytest.mark.adr("0017")
def test_a_journey_logs_no_address_pin_password_token_or_key_at_debug(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Enrol a PIN, mint, transfer, fail PINs until locked, with every logger at DEBUG and
    SQLAlchemy's statement log on (INFO): none of the customer's secrets appears in any record."""
    clock = FakeClock()
    password = "Pa55word-" + uuid.uuid4().hex[:8]
    sender = make_user(db_url, clock, balance=500, password=password)
    payee = make_user(db_url, clock)
    settings = host_settings(db_url)
    token = issue_token(settings, clock, sender.user_id)
    auth = {"Authorization": f"Bearer {token}"}
    pin = "493817"
    caplog.set_level(logging.DEBUG)
    # INFO: statements and their parameters. (DEBUG would add result rows, which hold what a
    # query reads, an address included: no engine option hides those; docs/operations.md.)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    try:
        with api_client(db_url, clock) as client:
            listed = client.get("/api/accounts", headers=auth)
            assert listed.status_code == 200
            account = listed.json()[0]["id"]
            r = client.post("/api/pin", json={"password": password, "pin": pin}, headers=auth)
            assert r.status_code == 201, r.text
            payee_tag, _ = _tag_and_email(db_url, payee.user_id)
            body = {"accountId": account, "recipientAzureTag": payee_tag, "amount": 12.34}
            r = client.post(
                "/api/transactions/transfer/authorizations", json={**body, "pin": pin}, headers=auth
            )
            assert r.status_code == 201, r.text
            r = client.post(
                "/api/transactions/transfer",
                json={**body, "authorizationId": r.json()["authorizationId"]},
                headers={**auth, "Idempotency-Key": uuid.uuid4().hex},
            )
            assert r.status_code == 201, r.text
            for _ in range(6):
                client.put(
                    "/api/pin", json={"currentPin": "000000", "newPin": "111111"}, headers=auth
                )
    finally:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.NOTSET)
    logged = caplog.text
    assert any(r.name.startswith("sqlalchemy.engine") for r in caplog.records)
    addresses = [_tag_and_email(db_url, u.user_id)[1] for u in (sender, payee)]
    for secret in (*addresses, password, pin, token, SIGNING_KEY, CHAIN_KEY):
        assert secret not in logged


def _tag_and_email(db_url: str, user_id: str) -> tuple[str, str]:
    from sqlalchemy import select

    from shared.db.engine import get_engine
    from shared.db.schema import AspNetUser
    from shared.db.uow import unit_of_work

    with unit_of_work(get_engine(db_url)) as session:
        row = session.execute(
            select(AspNetUser.AzureTag, AspNetUser.Email).where(AspNetUser.Id == user_id)
        ).one()
    assert row.Email
    return row.AzureTag, row.Email
