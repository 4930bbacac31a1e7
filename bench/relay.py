"""Benchmark: the notice relay's delivery rate on PostgreSQL, beside the floor it cannot beat.

    python -m bench.relay [--rows 3000] [--batch1-rows 600] [--rounds 3]

Creates its own PostgreSQL database (dropped at the end), migrates it, and measures, in one run:

- floor: per row, an exclusive create + write + fsync of a notice-sized file and one committed
  UPDATE of the row; no claim, no lease, no evidence, no rendering (what any relay must pay);
- floor + durable name: the same, with the file delivered by the pickup transport itself
  (temporary, fsync, link, fsync of the directory, unlink), so the name survives a crash before
  the mark (ADR-0048 D3);
- floor + durable name + render: and each notice rendered from its row (what every relay that
  keeps D3 and sends a message per notice pays, before claims, leases and evidence);
- relay, batch 100: one runner's NoticeSweep in a loop, into a local temporary directory;
- relay, batch 1: the same with Notices:BatchSize 1 (a claim, a renew and a re-read per row).

Every notice names its audit row, which exists (the exact question of ADR-0052, production's
shape). The relay logs its Information line per notice to a null stream, as a host would format
it. Figures go in bench/README.md; speed is never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, create_engine, insert, select, text, update
from sqlalchemy.engine import make_url

from shared.bootstrap import bootstrap
from shared.clock import SystemClock
from shared.db import migrate
from shared.db.engine import build_engine
from shared.db.schema import AspNetUser, AuditEvent, NoticeKind, SubscriberNotice
from shared.notices.render import render_notice
from shared.notices.transports import PickupDirectoryTransport
from shared.settings import load_settings

ADMIN_URL = os.environ.get(
    "AZUREBANK_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
USERS = 100


def _admin(statement: str) -> None:
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(statement))
    finally:
        admin.dispose()


@contextlib.contextmanager
def bench_database() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database (`azurebank_bench_<hex>`), dropped after."""
    name = f"azurebank_bench_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _owe(engine: Engine, count: int) -> list[uuid.UUID]:
    """`count` owed PinChanged notices over USERS users, each naming its own audit row."""
    now = datetime.now(UTC)
    with engine.begin() as connection:
        users = [str(u) for u in connection.scalars(select(AspNetUser.Id))]
        if not users:
            users = [str(uuid.uuid4()) for _ in range(USERS)]
            connection.execute(
                insert(AspNetUser),
                [
                    {
                        "Id": u,
                        "Email": f"bench{i}@example.com",
                        "AzureTag": f"bench{i}",
                        "EmailConfirmed": True,
                        "PhoneNumberConfirmed": False,
                        "TwoFactorEnabled": False,
                        "LockoutEnabled": True,
                        "AccessFailedCount": 0,
                    }
                    for i, u in enumerate(users)
                ],
            )
        start = connection.scalar(text('SELECT coalesce(max("Sequence"), 0) FROM "AuditEvents"'))
        events = [uuid.uuid4() for _ in range(count)]
        connection.execute(
            insert(AuditEvent),
            [
                {
                    "Id": e,
                    "Sequence": int(start or 0) + i + 1,
                    "PayloadVersion": 1,
                    "ActorUserId": users[i % len(users)],
                    "Event": NoticeKind.PIN_CHANGED.value,
                    "OccurredAt": now,
                    "PreviousHash": b"\0" * 32,
                    "RowHash": b"\1" * 32,
                }
                for i, e in enumerate(events)
            ],
        )
        ids = [uuid.uuid4() for _ in range(count)]
        connection.execute(
            insert(SubscriberNotice),
            [
                {
                    "Id": n,
                    "UserId": users[i % len(users)],
                    "Kind": NoticeKind.PIN_CHANGED.value,
                    "CreatedAt": now + timedelta(microseconds=i),
                    "AuditEventId": events[i],
                }
                for i, n in enumerate(ids)
            ],
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text('VACUUM ANALYZE "SubscriberNotices"'))
    return ids


def _floor(
    engine: Engine,
    ids: list[uuid.UUID],
    directory: str,
    *,
    durable_name: bool = False,
    render: bool = False,
) -> float:
    """Exclusive create + write + fsync + one committed UPDATE per row; rows per second.
    `durable_name` delivers through the pickup transport instead; `render` renders each row."""
    transport = PickupDirectoryTransport(directory)

    def message(notice_id: uuid.UUID) -> bytes:
        return render_notice(
            notice_id=notice_id,
            kind=NoticeKind.PIN_CHANGED,
            occurred_at=datetime.now(UTC),
            address=f"bench{notice_id.int % USERS}@example.com",
            contact="AzureBank security desk, +44 20 7946 0000",
            now=datetime.now(UTC),
        )

    sample = message(ids[0])
    started = time.perf_counter()
    with engine.connect() as connection:
        for notice_id in ids:
            body = message(notice_id) if render else sample
            if durable_name:
                transport.deliver(notice_id, body)
            else:
                fd = os.open(
                    os.path.join(directory, f"{notice_id}.eml"),
                    os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                    0o600,
                )
                try:
                    os.write(fd, body)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            connection.execute(
                update(SubscriberNotice)
                .where(SubscriberNotice.Id == notice_id, SubscriberNotice.DeliveredAt.is_(None))
                .values(DeliveredAt=datetime.now(UTC), DeliveryReceipt=f"pickup:{notice_id}.eml")
            )
            connection.commit()
    return len(ids) / (time.perf_counter() - started)


def _relay(engine: Engine, count: int, directory: str, batch: int) -> float:
    """One runner's sweeps until nothing is free; rows per second."""
    settings = load_settings(
        {
            "Notices__PickupDirectory": directory,
            "Notices__BatchSize": str(batch),
            "Notices__Contact": "AzureBank security desk, +44 20 7946 0000",
        }
    )
    runner = f"function/bench/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    sweep = bootstrap(settings, engine, SystemClock(), runner=runner).sweep
    assert sweep is not None
    delivered = 0
    started = time.perf_counter()
    while True:
        summary = sweep.run()
        if summary.failed_whole or summary.failed or summary.refused:
            raise SystemExit(f"the relay did not deliver cleanly: {summary}")
        delivered += summary.delivered
        if summary.claimed == 0:
            break
    elapsed = time.perf_counter() - started
    if delivered != count:
        raise SystemExit(f"delivered {delivered} of {count}")
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000, help="rows for the floor and batch 100")
    parser.add_argument("--batch1-rows", type=int, default=600, help="rows for batch 1")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, order rotated")
    args = parser.parse_args()

    # Information per delivered notice (ADR-0048 D7) is formatted, then dropped.
    null = open(os.devnull, "w")  # noqa: SIM115 (closed at the end)
    logging.basicConfig(level=logging.INFO, handlers=[logging.StreamHandler(null)], force=True)

    directories: list[str] = []

    def directory() -> str:
        directories.append(tempfile.mkdtemp(prefix="azurebank-bench-pickup-"))
        return directories[-1]

    # Each round runs every measurement once, in an order rotated per round, so the disk's and
    # the other cores' drift hits all of them alike; ratios are taken within a round.
    measurements: dict[str, Callable[[Engine], float]] = {
        "floor": lambda e: _floor(e, _owe(e, args.rows), directory()),
        "named": lambda e: _floor(e, _owe(e, args.rows), directory(), durable_name=True),
        "rendered": lambda e: _floor(
            e, _owe(e, args.rows), directory(), durable_name=True, render=True
        ),
        "batch100": lambda e: _relay(e, len(_owe(e, args.rows)), directory(), batch=100),
        "batch1": lambda e: _relay(e, len(_owe(e, args.batch1_rows)), directory(), batch=1),
    }
    rounds: list[dict[str, float]] = []
    try:
        with bench_database() as url:
            migrate.upgrade(url)
            engine = build_engine(url)
            try:
                names = list(measurements)
                for round_ in range(args.rounds):
                    shift = round_ % len(names)
                    rounds.append(
                        {n: measurements[n](engine) for n in names[shift:] + names[:shift]}
                    )
            finally:
                engine.dispose()
    finally:
        for d in directories:
            shutil.rmtree(d, ignore_errors=True)
        null.close()

    def rate(name: str) -> float:
        return statistics.median(r[name] for r in rounds)

    def ratio(top: str, bottom: str) -> str:
        each = [r[top] / r[bottom] for r in rounds]
        spread = ", ".join(f"{x:.2f}" for x in each)
        return f"{statistics.median(each):5.2f}   (rounds: {spread})"

    print(
        f"notice relay on PostgreSQL, one runner, local temporary directory ({os.cpu_count()} "
        f"CPUs); median of {args.rounds} rounds, order rotated"
    )
    rows = f"({args.rows} rows a round)"
    print(f"  floor (create+write+fsync+1 UPDATE): {rate('floor'):8.0f} rows/s   {rows}")
    print(f"  floor + durable name:                {rate('named'):8.0f} rows/s   {rows}")
    print(f"  floor + durable name + render:       {rate('rendered'):8.0f} rows/s   {rows}")
    print(f"  relay, batch 100:                    {rate('batch100'):8.0f} rows/s   {rows}")
    print(
        f"  relay, batch 1:                      {rate('batch1'):8.0f} rows/s   "
        f"({args.batch1_rows} rows a round)"
    )
    print(f"  floor + durable name / floor:          {ratio('named', 'floor')}")
    print(f"  floor + durable name + render / floor: {ratio('rendered', 'floor')}")
    print(f"  relay batch 100 / floor:               {ratio('batch100', 'floor')}")
    print(f"  relay batch 100 / (floor + name + render): {ratio('batch100', 'rendered')}")
    print(f"  relay batch 100 / batch 1:             {ratio('batch100', 'batch1')}")


if __name__ == "__main__":
    main()
