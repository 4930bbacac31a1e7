"""ADR-0050 D5 under real concurrency: the application lock keeps a user's day within the limit
when transfers share no row; the concurrency token keeps it when they share one; a held lock
answers 503 LOCK_TIMEOUT after about DailyLimit__LockTimeoutSeconds and delays nobody else.

The control (`AZUREBANK_RUN_CONTROLS=1`) runs the eight-accounts test with the lock disabled; it
is expected to FAIL, showing the day exceed the limit (ADR-0050 D5: "a day of 800")."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from shared.bootstrap import bootstrap
from shared.db.engine import EngineOptions, get_engine
from shared.db.schema import Account, AspNetUser
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.errors import DomainError
from shared.money.applock_sql import take_daily_limit_lock
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.mint import MintRequest, TransferMint
from shared.money.transfers import TransferOrder, TransferService
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed, open_bank, unique_key
from tests.support.no_lock import NoDailyLimitLock
from tests.support.users import PIN, enrol_pin, make_user

pytestmark = pytest.mark.adr("0050", "D5")

RUN_CONTROLS = os.environ.get("AZUREBANK_RUN_CONTROLS") == "1"
CEILING = Decimal(500)
START = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
# An engine default lock wait far above DailyLimit__LockTimeoutSeconds, to tell the two apart.
ENGINE_LOCK_WAIT = 20

lock_modes = [
    pytest.param(True, id="with-lock"),
    pytest.param(
        False,
        id="CONTROL-without-lock",
        marks=pytest.mark.skipif(not RUN_CONTROLS, reason="control: AZUREBANK_RUN_CONTROLS=1"),
    ),
]


@dataclass
class Services:
    engine: Engine
    clock: FakeClock
    limit: DailyOutflowLimit
    mint: TransferMint
    transfer: TransferService


def _services(
    url: str, *, lock_enabled: bool, timeout: int = 10, engine: EngineOptions | None = None
) -> Services:
    """The host's services through the composition root, on an engine of `engine`'s options;
    without the lock, the root is handed one that takes none."""
    clock = FakeClock(START)
    settings = load_settings(
        {
            "Database__Url": url,
            "Audit__ChainKey": CHAIN_KEY,
            "DailyLimit__Amount": str(CEILING),
            "DailyLimit__LockTimeoutSeconds": str(timeout),
        }
    )
    built = bootstrap(
        settings,
        get_engine(url, engine),
        clock,
        daily_limit_lock=None if lock_enabled else NoDailyLimitLock(),
    )
    return Services(built.engine, clock, built.limit, built.mint, built.transfers)


def _run_together(calls: list[functools.partial[object]]) -> list[object]:
    """Start every call at once (a barrier), each on its own thread and connection."""
    barrier = threading.Barrier(len(calls))
    outcomes: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = calls[i]()
        except DomainError as exc:
            outcomes[i] = exc.error_code

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return outcomes


def _day_used(s: Services, user_id: str) -> Decimal:
    with unit_of_work(s.engine) as session:
        return s.limit.used(session, user_id, s.clock.now())


@pytest.mark.parametrize("lock_enabled", lock_modes)
def test_eight_accounts_of_one_user_one_transfer_each_never_exceed_the_day(
    server_url: str, lock_enabled: bool
) -> None:
    """D5's tripwire: eight transfers of 100 from eight accounts to eight payees share no row,
    so only the per-user lock keeps the day at 500 (five 201s, three 422s), round after round."""
    url = server_url
    s = _services(url, lock_enabled=lock_enabled)
    payer = make_user(url, s.clock, balance=10_000, accounts=8)
    enrol_pin(url, payer.user_id)
    payees = [make_user(url, s.clock) for _ in range(8)]
    with unit_of_work(s.engine) as session:
        tags = [session.get_one(AspNetUser, p.user_id).AzureTag for p in payees]
    days: list[Decimal] = []
    for round_ in range(20):
        s.clock.set(START + timedelta(days=round_))
        orders = []
        for account, tag in zip(payer.account_ids, tags, strict=True):
            grant = s.mint.mint(payer.user_id, MintRequest(account, tag, Decimal(100), PIN))
            orders.append(TransferOrder(account, tag, Decimal(100), grant.authorization_id))
        outcomes = _run_together(
            [
                functools.partial(s.transfer.transfer, keyed(payer.user_id), order)
                for order in orders
            ]
        )
        used = _day_used(s, payer.user_id)
        days.append(used)
        refusals = [o for o in outcomes if isinstance(o, str)]
        assert used <= CEILING, f"round {round_}: the day reached {used}; days so far {days}"
        assert len(refusals) == 3 and set(refusals) == {"DAILY_LIMIT_EXCEEDED"}, outcomes
    assert days == [CEILING] * 20


@pytest.mark.parametrize("lock_enabled", [True, False], ids=["with-lock", "token-only"])
def test_one_account_parallel_transfers_never_exceed_the_day_through_the_token_retry(
    server_url: str, lock_enabled: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """ADR-0050 Verification: one payer account serialises through its concurrency token with or
    without the lock: a loser re-runs the whole transaction and re-sums the day."""
    url = server_url
    s = _services(url, lock_enabled=lock_enabled)
    payer = make_user(url, s.clock, balance=10_000)
    enrol_pin(url, payer.user_id)
    payee = make_user(url, s.clock)
    with unit_of_work(s.engine) as session:
        tag = session.get_one(AspNetUser, payee.user_id).AzureTag
    account = payer.account_ids[0]
    caplog.set_level("INFO", logger="azurebank.money")
    for round_ in range(20):
        s.clock.set(START + timedelta(days=round_))
        orders = [
            TransferOrder(
                account,
                tag,
                Decimal(100),
                s.mint.mint(
                    payer.user_id, MintRequest(account, tag, Decimal(100), PIN)
                ).authorization_id,
            )
            for _ in range(8)
        ]
        outcomes = _run_together(
            [functools.partial(s.transfer.transfer, keyed(payer.user_id), o) for o in orders]
        )
        assert _day_used(s, payer.user_id) == CEILING
        assert sorted(o for o in outcomes if isinstance(o, str)) == ["DAILY_LIMIT_EXCEEDED"] * 3
    with unit_of_work(s.engine) as session:
        balance = session.get_one(Account, account).Balance
    assert balance == Decimal(10_000 - 20 * 500)
    if not lock_enabled:
        # Without the lock the losers really raced (and retried) on the account's token.
        assert any("lost a race" in r.getMessage() for r in caplog.records)


def _hold_lock(engine: Engine, user_id: str) -> Session:
    """The user's daily-limit lock, taken as a transfer takes it, held until rolled back."""
    holder = Session(engine)
    take_daily_limit_lock(holder, user_id, 30)
    return holder


def test_a_held_lock_answers_503_lock_timeout_after_the_timeout_and_delays_no_other_user(
    server_url: str,
) -> None:
    """D5: the wait is bounded by DailyLimit__LockTimeoutSeconds (1 here); the timeout is a fault,
    never the 422, and is not stored (the same key succeeds once the lock is free). Another
    user's transfer completes while the lock is still held."""
    url = server_url
    with open_bank(url, DailyLimit__LockTimeoutSeconds="1") as bank:
        alice, bob = bank.customer(balance=100), bank.customer(balance=100)
        carol = bank.customer()
        alice_auth = bank.authorize(alice, 10, carol)
        bob_auth = bank.authorize(bob, 10, carol)
        holder = _hold_lock(get_engine(url), alice.user_id)
        try:
            key = unique_key()
            started = time.monotonic()
            waited = bank.transfer(alice, 10, carol, alice_auth, key=key)
            elapsed = time.monotonic() - started
            other_started = time.monotonic()
            other = bank.transfer(bob, 10, carol, bob_auth)
            other_elapsed = time.monotonic() - other_started
        finally:
            holder.rollback()
            holder.close()
        assert (waited.status_code, waited.json()["errorCode"]) == (503, "LOCK_TIMEOUT")
        assert waited.headers["Retry-After"] == "1"
        assert 0.9 <= elapsed < 15, elapsed
        assert other.status_code == 201, other.text  # completed under alice's held lock
        print(f"lock timeout answered after {elapsed:.2f}s; bob's transfer {other_elapsed:.2f}s")
        retried = bank.transfer(alice, 10, carol, alice_auth, key=key)
        assert retried.status_code == 201, retried.text
        assert "idempotency-replayed" not in retried.headers


def test_a_held_write_lock_on_sqlite_answers_503_lock_timeout(sqlite_url: str) -> None:
    """SQLite's application lock is the database's one write lock (BEGIN IMMEDIATE with the busy
    timeout = the lock timeout, not the engine's longer default): held elsewhere, a transfer
    answers 503, not 422 or 500. (On SQLite every writer waits for it: one host, one writer.)"""
    engine = EngineOptions(lock_timeout=ENGINE_LOCK_WAIT, statement_timeout=ENGINE_LOCK_WAIT + 5)
    s = _services(sqlite_url, lock_enabled=True, timeout=1, engine=engine)
    payer = make_user(sqlite_url, s.clock, balance=100)
    enrol_pin(sqlite_url, payer.user_id)
    payee = make_user(sqlite_url, s.clock)
    with unit_of_work(s.engine) as session:
        tag = session.get_one(AspNetUser, payee.user_id).AzureTag
    grant = s.mint.mint(payer.user_id, MintRequest(payer.account_ids[0], tag, Decimal(10), PIN))
    order = TransferOrder(payer.account_ids[0], tag, Decimal(10), grant.authorization_id)
    with writing_unit_of_work(s.engine) as holder:
        holder.connection()  # BEGIN IMMEDIATE: the write lock is held
        started = time.monotonic()
        with pytest.raises(DomainError) as refused:
            s.transfer.transfer(keyed(payer.user_id), order)
        elapsed = time.monotonic() - started
    assert (refused.value.status, refused.value.error_code) == (503, "LOCK_TIMEOUT")
    assert 0.9 <= elapsed < ENGINE_LOCK_WAIT / 2, elapsed
    assert json.loads(s.transfer.transfer(keyed(payer.user_id), order).body)["amount"] == 10
