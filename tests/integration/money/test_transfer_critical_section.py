"""The transfer's writes after the tail lock (shared/money/transfer_write_sql.py) are judged by
what they matched: a concurrency token that moved is a lost race (the attempt runs again), a
spend that lost is the authorization's refusal — and in every case nothing the round trip wrote
survives (only the boundary commits). The key, claimed first, is the transaction's until it
ends: a duplicate that arrives meanwhile waits on it and replays the answer.

Each test interferes on purpose where the answer is rendered: after the transfer's reads and
just before the tail lock and the writes; there another connection commits what a concurrent
winner would have (or a duplicate starts). That other writer needs a server with row locks (on
SQLite the transfer holds the one write lock), so these run on PostgreSQL, once with the one
round trip and once with one statement per write (SQLite's form, which the rest of the suite
runs on SQLite)."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.orm import Session

from shared.audit.chain import AuditChain
from shared.audit.verify import walk_chain
from shared.bootstrap import bootstrap
from shared.db.engine import get_engine
from shared.db.schema import (
    Account,
    AuditChainTail,
    AuditEvent,
    AuthorizationStatus,
    IdempotencyRecord,
    IdempotencyState,
    Transaction,
    TransferAuthorization,
)
from shared.db.uow import unit_of_work
from shared.errors import DomainError
from shared.money.applock_sql import DailyLimitLock
from shared.money.idempotency import Answer, IdempotencyClaim, request_hash
from shared.money.transfer_write_sql import (
    TransferWriter,
    one_statement_per_write,
    write_transfer,
)
from shared.money.transfers import TransferOrder, TransferReceipt
from tests.support.hosts import CHAIN_KEY
from tests.support.money import Bank, open_bank, unique_key

pytestmark = pytest.mark.postgres

write_forms = pytest.mark.parametrize(
    "writes",
    [write_transfer, one_statement_per_write],
    ids=["one-round-trip", "one-statement-per-write"],
)


@dataclass(frozen=True)
class Written:
    """What survives of a transfer: the payer's balance, its ledger rows, the authorization's
    status, the payer's audit rows, the chain's tail, whether the chain verifies, and the key's
    record (None when it was released)."""

    balance: Decimal
    ledger_rows: int
    authorization: str
    audit_rows: int
    tail: int
    chain_intact: bool
    record: tuple[str, str | None] | None


class Scene:
    """Alice pays Bob 10 of her 100 under one key, on a service with the writes under test;
    `interfere` runs once, after the first attempt's reads, before the tail and the writes."""

    def __init__(self, bank: Bank, writes: TransferWriter) -> None:
        self.bank = bank
        self.engine = get_engine(bank.db_url)
        self.transfers = bootstrap(
            bank.settings,
            self.engine,
            bank.clock,
            daily_limit_lock=DailyLimitLock(10),
            transfer_writes=writes,
        ).transfers
        self.alice, self.bob = bank.customer(balance=100), bank.customer()
        self.auth = uuid.UUID(bank.authorize(self.alice, 10, self.bob))
        self.key = unique_key()
        self.attempts = 0

    def meanwhile(self, statement: Any) -> None:
        """Another transaction commits `statement` (it waits on no lock the transfer holds)."""
        with unit_of_work(self.engine) as session:
            session.execute(statement)
            session.commit()

    def pay(self, interfere: Callable[[], None] = lambda: None) -> Answer:
        order = TransferOrder(self.alice.primary, self.bob.tag, Decimal(10), self.auth)

        def render(receipt: TransferReceipt) -> str:
            self.attempts += 1
            if self.attempts == 1:
                interfere()
            return f'{{"balance":"{receipt.balance}"}}'

        hash_ = request_hash("transfer", {"authorizationId": str(self.auth)})
        claim = IdempotencyClaim(self.alice.user_id, "transfer", self.key, hash_, 201, render)
        return self.transfers.transfer(claim, order)

    def waiting_on_a_key(self) -> bool:
        """Some transaction waits for another's end: a claim on an uncommitted key row."""
        with unit_of_work(self.engine) as session:
            found = session.scalar(
                text(
                    "SELECT count(*) FROM pg_locks JOIN pg_stat_activity USING (pid)"
                    " WHERE datname = current_database()"
                    " AND locktype = 'transactionid' AND NOT granted"
                )
            )
        return bool(found)

    def written(self) -> Written:
        with unit_of_work(self.engine) as session:
            record = session.scalar(
                select(IdempotencyRecord).where(
                    IdempotencyRecord.UserId == self.alice.user_id,
                    IdempotencyRecord.Key == self.key,
                )
            )
            return Written(
                balance=session.get_one(Account, self.alice.primary).Balance,
                ledger_rows=_rows(session, Transaction.AccountId == self.alice.primary),
                authorization=session.get_one(TransferAuthorization, self.auth).Status,
                audit_rows=_rows(session, AuditEvent.ActorUserId == self.alice.user_id),
                tail=session.get_one(AuditChainTail, 1).LastSequence,
                chain_intact=walk_chain(session, AuditChain(base64.b64decode(CHAIN_KEY))).intact,
                record=None if record is None else (record.State, record.ResponseBody),
            )

    def tail_now(self) -> int:
        with unit_of_work(self.engine) as session:
            return session.get_one(AuditChainTail, 1).LastSequence


def _rows(session: Session, condition: ColumnElement[bool]) -> int:
    """How many rows match `condition` (its table is the FROM)."""
    return int(session.scalar(select(func.count()).where(condition)) or 0)


@write_forms
@pytest.mark.parametrize("moved", ["payer", "payee"])
def test_a_token_that_moved_before_the_write_is_a_lost_race_and_the_retry_writes_once(
    fresh_postgres_url: str, writes: TransferWriter, moved: str
) -> None:
    """A writer of either account committed after our read: its balance write matches no row,
    the attempt rolls back whole and runs again on fresh rows; one transfer is written. (The
    two accounts are written in lock order, so one of the two cases fails the first write.)"""
    with open_bank(fresh_postgres_url) as bank:
        scene = Scene(bank, writes)
        account = {"payer": scene.alice, "payee": scene.bob}[moved].primary
        tail_before = scene.tail_now()
        answer = scene.pay(
            lambda: scene.meanwhile(
                update(Account).where(Account.Id == account).values(Version=Account.Version + 1)
            )
        )
        written = scene.written()
    assert scene.attempts == 2
    assert answer == Answer(201, '{"balance":"90.0000"}', replayed=False)
    assert written == Written(
        balance=Decimal("90.0000"),
        ledger_rows=1,
        authorization=AuthorizationStatus.SPENT.value,
        audit_rows=1,
        tail=tail_before + 1,
        chain_intact=True,
        record=(IdempotencyState.COMPLETED.value, '{"balance":"90.0000"}'),
    )


@write_forms
def test_a_spend_lost_before_the_write_refuses_and_leaves_nothing_of_the_round_trip(
    fresh_postgres_url: str, writes: TransferWriter
) -> None:
    """Another spend of the authorization won meanwhile: ours matches no row and answers 401
    AUTHORIZATION_INVALID; the balances, the ledger, the audit row and the tail the same round
    trip wrote are rolled back, and the refusal is not stored."""
    with open_bank(fresh_postgres_url) as bank:
        scene = Scene(bank, writes)
        tail_before = scene.tail_now()
        with pytest.raises(DomainError) as refused:
            scene.pay(
                lambda: scene.meanwhile(
                    update(TransferAuthorization)
                    .where(TransferAuthorization.Id == scene.auth)
                    .values(Status=AuthorizationStatus.SPENT.value)
                )
            )
        written = scene.written()
    assert (refused.value.status, refused.value.error_code) == (401, "AUTHORIZATION_INVALID")
    assert scene.attempts == 1
    assert written == Written(
        balance=Decimal("100.0000"),
        ledger_rows=0,
        authorization=AuthorizationStatus.SPENT.value,
        audit_rows=0,
        tail=tail_before,
        chain_intact=True,
        record=None,
    )


@write_forms
def test_a_duplicate_arriving_before_the_write_waits_on_the_key_and_replays_ours(
    fresh_postgres_url: str, writes: TransferWriter
) -> None:
    """ADR-0009: the key is the transaction's from its first statement. The same request, sent
    again while ours is between its reads and its writes, passes the pre-check (nothing is
    committed yet), waits on the key's uncommitted row, and once ours commits answers our stored
    success; the money moves once."""
    with open_bank(fresh_postgres_url) as bank:
        scene = Scene(bank, writes)
        tail_before = scene.tail_now()
        duplicate: dict[str, Any] = {}

        def send_the_duplicate() -> None:
            thread = threading.Thread(target=lambda: duplicate.update(answer=scene.pay()))
            thread.start()
            duplicate["thread"] = thread
            deadline = time.monotonic() + 30
            while not scene.waiting_on_a_key() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert "answer" not in duplicate, "the duplicate answered before ours committed"

        answer = scene.pay(send_the_duplicate)
        duplicate["thread"].join(timeout=30)
        written = scene.written()
    assert answer == Answer(201, '{"balance":"90.0000"}', replayed=False)
    assert duplicate["answer"] == Answer(201, '{"balance":"90.0000"}', replayed=True)
    assert scene.attempts == 1  # the duplicate rendered nothing: it replayed
    assert written == Written(
        balance=Decimal("90.0000"),
        ledger_rows=1,
        authorization=AuthorizationStatus.SPENT.value,
        audit_rows=1,
        tail=tail_before + 1,
        chain_intact=True,
        record=(IdempotencyState.COMPLETED.value, '{"balance":"90.0000"}'),
    )


def test_a_spend_lost_before_the_write_is_invalid_beside_another_expired_pending_authorization(
    fresh_postgres_url: str,
) -> None:
    """The refusal of a lost spend reads that authorization's own row: another customer's
    authorization, still Pending and already expired, does not make ours AUTHORIZATION_EXPIRED."""
    with open_bank(fresh_postgres_url) as bank:
        scene = Scene(bank, write_transfer)
        carol, dave = bank.customer(balance=100), bank.customer()
        other = uuid.UUID(bank.authorize(carol, 5, dave))
        expired = bank.clock.now() - timedelta(hours=1)

        def another_expires_and_ours_is_spent() -> None:
            scene.meanwhile(
                update(TransferAuthorization)
                .where(TransferAuthorization.Id == other)
                .values(ExpiresAt=expired)
            )
            scene.meanwhile(
                update(TransferAuthorization)
                .where(TransferAuthorization.Id == scene.auth)
                .values(Status=AuthorizationStatus.SPENT.value)
            )

        with pytest.raises(DomainError) as refused:
            scene.pay(another_expires_and_ours_is_spent)
    assert (refused.value.status, refused.value.error_code) == (401, "AUTHORIZATION_INVALID")


def test_a_spend_lost_to_another_spend_is_invalid_whatever_the_authorizations_expiry(
    fresh_postgres_url: str,
) -> None:
    """Only a Pending authorization can be reported expired: one another spend took is
    AUTHORIZATION_INVALID even when its expiry has passed by the time the refusal reads it."""
    with open_bank(fresh_postgres_url) as bank:
        scene = Scene(bank, write_transfer)
        expired = bank.clock.now() - timedelta(hours=1)
        with pytest.raises(DomainError) as refused:
            scene.pay(
                lambda: scene.meanwhile(
                    update(TransferAuthorization)
                    .where(TransferAuthorization.Id == scene.auth)
                    .values(Status=AuthorizationStatus.SPENT.value, ExpiresAt=expired)
                )
            )
    assert (refused.value.status, refused.value.error_code) == (401, "AUTHORIZATION_INVALID")
