"""The audit chain's critical section over a simulated network (part of `bench/transfers.py`).

Every transfer of the bank serialises on the chain's tail lock, so the bank's transfer rate is
bounded by how long one transfer holds it: its round trips from the tail lock to the commit,
each costing a network latency. Measured here, on PostgreSQL, with a statement counter on the
engine (not by reading the code):

- statements per transfer, and round trips from the tail lock to the commit (commit included);
- transfers/s with `clients` client PROCESSES (Function instances are processes: threads would
  add the GIL's waits to the time the tail is held) at a fixed simulated latency per round trip:
  `time.sleep(delay)` before every cursor execute, at every BEGIN (psycopg sends it as its own
  round trip), COMMIT and ROLLBACK (none of the three outside a transaction), and at every pool
  checkout (the pre-ping's round trip);
- the two write paths in ONE run, alternated (before, after, before, after) over the same
  customers: "before" hands the composition root `one_statement_per_write`
  (shared/money/transfer_write_sql.py), every write after the tail lock its own statement
  (SQLite's path, and the writes main made one by one); "after" is the one round trip. Both
  share everything outside the critical section, so their ratio is the critical section's alone;
- with `before=(revision, worktree)`, that revision's code as well, each round first, from client
  processes of its own started on the worktree (bench/worktree.py): main as it was, every saving
  of the work outside the critical section included.

Each transfer is TransferService.transfer with its success stored with the money. This tree
claims the key inside the transfer's own transaction (its first statement); an earlier revision
claimed it in a transaction of its own before the transfer, so for those the markers are
claimed beforehand in bulk, as authorizations are minted in bulk (neither that claim nor the mint
is what is measured), under keys of their own that this tree's claims never meet.
"""

from __future__ import annotations

import inspect
import multiprocessing
import multiprocessing.synchronize
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, insert
from sqlalchemy.orm import Session

from shared.audit.tail_sql import postgresql_tail_lock
from shared.bootstrap import bootstrap
from shared.db.engine import build_engine
from shared.db.schema import (
    AuthorizationStatus,
    IdempotencyRecord,
    IdempotencyState,
    TransferAuthorization,
)
from shared.errors import DomainError
from shared.money.applock_sql import DailyLimitLock
from shared.money.transfers import TransferOrder, TransferService
from shared.settings import Settings
from tests.support.clock import FakeClock

AMOUNT = Decimal(1)
BEFORE, AFTER = "before (one statement per write)", "after (one round trip)"


@dataclass(frozen=True)
class Order:
    user_id: str
    account_id: uuid.UUID
    payee_tag: str
    authorization_id: uuid.UUID
    record_id: uuid.UUID


@dataclass
class Counts:
    """What one client process sent: statements, and per locked transaction its round trips
    from the tail lock to its end (commit or rollback included)."""

    transfers: int = 0
    refused: int = 0
    statements: int = 0
    locked_transactions: int = 0
    round_trips_under_the_tail: int = 0
    finished_at: float = 0.0
    # Seconds from the tail lock's answer (the lock granted) to the end of the commit.
    holds: list[float] = field(default_factory=list)

    def add(self, other: Counts) -> None:
        for name in ("transfers", "refused", "statements", "locked_transactions"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.round_trips_under_the_tail += other.round_trips_under_the_tail
        self.finished_at = max(self.finished_at, other.finished_at)
        self.holds.extend(other.holds)


def make_orders(
    engine: Engine,
    users: Sequence[tuple[str, uuid.UUID, str]],
    count: int,
    rng: Any,
    day: datetime,
) -> list[Order]:
    """`count` minted authorizations and claimed idempotency markers, each from a random user to
    another."""
    orders, authorizations, markers = [], [], []
    for _ in range(count):
        payer, payee = rng.sample(list(users), 2)
        order = Order(payer[0], payer[1], payee[2], uuid.uuid4(), uuid.uuid4())
        authorizations.append(
            {
                "Id": order.authorization_id,
                "UserId": order.user_id,
                "AccountId": order.account_id,
                "RecipientAzureTag": order.payee_tag,
                "Amount": AMOUNT,
                "Status": AuthorizationStatus.PENDING.value,
                "CreatedAt": day,
                "ExpiresAt": day + timedelta(hours=1),
            }
        )
        markers.append(
            {
                "Id": order.record_id,
                "UserId": order.user_id,
                "Operation": "transfer",
                "Key": order.record_id.hex,
                "RequestHash": "0" * 64,
                "State": IdempotencyState.IN_PROGRESS.value,
                "CreatedAt": day,
            }
        )
        orders.append(order)
    with engine.begin() as conn:
        conn.execute(insert(TransferAuthorization), authorizations)
        conn.execute(insert(IdempotencyRecord), markers)
    return orders


# mccabe counts the nested listeners into this function; each is one or two branches.
def _network(engine: Engine, delay: float, counts: Counts) -> Callable[[], None]:  # noqa: C901
    """The simulated network and the statement counter, on the client's engine; returns what
    removes them."""
    tail_lock = str(postgresql_tail_lock().compile(dialect=engine.dialect))

    def round_trip(*_args: object) -> None:
        if delay:
            time.sleep(delay)

    def statement(conn: Any, _cursor: object, sql: str, *_rest: object) -> None:
        counts.statements += 1
        if sql == tail_lock:
            conn.info["under_the_tail"] = 0
        if "under_the_tail" in conn.info:
            conn.info["under_the_tail"] += 1
        round_trip()

    def end(conn: Any) -> None:
        under = conn.info.pop("under_the_tail", None)
        if under is not None:
            counts.locked_transactions += 1
            counts.round_trips_under_the_tail += under + 1  # the commit (or rollback)
        transaction_round_trip(conn)

    def transaction_round_trip(conn: Any) -> None:
        # Outside a transaction (AUTOCOMMIT: shared.db.uow.one_read) psycopg sends no BEGIN and
        # no ROLLBACK, though SQLAlchemy's events still mark its logical transaction.
        if not conn.connection.driver_connection.autocommit:
            round_trip()

    held_since: list[float] = []  # one client thread per process

    def granted(_conn: object, _cursor: object, sql: str, *_rest: object) -> None:
        if sql == tail_lock:
            held_since[:] = [time.perf_counter()]

    def released(_session: object) -> None:
        if held_since:
            counts.holds.append(time.perf_counter() - held_since.pop())

    listeners: list[tuple[Any, str, Callable[..., None]]] = [
        (engine, "before_cursor_execute", statement),
        (engine, "after_cursor_execute", granted),
        (engine, "begin", transaction_round_trip),
        (engine, "commit", end),
        (engine, "rollback", end),
        (engine.pool, "checkout", round_trip),
        (Session, "after_commit", released),
        (Session, "after_rollback", released),
    ]
    for target, name, fn in listeners:
        event.listen(target, name, fn)

    def remove() -> None:
        for target, name, fn in listeners:
            event.remove(target, name, fn)

    return remove


def _client(
    url: str,
    environ: dict[str, str],
    day: datetime,
    delay: float,
    phases: list[tuple[str, list[Order]]],
    barrier: multiprocessing.synchronize.Barrier,
    next_order: Synchronized[int],
    results: multiprocessing.Queue[tuple[str, Counts]],
) -> None:
    """One client process: each phase's orders, taken one at a time from the shared counter.
    In a process started on an earlier revision's worktree (`run(before=...)`) every path is
    that revision's own service, as its bootstrap builds it."""
    from shared.settings import load_settings

    settings: Settings = load_settings(environ)
    engine = build_engine(url)
    clock = FakeClock(day)
    transfer = _transfer_of_this_tree(settings, engine, clock, day)
    for path, orders in phases:
        counts = Counts()
        remove_network = _network(engine, delay, counts)
        barrier.wait()  # every client connected and ready: the clock starts
        while True:
            with next_order.get_lock():
                index = next_order.value
                next_order.value += 1
            if index >= len(orders):
                break
            try:
                transfer(path, orders[index])
                counts.transfers += 1
            except DomainError:
                counts.refused += 1
        counts.finished_at = time.monotonic()
        remove_network()
        results.put((path, counts))
        barrier.wait()  # the phase is over for everybody
    engine.dispose()


def _transfer_of_this_tree(
    settings: Settings, engine: Engine, clock: FakeClock, day: datetime
) -> Callable[[str, Order], object]:
    """One transfer with its success stored with the money, through the service of whichever
    tree this process imported: this checkout's (both paths, the key claimed in the transfer's
    transaction), or an earlier revision's, whose transfer completed a marker claimed before."""
    services = bootstrap(settings, engine, clock)
    try:
        from shared.money.idempotency import HeldKey  # noqa: F401 - which tree this is
    except ImportError:  # a revision before the key was claimed in the money's transaction
        return _marker_transfer(services, settings, engine, clock, day)
    from shared.money.idempotency import IdempotencyClaim

    by_path = _services_by_path(services, settings, engine, clock)

    def transfer(path: str, order: Order) -> object:
        claim = IdempotencyClaim(
            order.user_id, "transfer", f"claimed-{order.record_id.hex}", "0" * 64, 201, _body
        )
        return by_path[path].transfer(claim, _transfer_order(order))

    return transfer


def _services_by_path(
    services: Any, settings: Settings, engine: Engine, clock: FakeClock
) -> dict[str, Any]:
    """Both paths' services, as this tree's composition root builds them: "before" hands it
    the writes one statement each (SQLite's form, run on PostgreSQL). An earlier revision
    chose the form with a flag on the service instead."""
    lock = DailyLimitLock(settings.DailyLimit.LockTimeoutSeconds)
    if "one_round_trip" in inspect.signature(TransferService).parameters:  # an earlier revision
        chain = services.require_audit_chain()
        flagged: Any = TransferService
        return {
            path: flagged(engine, clock, services.limit, lock, chain, one_round_trip=path == AFTER)
            for path in (BEFORE, AFTER)
        }
    from shared.money.transfer_write_sql import one_statement_per_write, write_transfer

    writes = {BEFORE: one_statement_per_write, AFTER: write_transfer}
    return {
        path: bootstrap(
            settings, engine, clock, daily_limit_lock=lock, transfer_writes=writes[path]
        ).transfers
        for path in (BEFORE, AFTER)
    }


def _marker_transfer(
    services: Any, settings: Settings, engine: Engine, clock: FakeClock, day: datetime
) -> Callable[[str, Order], object]:
    """An earlier revision's transfer: its success hook completes the marker claimed before."""
    from shared.money import idempotency

    if not hasattr(idempotency, "SuccessRecord"):
        return _earlier_transfer(services)
    success_record: Any = idempotency.SuccessRecord
    by_path = _services_by_path(services, settings, engine, clock)

    def transfer(path: str, order: Order) -> object:
        def stored(receipt: Any) -> Any:
            return success_record(order.record_id, 201, _body(receipt), day)

        return by_path[path].transfer(order.user_id, _transfer_order(order), on_success=stored)

    return transfer


def _earlier_transfer(services: Any) -> Callable[[str, Order], object]:
    from shared.money import idempotency

    claim_type: Any = idempotency.IdempotencyClaim

    def transfer(_path: str, order: Order) -> object:
        claim = claim_type(
            order.record_id, order.user_id, "transfer", order.record_id.hex, "0" * 64
        )

        def stored(session: Session, receipt: Any) -> None:
            services.idempotency.complete(session, claim, 201, _body(receipt))

        return services.transfers.transfer(order.user_id, _transfer_order(order), on_success=stored)

    return transfer


def _transfer_order(order: Order) -> TransferOrder:
    return TransferOrder(order.account_id, order.payee_tag, AMOUNT, order.authorization_id)


def _body(receipt: Any) -> str:
    return f'{{"id":"{receipt.transaction_id}"}}'


@dataclass(frozen=True)
class PhaseResult:
    path: str
    rate: float
    counts: Counts


def earlier(revision: str) -> str:
    """The path name of an earlier revision's code, measured beside this checkout's."""
    return f"main at {revision} (before the work)"


def run(
    url: str,
    environ: dict[str, str],
    engine: Engine,
    users: Sequence[tuple[str, uuid.UUID, str]],
    rng: Any,
    *,
    clients: int,
    transfers: int,
    delay: float,
    day: datetime,
    before: tuple[str, Path] | None = None,
) -> list[PhaseResult]:
    """Both paths, alternated twice, `transfers` each time, from `clients` processes; with
    `before` (a revision and its worktree), that revision's code too, in each round first, from
    `clients` processes of its own started on its worktree."""
    # Each path's tree, in the order a round runs them: None is this checkout.
    tree_of: dict[str, Path | None] = {} if before is None else {earlier(before[0]): before[1]}
    tree_of |= {BEFORE: None, AFTER: None}
    phases = [(path, make_orders(engine, users, transfers, rng, day)) for path in [*tree_of] * 2]
    spawn = multiprocessing.get_context("spawn")
    next_order = spawn.Value("i", 0)
    results: multiprocessing.Queue[tuple[str, Counts]] = spawn.Queue()
    barriers: dict[Path | None, multiprocessing.synchronize.Barrier] = {}
    processes: list[Any] = []
    for tree in dict.fromkeys(tree_of.values()):
        barriers[tree] = spawn.Barrier(clients + 1)
        its_phases = [phase for phase in phases if tree_of[phase[0]] == tree]
        args = (url, environ, day, delay, its_phases, barriers[tree], next_order, results)
        processes += _start_clients(spawn, tree, clients, args)
    out = []
    try:
        for path, _orders in phases:
            barrier = barriers[tree_of[path]]
            next_order.value = 0
            barrier.wait()
            started = time.monotonic()
            total = Counts()
            for _ in range(clients):
                _path, counts = results.get(timeout=900)
                total.add(counts)
            barrier.wait()
            out.append(PhaseResult(path, total.transfers / (total.finished_at - started), total))
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    return out


def _start_clients(spawn: Any, tree: Path | None, clients: int, args: tuple[Any, ...]) -> list[Any]:
    """`clients` processes running `_client`; on `tree` (an earlier revision's worktree) they
    import that tree's `shared` and this module, copied into it, since a spawned process
    imports what the parent's sys.path finds when it starts."""
    processes = [spawn.Process(target=_client, args=args) for _ in range(clients)]
    if tree is not None:
        shutil.copy(Path(__file__), tree / "bench" / Path(__file__).name)
        sys.path.insert(0, str(tree))
    try:
        for process in processes:
            process.start()
    finally:
        if tree is not None:
            sys.path.remove(str(tree))
    return processes


def report(results: list[PhaseResult], *, clients: int, delay: float) -> None:
    print(
        f"critical section: {clients} client processes, {delay * 1e3:g} ms per round trip "
        "(simulated), service layer with the idempotency record, PostgreSQL"
    )
    for r in results:
        c = r.counts
        hold = statistics.median(c.holds)
        print(
            f"  {r.path:34}: {r.rate:6.1f} transfers/s ({c.refused} refused); "
            f"{c.statements / max(c.transfers, 1):5.2f} statements per transfer; "
            f"{c.round_trips_under_the_tail / max(c.locked_transactions, 1):4.2f} round trips "
            f"from the tail lock to the commit; tail held {hold * 1e3:5.2f} ms (median), "
            f"a bank cap of {1 / hold:6.1f} transfers/s"
        )

    def mean(path: str, of: Callable[[PhaseResult], float]) -> float:
        return statistics.mean(of(r) for r in results if r.path == path)

    def held(r: PhaseResult) -> float:
        return statistics.median(r.counts.holds)

    for baseline in dict.fromkeys(r.path for r in results if r.path != AFTER):
        rates = mean(AFTER, lambda r: r.rate) / mean(baseline, lambda r: r.rate)
        caps = mean(baseline, held) / mean(AFTER, held)
        print(
            f"  ratio after ÷ {baseline}: transfers/s {rates:.2f}; tail held (the cap) {caps:.2f}"
        )
