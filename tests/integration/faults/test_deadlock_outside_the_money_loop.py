"""A write outside the money's retry loop that the server picks as a deadlock's victim (PostgreSQL
40P01) is 503 DATABASE_UNAVAILABLE with Retry-After, never a 500: the server rolled it back, so
nothing changed, and the same request sent again may succeed (docs/http.md).

The deadlock is real, between the PIN change and another session: the other inserts the audit
row the change will need (the chain's next sequence) and leaves it uncommitted; the change locks
the tail and waits on that row's uniqueness; the other then asks for the tail. The change's
backend waited first, so its deadlock check runs first and breaks the cycle by aborting it."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select, text

from shared.db.engine import build_engine, get_engine
from shared.db.schema import AspNetUser, AuditChainTail
from shared.db.uow import unit_of_work
from shared.identity.passwords import verify_secret
from shared.identity.tokens import issue_token
from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_settings
from tests.support.users import make_user

pytestmark = pytest.mark.postgres

PASSWORD = "a long and honest passphrase 7"
PIN, NEW_PIN = "739154", "602817"


def _waiting_on_a_transaction(url: str) -> bool:
    with unit_of_work(get_engine(url)) as session:
        found = session.scalar(
            text(
                "SELECT count(*) FROM pg_locks JOIN pg_stat_activity USING (pid)"
                " WHERE datname = current_database() AND locktype = 'transactionid' AND NOT granted"
            )
        )
    return bool(found)


def test_a_pin_change_chosen_as_a_deadlock_victim_is_503_database_unavailable(
    fresh_postgres_url: str,
) -> None:
    url = fresh_postgres_url
    clock = FakeClock()
    with api_client(url, clock) as client:
        user = make_user(url, clock, password=PASSWORD, tag=f"dl-{uuid.uuid4().hex[:8]}")
        token = issue_token(host_settings(url), clock, user.user_id, minutes=60)
        headers = {"Authorization": f"Bearer {token}"}
        enrolled = client.post("/api/pin", json={"password": PASSWORD, "pin": PIN}, headers=headers)
        assert enrolled.status_code == 201, enrolled.text
        answer: dict[str, Any] = {}

        def change() -> None:
            body = {"currentPin": PIN, "newPin": NEW_PIN}
            answer["response"] = client.put("/api/pin", json=body, headers=headers)

        other = build_engine(url)
        try:
            with other.connect() as connection:
                # The other session never runs the deadlock check first: the change is the victim.
                connection.exec_driver_sql("SET deadlock_timeout = '20s'")
                connection.exec_driver_sql("SET statement_timeout = '20s'")
                with unit_of_work(get_engine(url)) as session:
                    tail = session.get_one(AuditChainTail, 1).LastSequence
                connection.execute(
                    text(
                        'INSERT INTO "AuditEvents" ("Id", "Sequence", "PayloadVersion", "Event",'
                        ' "OccurredAt", "PreviousHash", "RowHash")'
                        " VALUES (:id, :sequence, 1, 'Other', :at, :hash, :hash)"
                    ),
                    {
                        "id": uuid.uuid4(),
                        "sequence": tail + 1,
                        "at": datetime.now(UTC).replace(tzinfo=None),
                        "hash": bytes(32),
                    },
                )
                thread = threading.Thread(target=change)
                thread.start()
                deadline = time.monotonic() + 15
                while not _waiting_on_a_transaction(url) and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert "response" not in answer, "the change answered without waiting"
                # Closes the cycle; returns once the server aborted the change.
                connection.execute(text('SELECT 1 FROM "AuditChainTail" FOR UPDATE'))
                connection.rollback()
            thread.join(timeout=30)
        finally:
            other.dispose()
        response = answer["response"]
        assert response.status_code == 503, response.text
        assert response.json()["errorCode"] == "DATABASE_UNAVAILABLE"
        assert response.headers["Retry-After"] == "5"
        with unit_of_work(get_engine(url)) as session:
            pin_hash = session.scalar(
                select(AspNetUser.PinHash).where(AspNetUser.Id == user.user_id)
            )
        assert pin_hash is not None and verify_secret(pin_hash, PIN)  # nothing changed
        # The same request again succeeds.
        again = client.put("/api/pin", json={"currentPin": PIN, "newPin": NEW_PIN}, headers=headers)
        assert again.status_code == 200, again.text
