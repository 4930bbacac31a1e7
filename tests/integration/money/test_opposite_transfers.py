"""Money moving both ways between the same two accounts at once: both movements complete, no
money appears or vanishes, and the server never has to break a deadlock between them.

Two layers keep opposite movements apart. Today every writer of an account row takes the audit
chain's tail lock first (lock order: application lock → tail → rows), so the tail alone
serialises them: the first two tests race them through the real chain, and fail if anything
starts locking a row before the tail (the cycle ADR-0050 rejects). The second layer is the rows'
own lock order — the two balances written in `Id` order whichever way the money goes
(`shared.money.accounts.in_lock_order`, used by the transfer and `move_money`) — which is what
still holds once the tail no longer serialises every movement (a partitioned tail, which
ADR-0044 leaves open). The gated tests take the tail's serialisation away (each transaction
seals onto a tail of its own) and force the worst interleaving: a third transaction holds both
rows until both movements wait on them, then lets go, and a trigger in the test's own database
holds each row lock a moment before the write goes on, so each movement has its first row before
either asks for its second. Written in opposite orders, the two then wait for each other's
second row and PostgreSQL breaks the cycle (40P01); in one order, the second waits behind the
first and retries on fresh rows. SQLite has one writer, so there is nothing to race there."""

from __future__ import annotations

import base64
import dataclasses
import functools
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from sqlalchemy import Engine, event, select, text, update
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.orm import Session

from shared.audit.chain import (
    CURRENT_PAYLOAD_VERSION,
    GENESIS_HASH,
    AuditAppender,
    AuditChain,
    SealedAuditRow,
    render_details,
    uuid7,
)
from shared.db.engine import get_engine
from shared.db.faults import translate_driver_error
from shared.db.schema import Account, AuditEvent
from shared.db.uow import unit_of_work
from shared.identity.pins import verify_pin
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.mint import MintRequest, TransferMint
from shared.money.rails import AccountRails
from shared.money.transfer_write_sql import write_transfer
from shared.money.transfers import TransferOrder, TransferService
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed
from tests.support.users import PIN, User, enrol_pin, make_user

START = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
BALANCE = 1_000
ONE = Decimal(1)
RACED_ROUNDS = 25
GATED_ROUNDS = 3
HOLD_SECONDS = 0.1
ID_PAIRS = {
    "digits": (uuid.UUID("20000000-0000-4000-8000-000000000000"), uuid.UUID(int=1)),
    "letters": (uuid.UUID("ffffffff-0000-4000-8000-000000000000"), uuid.UUID(f"{'a' * 32}")),
    "across": (uuid.UUID(f"{'e' * 32}"), uuid.UUID(f"{'3' * 32}")),
}


class TailPerTransaction:
    """The audit appender as a partitioned tail would leave the money path: each transaction
    seals onto a tail of its own (no lock, no shared row before the balances), so nothing but the
    rows' lock order keeps two opposite movements apart. Its rows are not a valid chain."""

    def __init__(self) -> None:
        self._chain = AuditChain(base64.b64decode(CHAIN_KEY))
        self._sequences = itertools.count(1_000_000)
        self._taking = threading.Lock()

    def seal(
        self,
        session: Session,
        *,
        actor_user_id: str | None,
        event: str,
        occurred_at: datetime,
        details: Mapping[str, object] | None = None,
    ) -> SealedAuditRow:
        with self._taking:
            sequence = next(self._sequences)
        row = AuditEvent(
            Id=uuid7(occurred_at),
            Sequence=sequence,
            PayloadVersion=CURRENT_PAYLOAD_VERSION,
            ActorUserId=actor_user_id,
            Event=event,
            OccurredAt=occurred_at,
            Details=render_details(details),
            PreviousHash=GENESIS_HASH,
        )
        return SealedAuditRow(
            id=row.Id,
            sequence=row.Sequence,
            payload_version=row.PayloadVersion,
            actor_user_id=row.ActorUserId,
            event=row.Event,
            occurred_at=row.OccurredAt,
            details=row.Details,
            previous_hash=row.PreviousHash,
            row_hash=self._chain.hash_of(row),
        )

    def append(
        self,
        session: Session,
        *,
        actor_user_id: str | None,
        event: str,
        occurred_at: datetime,
        details: Mapping[str, object] | None = None,
    ) -> uuid.UUID:
        sealed = self.seal(
            session,
            actor_user_id=actor_user_id,
            event=event,
            occurred_at=occurred_at,
            details=details,
        )
        session.add(AuditEvent(**sealed.row_values()))  # the row only: the shared tail untouched
        session.flush()
        return sealed.id


def _deadlocks(engine: Engine) -> list[str]:
    """Every deadlock the server broke on this engine's connections (the retry loop runs the
    attempt again, so the callers would never see it)."""
    seen: list[str] = []

    def _count(context: ExceptionContext) -> None:
        error = context.original_exception
        if getattr(error, "sqlstate", None) == "40P01" or "(1205)" in str(error):
            seen.append(str(error).splitlines()[0])

    # Ahead of the engine's own hook, which raises the domain's error and so ends the chain.
    event.remove(engine, "handle_error", translate_driver_error)
    event.listen(engine, "handle_error", _count)
    event.listen(engine, "handle_error", translate_driver_error)
    return seen


def _together(*calls: Callable[[], object], started: Callable[[], None] | None = None) -> None:
    """Start the calls at once (a barrier), each on its own thread and connection; `started`
    runs on this thread meanwhile. Fails on any call's exception or a call still running after
    a minute (a hang)."""
    barrier = threading.Barrier(len(calls))
    outcomes: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = calls[i]()
        except Exception as exc:  # any exception, a domain refusal included, fails the test
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    try:
        if started is not None:
            started()
    finally:
        for t in threads:
            t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a movement hung"
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes


def _balances(engine: Engine, *account_ids: uuid.UUID) -> list[Decimal]:
    with unit_of_work(engine) as session:
        return [session.get_one(Account, a).Balance for a in account_ids]


def _slow_balance_writes(engine: Engine) -> None:
    """A BEFORE UPDATE trigger on Accounts that sleeps: PostgreSQL locks the row before firing
    it, so every balance write holds its row for HOLD_SECONDS before it goes on."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "CREATE FUNCTION hold_the_row() RETURNS trigger LANGUAGE plpgsql AS"
                f" $$ BEGIN PERFORM pg_sleep({HOLD_SECONDS}); RETURN NEW; END $$"
            )
        )
        conn.execute(
            text(
                'CREATE TRIGGER hold_the_row BEFORE UPDATE ON "Accounts"'
                " FOR EACH ROW EXECUTE FUNCTION hold_the_row()"
            )
        )


@contextmanager
def _rows_held(engine: Engine, *account_ids: uuid.UUID) -> Iterator[Callable[[], None]]:
    """Hold a share lock on the rows; yields what lets go of it once two transactions queue on
    them (or when the block ends)."""
    with Session(engine) as holder:
        holder.execute(
            select(Account.Id).where(Account.Id.in_(account_ids)).with_for_update(read=True)
        )

        def let_go_once_both_wait() -> None:
            try:
                _until_two_wait_on_a_lock(engine)
            finally:
                holder.rollback()

        try:
            yield let_go_once_both_wait
        finally:
            holder.rollback()


def _until_two_wait_on_a_lock(engine: Engine) -> None:
    deadline = time.monotonic() + 20
    with engine.connect() as watcher:
        while time.monotonic() < deadline:
            waiting = watcher.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
            watcher.rollback()  # a fresh statistics snapshot each time
            if waiting == 2:
                return
            time.sleep(0.01)
    pytest.fail("the two movements never both waited on the held rows")


class _Bank:
    """Two customers with one account each, a mint and the transfer over `audit`."""

    def __init__(
        self, url: str, audit: AuditAppender, account_ids: tuple[uuid.UUID, uuid.UUID] | None = None
    ) -> None:
        self.engine = get_engine(url)
        clock = FakeClock(START)
        limit = DailyOutflowLimit(Decimal(BALANCE), clock)
        pin_check = functools.partial(verify_pin, self.engine, clock, PinSettings())
        self._mint = TransferMint(self.engine, clock, limit, pin_check, authorization_seconds=300)
        self.transfers = TransferService(
            self.engine, clock, limit, DailyLimitLock(10), audit, write_transfer
        )
        self.alice, self.bob = (make_user(url, clock, balance=BALANCE) for _ in range(2))
        if account_ids is not None:
            self.alice, self.bob = map(self._renumbered, (self.alice, self.bob), account_ids)
        for who in (self.alice, self.bob):
            enrol_pin(url, who.user_id)

    def _renumbered(self, who: User, account_id: uuid.UUID) -> User:
        """`who` with its one account's Id changed to `account_id` (nothing refers to it yet)."""
        with unit_of_work(self.engine) as session:
            session.execute(update(Account).where(Account.Id == who.primary).values(Id=account_id))
            session.commit()
        return dataclasses.replace(who, account_ids=[account_id])

    def order(self, payer: User, payee: User) -> Callable[[], object]:
        """An authorized transfer of 1 from `payer` to `payee`, ready to spend."""
        grant = self._mint.mint(payer.user_id, MintRequest(payer.primary, payee.tag, ONE, PIN))
        spend = TransferOrder(payer.primary, payee.tag, ONE, grant.authorization_id)
        return functools.partial(self.transfers.transfer, keyed(payer.user_id), spend)

    def both_ways(self) -> tuple[Callable[[], object], Callable[[], object]]:
        return self.order(self.alice, self.bob), self.order(self.bob, self.alice)

    def balances(self) -> list[Decimal]:
        return _balances(self.engine, self.alice.primary, self.bob.primary)


def _rails(url: str, audit: AuditAppender) -> tuple[AccountRails, User]:
    rails = AccountRails(get_engine(url), FakeClock(START), audit)
    return rails, make_user(url, FakeClock(START), balance=BALANCE, accounts=2)


def _internal_both_ways(
    rails: AccountRails, owner: User
) -> tuple[Callable[[], object], Callable[[], object]]:
    a, b = owner.account_ids
    return (
        functools.partial(
            rails.internal_transfer, keyed(owner.user_id, "internal_transfer"), a, b, ONE
        ),
        functools.partial(
            rails.internal_transfer, keyed(owner.user_id, "internal_transfer"), b, a, ONE
        ),
    )


def test_two_customers_paying_each_other_at_once_never_deadlock(server_url: str) -> None:
    """Alice pays Bob and Bob pays Alice in the same instant, round after round: two users, two
    application locks, the same two account rows written in opposite directions."""
    bank = _Bank(server_url, AuditChain(base64.b64decode(CHAIN_KEY)))
    deadlocks = _deadlocks(bank.engine)
    for _ in range(RACED_ROUNDS):
        _together(*bank.both_ways())
    assert bank.balances() == [Decimal(BALANCE)] * 2
    assert deadlocks == []


def test_internal_transfers_both_ways_at_once_never_deadlock(server_url: str) -> None:
    """One customer moves 1 from A to B and 1 from B to A in the same instant, round after
    round (the rails take no application lock)."""
    rails, owner = _rails(server_url, AuditChain(base64.b64decode(CHAIN_KEY)))
    deadlocks = _deadlocks(get_engine(server_url))
    for _ in range(RACED_ROUNDS):
        _together(*_internal_both_ways(rails, owner))
    assert _balances(get_engine(server_url), *owner.account_ids) == [Decimal(BALANCE)] * 2
    assert deadlocks == []


@pytest.mark.postgres
@pytest.mark.parametrize("account_ids", ID_PAIRS.values(), ids=ID_PAIRS.keys())
def test_opposite_transfers_unserialised_by_the_tail_lock_their_rows_in_one_order(
    fresh_postgres_url: str, account_ids: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """Without the tail's serialisation, both transfers reach their balance writes while a third
    transaction holds the two rows; let go, they must queue on the same first row. The two
    accounts' Ids are pinned, from both ends of the alphabet their text is compared in and across
    it, so no pair of random Ids decides whether an order that holds for some pairs is tested."""
    bank = _Bank(fresh_postgres_url, TailPerTransaction(), account_ids)
    _slow_balance_writes(bank.engine)
    deadlocks = _deadlocks(bank.engine)
    for _ in range(GATED_ROUNDS):
        there, back = bank.both_ways()
        with _rows_held(bank.engine, bank.alice.primary, bank.bob.primary) as let_go:
            _together(there, back, started=let_go)
        assert deadlocks == []
    assert bank.balances() == [Decimal(BALANCE)] * 2


@pytest.mark.postgres
def test_opposite_internal_transfers_unserialised_by_the_tail_lock_their_rows_in_one_order(
    fresh_postgres_url: str,
) -> None:
    """The internal transfer's two balance writes, in the same worst interleaving."""
    rails, owner = _rails(fresh_postgres_url, TailPerTransaction())
    engine = get_engine(fresh_postgres_url)
    _slow_balance_writes(engine)
    deadlocks = _deadlocks(engine)
    for _ in range(GATED_ROUNDS):
        there, back = _internal_both_ways(rails, owner)
        with _rows_held(engine, *owner.account_ids) as let_go:
            _together(there, back, started=let_go)
        assert deadlocks == []
    assert _balances(engine, *owner.account_ids) == [Decimal(BALANCE)] * 2
