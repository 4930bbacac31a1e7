"""The external transfer's statement budget on PostgreSQL, counted on the engine (every cursor
execute and every COMMIT), not read from the code.

Every transfer and every audited save of the bank serialises on the audit chain's tail lock, so each
round trip from the tail lock to the commit is a network latency paid by everybody
(docs/architecture.md#lock-order; shared/money/transfer_write_sql.py): the tail lock, ONE round trip
of writes, the commit. A change that adds a statement inside the lock, or a statement anywhere past
the budget, fails here. Speed itself is measured in bench/transfers.py, never asserted.

Seven statements: the pre-check's one read, then in the transaction the key's claim, the
application lock, the accounts, the sum, the tail lock and the writes. The claim is the one
statement more than when the key was claimed in a transaction of its own before the transfer
(which cost that transaction's read, insert and commit besides, uncounted here); it is not
under the tail lock, and not even under the customer's application lock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, event

from shared.audit.tail_sql import postgresql_tail_lock
from shared.bootstrap import bootstrap
from shared.db.engine import get_engine
from shared.money.applock_sql import postgresql_advisory_lock
from shared.money.key_claim_sql import postgresql_claim
from shared.money.transfers import TransferOrder
from tests.support.money import keyed, open_bank

# The budget: every transfer of the bank waits on the audit chain's tail, so the round trips from
# the tail lock to the commit (commit included) bound the bank's rate; the statements in all are
# what one transfer costs its client and the server.
STATEMENTS_PER_TRANSFER = 7
ROUND_TRIPS_FROM_THE_TAIL_LOCK_TO_THE_COMMIT = 3

COMMIT = "COMMIT"


@dataclass
class RoundTrips:
    """What one connection sent, in order: each statement's SQL, and COMMIT for each commit."""

    sent: list[str] = field(default_factory=list)

    @property
    def statements(self) -> list[str]:
        return [sql for sql in self.sent if sql != COMMIT]

    def index_of(self, sql: str) -> int:
        return self.sent.index(sql)


@contextmanager
def counted(engine: Engine) -> Iterator[RoundTrips]:
    trips = RoundTrips()

    def on_statement(*args: Any) -> None:
        trips.sent.append(args[2])  # (conn, cursor, statement, parameters, context, many)

    def on_commit(_conn: object) -> None:
        trips.sent.append(COMMIT)

    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "commit", on_commit)
    try:
        yield trips
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
        event.remove(engine, "commit", on_commit)


@pytest.mark.postgres
def test_one_transfer_is_seven_statements_and_three_round_trips_from_the_tail_lock_to_the_commit(
    postgres_url: str,
) -> None:
    """One external transfer at the service layer, its key claimed and its success stored with
    the money, as the HTTP path runs it: within the budget, and the lock order of
    docs/architecture.md — the key, the application lock, the tail, then the first row write."""
    with open_bank(postgres_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        auth = uuid.UUID(bank.authorize(alice, 10, bob))
        engine = get_engine(postgres_url)
        services = bootstrap(bank.settings, engine, bank.clock)
        order = TransferOrder(alice.primary, bob.tag, Decimal(10), auth)
        with counted(engine) as trips:
            answer = services.transfers.transfer(keyed(alice.user_id), order)
    assert (answer.status, answer.replayed) == (201, False)
    print("\n".join(f"{i:2} {sql.splitlines()[0][:100]}" for i, sql in enumerate(trips.sent)))
    dialect = engine.dialect
    claim = trips.index_of(str(postgresql_claim().compile(dialect=dialect)))
    applock = trips.index_of(str(postgresql_advisory_lock().compile(dialect=dialect)))
    tail = trips.index_of(str(postgresql_tail_lock().compile(dialect=dialect)))
    commit = trips.index_of(COMMIT)
    assert trips.sent.count(COMMIT) == 1, "one attempt, one commit"
    under_the_lock = [sql.splitlines()[0] for sql in trips.sent[tail : commit + 1]]
    assert len(under_the_lock) <= ROUND_TRIPS_FROM_THE_TAIL_LOCK_TO_THE_COMMIT, under_the_lock
    assert len(trips.statements) <= STATEMENTS_PER_TRANSFER, [
        sql.splitlines()[0] for sql in trips.statements
    ]
    # Lock order: key → application lock → tail → rows; nothing but the claim writes before the
    # tail.
    writes = [
        i
        for i, sql in enumerate(trips.sent)
        if any(verb in sql for verb in ("UPDATE ", "INSERT ")) and i != claim
    ]
    assert claim < applock < tail < min(writes), trips.sent


@pytest.mark.postgres
def test_the_pre_check_is_one_read_outside_a_transaction_and_the_rest_one_transaction(
    postgres_url: str,
) -> None:
    """psycopg sends BEGIN, and the ROLLBACK that ends a reading unit of work, as round trips of
    their own: the pre-check's one read runs with no transaction open (shared.db.uow.one_read),
    every later statement inside the one locked transaction."""
    with open_bank(postgres_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        auth = uuid.UUID(bank.authorize(alice, 10, bob))
        engine = get_engine(postgres_url)
        services = bootstrap(bank.settings, engine, bank.clock)
        seen: list[tuple[str, psycopg.pq.TransactionStatus]] = []

        def on_statement(conn: Any, _cursor: object, sql: str, *_rest: object) -> None:
            status = conn.connection.driver_connection.info.transaction_status
            seen.append((sql.splitlines()[0][:60], status))

        event.listen(engine, "after_cursor_execute", on_statement)
        try:
            services.transfers.transfer(
                keyed(alice.user_id), TransferOrder(alice.primary, bob.tag, Decimal(10), auth)
            )
        finally:
            event.remove(engine, "after_cursor_execute", on_statement)
    statuses = [status for _sql, status in seen]
    idle, in_transaction = psycopg.pq.TransactionStatus.IDLE, psycopg.pq.TransactionStatus.INTRANS
    # Each status is read after its statement's answer: a statement run inside a transaction
    # leaves it open, one run outside leaves the connection idle.
    assert statuses == [idle] + [in_transaction] * (len(seen) - 1), seen
