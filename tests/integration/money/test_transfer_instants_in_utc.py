"""The external transfer's one round trip on PostgreSQL binds every value by its column's type:
with the server's sessions in another time zone, the ledger rows, the spend and the audit row
still hold the UTC instant of the transfer, and the day's sum still counts it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import select, text

from shared.db.engine import dispose_engines, get_engine
from shared.db.schema import AuditEvent, Transaction, TransferAuthorization
from shared.db.uow import unit_of_work
from tests.support.money import open_bank

pytestmark = pytest.mark.postgres


def test_a_transfer_on_a_server_in_another_zone_stores_its_utc_instants(
    fresh_postgres_url: str,
) -> None:
    engine = get_engine(fresh_postgres_url)
    with engine.connect() as conn:
        name = conn.scalar(text("SELECT current_database()"))
        conn.execute(text(f"ALTER DATABASE \"{name}\" SET timezone TO 'Asia/Tokyo'"))
        conn.commit()
    dispose_engines()  # new sessions take the database's zone
    with open_bank(fresh_postgres_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        authorization = bank.authorize(alice, 10, bob)
        spent = bank.transfer(alice, 10, bob, authorization)
        assert spent.status_code == 201, spent.text
        now = bank.clock.now()
        allowance = bank.allowance(alice)
    with get_engine(fresh_postgres_url).connect() as conn:
        assert conn.scalar(text("SHOW timezone")) == "Asia/Tokyo"
    with unit_of_work(get_engine(fresh_postgres_url)) as session:
        created = set(session.scalars(select(Transaction.CreatedAt)))
        spent_at = session.scalar(select(TransferAuthorization.SpentAt))
        occurred = session.scalar(
            select(AuditEvent.OccurredAt).where(AuditEvent.Event == "TransferCompleted")
        )
    assert (created, spent_at, occurred) == ({now}, now, now)
    assert Decimal(str(allowance["used"])) == Decimal(10)
