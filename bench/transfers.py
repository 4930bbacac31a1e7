"""Benchmark: the audit chain's critical section over a simulated network (statements per
transfer, round trips from the tail lock to the commit, transfers/s before ÷ after the one round
trip of writes), the external transfer's throughput with ADR-0050's application lock ÷ without
it, and the daily sum's latency on a small vs a large ledger, on PostgreSQL.

    python -m bench.transfers [--parts network,lock,sum] [--users 1000]
                              [--network-clients 16] [--network-transfers 1500] [--delay-ms 1]
                              [--clients 8] [--transfers 3000]
                              [--small-history 1000] [--large-history 1000000]

The `network` part: bench/transfer_network.py says what it measures and how.

Creates its own PostgreSQL database (dropped at the end) and migrates it. Calls the service
layer directly (TransferService.transfer: pre-check, then the locked transaction with the key's
claim, the sum, balance, audit append, both balance writes, ledger rows, the conditional spend
and the key's record), from
`--clients` threads, each on its own pooled connection; no HTTP. Authorizations are inserted in
bulk beforehand (the mint is not what is measured). Speed is never asserted in tests.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import queue
import random
import statistics
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine, create_engine, insert, text
from sqlalchemy.engine import make_url

from bench import transfer_network
from bench.worktree import worktree
from shared.bootstrap import bootstrap
from shared.db import migrate
from shared.db.engine import build_engine
from shared.db.schema import Account, AspNetUser, AuthorizationStatus, TransferAuthorization
from shared.db.uow import unit_of_work
from shared.errors import DomainError
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit, daily_outflow_statement
from shared.money.idempotency import IdempotencyClaim
from shared.money.transfers import TransferOrder, TransferReceipt, TransferService
from shared.settings import Settings, load_settings
from tests.support.clock import FakeClock
from tests.support.no_lock import NoDailyLimitLock

ADMIN_URL = os.environ.get(
    "AZUREBANK_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
DAY = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
AMOUNT = Decimal(1)


def _admin(sql: str) -> None:
    engine = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def _seed_users(engine: Engine, users: int) -> list[tuple[str, uuid.UUID, str]]:
    """`users` customers with one funded account each: (user id, account id, tag)."""
    rows = []
    with engine.begin() as conn:
        for i in range(users):
            user_id, account_id, tag = str(uuid.uuid4()), uuid.uuid4(), f"bench-{i:05d}"
            conn.execute(
                insert(AspNetUser).values(
                    Id=user_id,
                    UserName=tag,
                    NormalizedUserName=tag.upper(),
                    EmailConfirmed=True,
                    PhoneNumberConfirmed=False,
                    TwoFactorEnabled=False,
                    LockoutEnabled=True,
                    AccessFailedCount=0,
                    AzureTag=tag,
                    PinAccessFailedCount=0,
                )
            )
            conn.execute(
                insert(Account).values(
                    Id=account_id,
                    UserId=user_id,
                    Name="Main",
                    Balance=Decimal(1_000_000),
                    Currency="EUR",
                    IsDeleted=False,
                    CreatedAt=DAY - timedelta(days=400),
                    Version=1,
                )
            )
            rows.append((user_id, account_id, tag))
    return rows


def _orders(
    engine: Engine, users: list[tuple[str, uuid.UUID, str]], count: int, rng: random.Random
) -> list[tuple[str, TransferOrder]]:
    """`count` minted authorizations, each from a random user to another random user."""
    orders, values = [], []
    for _ in range(count):
        payer, payee = rng.sample(users, 2)
        auth_id = uuid.uuid4()
        values.append(
            {
                "Id": auth_id,
                "UserId": payer[0],
                "AccountId": payer[1],
                "RecipientAzureTag": payee[2],
                "Amount": AMOUNT,
                "Status": AuthorizationStatus.PENDING.value,
                "CreatedAt": DAY,
                "ExpiresAt": DAY + timedelta(hours=1),
            }
        )
        orders.append((payer[0], TransferOrder(payer[1], payee[2], AMOUNT, auth_id)))
    with engine.begin() as conn:
        conn.execute(insert(TransferAuthorization), values)
    return orders


def _throughput(
    service: TransferService, orders: list[tuple[str, TransferOrder]], clients: int
) -> tuple[float, int]:
    work: queue.SimpleQueue[tuple[str, TransferOrder]] = queue.SimpleQueue()
    for order in orders:
        work.put(order)
    refused = [0]
    lock = threading.Lock()

    def client() -> None:
        while True:
            try:
                user_id, order = work.get_nowait()
            except queue.Empty:
                return
            try:
                service.transfer(_claim(user_id), order)
            except DomainError:
                with lock:
                    refused[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return len(orders) / elapsed, refused[0]


def _claim(user_id: str) -> IdempotencyClaim[TransferReceipt]:
    """A key of its own for each transfer (its claim is part of the transfer's transaction)."""
    return IdempotencyClaim(user_id, "transfer", uuid.uuid4().hex, "0" * 64, 201, _body)


def _body(receipt: TransferReceipt) -> str:
    return f'{{"id":"{receipt.transaction_id}"}}'


def _grow_history(engine: Engine, rows: int, accounts: list[uuid.UUID]) -> None:
    """Add `rows` ledger rows spread over every account and the past year (a third external
    TransferOut, the rest deposits), then ANALYZE."""
    with engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO "Transactions" ("Id", "AccountId", "Type", "Amount", "Status", '
                '"RecipientAzureTag", "CreatedAt") '
                "SELECT gen_random_uuid(), "
                "(CAST(:accounts AS uuid[]))[1 + (g % :n)], "
                "CASE WHEN g % 3 = 0 THEN 'TransferOut' ELSE 'Deposit' END, 1, 'Completed', "
                "CASE WHEN g % 3 = 0 THEN 'someone' END, "
                "TIMESTAMP '2025-09-07' + ((g % 525600) || ' minutes')::interval "
                "FROM generate_series(1, :rows) AS g"
            ),
            {"accounts": [str(a) for a in accounts], "n": len(accounts), "rows": rows},
        )
        conn.execute(text('ANALYZE "Transactions"'))
        conn.execute(text('ANALYZE "Accounts"'))


def _sum_latency(engine: Engine, users: list[str], samples: int) -> float:
    """Median seconds of one DailyOutflowLimit.used (its own short read transaction)."""
    limit = DailyOutflowLimit(Decimal(5000), FakeClock(DAY))
    timings = []
    for user_id in users[:samples]:
        with unit_of_work(engine) as session:
            started = time.perf_counter()
            limit.used(session, user_id, DAY)
            timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def _plan(engine: Engine, user_id: str) -> str:
    start = DAY.replace(hour=0)
    query = daily_outflow_statement().params(
        user_id=user_id, day_start=start, day_end=start + timedelta(days=1)
    )
    compiled = query.compile(engine, compile_kwargs={"literal_binds": True})
    with engine.connect() as conn:
        return "\n".join(r[0] for r in conn.execute(text(f"EXPLAIN {compiled}")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="network,lock,sum", help="comma-separated")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--network-clients", type=int, default=16)
    parser.add_argument("--network-transfers", type=int, default=1500, help="per run")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="per round trip")
    parser.add_argument(
        "--before",
        metavar="REV",
        help="network: also run REV's code (a git worktree), each round first",
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--transfers", type=int, default=3000)
    parser.add_argument("--small-history", type=int, default=1000)
    parser.add_argument("--large-history", type=int, default=1_000_000)
    parser.add_argument("--sum-samples", type=int, default=300)
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    name = f"azurebank_bench_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}"')
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    engine = None
    try:
        migrate.upgrade(url)
        engine = build_engine(url)
        rng = random.Random(7)
        users = _seed_users(engine, args.users)
        clock = FakeClock(DAY)
        environ = {
            "Database__Url": url,
            "Audit__ChainKey": base64.b64encode(b"b" * 32).decode(),
            "DailyLimit__Amount": "99999",
        }
        settings = load_settings(environ)
        if "network" in parts:
            checkout = worktree(args.before) if args.before else contextlib.nullcontext(None)
            with checkout as tree:
                results = transfer_network.run(
                    url,
                    environ,
                    engine,
                    users,
                    rng,
                    clients=args.network_clients,
                    transfers=args.network_transfers,
                    delay=args.delay_ms / 1000,
                    day=DAY,
                    before=None if tree is None else (args.before, tree),
                )
            transfer_network.report(
                results, clients=args.network_clients, delay=args.delay_ms / 1000
            )
        if "lock" in parts:
            _lock_part(args, engine, users, rng, settings, clock)
        if "sum" in parts:
            _sum_part(args, engine, users, rng)
    finally:
        if engine is not None:
            engine.dispose()
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _lock_part(
    args: argparse.Namespace,
    engine: Engine,
    users: list[tuple[str, uuid.UUID, str]],
    rng: random.Random,
    settings: Settings,
    clock: FakeClock,
) -> None:
    print(
        f"transfers: {args.users} users, {args.clients} clients, {args.transfers} transfers "
        "per run, service layer (TransferService.transfer), PostgreSQL"
    )
    rates: dict[bool, list[float]] = {True: [], False: []}
    # Alternate the two modes twice, so drift on a shared machine hits both alike.
    for enabled in (True, False, True, False):
        # Without: the no-op lock the control test hands the composition root.
        lock = DailyLimitLock(10) if enabled else NoDailyLimitLock()
        service = bootstrap(settings, engine, clock, daily_limit_lock=lock).transfers
        orders = _orders(engine, users, args.transfers, rng)
        rate, refused = _throughput(service, orders, args.clients)
        rates[enabled].append(rate)
        label = "with lock   " if enabled else "without lock"
        print(f"  {label}: {rate:8.1f} transfers/s ({refused} refused)")
    with_lock, without = statistics.mean(rates[True]), statistics.mean(rates[False])
    print(f"  ratio with ÷ without: {with_lock / without:.3f}")


def _sum_part(
    args: argparse.Namespace,
    engine: Engine,
    users: list[tuple[str, uuid.UUID, str]],
    rng: random.Random,
) -> None:
    accounts = [a for _, a, _ in users]
    user_ids = [u for u, _, _ in users]
    rng.shuffle(user_ids)
    with engine.begin() as conn:
        conn.execute(text('DELETE FROM "Transactions"'))
    _grow_history(engine, args.small_history, accounts)
    small = _sum_latency(engine, user_ids, args.sum_samples)
    _grow_history(engine, args.large_history - args.small_history, accounts)
    large = _sum_latency(engine, user_ids, args.sum_samples)
    print(
        f"daily sum: median {small * 1e3:.3f} ms with {args.small_history:,} history rows, "
        f"{large * 1e3:.3f} ms with {args.large_history:,}; "
        f"ratio large ÷ small: {large / small:.2f}"
    )
    print("plan at the large size:\n  " + _plan(engine, user_ids[0]).replace("\n", "\n  "))


if __name__ == "__main__":
    main()
