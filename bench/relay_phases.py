"""Benchmark: where one relay row's time goes, on PostgreSQL (bench/README.md, Relay).

    python -m bench.relay_phases [--rows 1500] [--batch 100]

One runner's sweeps, as `bench.relay` runs them, with each step of the sweep and of
NoticeDeliveryRun timed by wrapping it (perf_counter around the call; the wrapping itself costs a
few microseconds a call). Per-sweep steps are shown divided by the rows delivered. Its own
database, created, migrated and dropped, as `bench.relay` does.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import shared.notices.delivery as delivery
import shared.notices.sweep as sweep
from bench.relay import _owe, _relay, bench_database
from shared.db import migrate
from shared.db.engine import build_engine
from shared.notices.claim import NoticeClaim
from shared.notices.transports import PickupDirectoryTransport

_spent: defaultdict[str, float] = defaultdict(float)


def _timed(owner: Any, name: str, label: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            _spent[label] += time.perf_counter() - started

    setattr(owner, name, wrapper)


def _timed_unit_of_work(module: Any, label: str) -> None:
    # A unit of work as a whole: checkout (with the pool's pre-ping), BEGIN, its statements,
    # COMMIT, close. The mark's is NoticeDeliveryRun's only one; the sweep's holds the claim, the
    # re-read and the leases query.
    inner = module.writing_unit_of_work

    @contextlib.contextmanager
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        started = time.perf_counter()
        try:
            with inner(*args, **kwargs) as session:
                yield session
        finally:
            _spent[label] += time.perf_counter() - started

    module.writing_unit_of_work = wrapper


MARK = "mark (checkout, UPDATE, COMMIT)"
SWEEP_UNIT = "its unit of work (checkout, the three above, COMMIT)"


STEPS = (
    ("per sweep", "claim (renew + claim)", NoticeClaim, "take"),
    (
        "per sweep",
        "re-read by name with address and evidence",
        NoticeClaim,
        "held",
    ),
    ("per sweep", "other runners' leases", sweep, "lease_holders"),
    ("per row", "address check", delivery, "address_problem"),
    ("per row", "render", delivery, "render_notice"),
    ("per row", "transport (temp, fsync, link, fsync dir)", PickupDirectoryTransport, "deliver"),
    (
        "per sweep",
        "leftover temporaries (scan the pickup)",
        PickupDirectoryTransport,
        "remove_leftovers",
    ),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()

    null = open(os.devnull, "w")  # noqa: SIM115 (closed at the end)
    logging.basicConfig(level=logging.INFO, handlers=[logging.StreamHandler(null)], force=True)
    for _, label, owner, name in STEPS:
        _timed(owner, name, label)
    _timed(delivery.NoticeDeliveryRun, "deliver", "row total")
    _timed_unit_of_work(delivery, MARK)
    _timed_unit_of_work(sweep, SWEEP_UNIT)

    directory = tempfile.mkdtemp(prefix="azurebank-bench-pickup-")
    try:
        with bench_database() as url:
            migrate.upgrade(url)
            engine = build_engine(url)
            try:
                count = len(_owe(engine, args.rows))
                _spent.clear()
                started = time.perf_counter()
                rate = _relay(engine, count, directory, batch=args.batch)
                elapsed = time.perf_counter() - started
            finally:
                engine.dispose()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        null.close()

    def ms(label: str) -> float:
        return _spent[label] / count * 1000

    def line(kind: str, label: str, value: float) -> None:
        print(f"  {kind:9s} {label:44s} {value:6.3f} ms a row")

    per_row = elapsed / count * 1000
    print(f"relay, batch {args.batch}, {count} rows: {rate:.0f} rows/s, {per_row:.2f} ms a row")
    parts = 0.0
    for kind, label, _, _ in STEPS:
        line(kind, label, ms(label))
        parts += ms(label) if kind == "per row" else 0.0
    line("per sweep", SWEEP_UNIT, ms(SWEEP_UNIT))
    line("per row", MARK, ms(MARK))
    parts += ms(MARK)
    line("per row", "the rest (log line, outcome, lease check)", ms("row total") - parts)
    line("", "the sweep beyond its rows", per_row - ms("row total"))


if __name__ == "__main__":
    main()
