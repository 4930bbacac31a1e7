"""Benchmark: a cold Functions instance, through the real Python worker (bench/README.md).

    python -m bench.cold_start [--runs 9] [--before REV]

Each round starts the Azure Functions Python worker 4.34.0 (tests/support/python_worker.py) as
Azure starts it on Linux, once per app, on the app's package built as a remote build builds it
(tests/support/remote_build.py: read-only at /home/site/wwwroot, a bare interpreter), and the
suite's stand-in host (tests/support/functions_host.py) drives it over gRPC: WorkerInit,
indexing (FunctionsMetadataRequest: the worker imports function_app.py), one load per Function,
then `GET /api/health` and `GET /api/accounts` with a bearer. Each figure is seconds from the
worker's process start to that answer, the median over the rounds; the apps run back to back in
an order rotated each round, so drift on a shared machine hits every app alike, and a ratio is
the median of the rounds' own ratios.

The apps: this checkout's; "hello", one anonymous HTTP Function (bench/hello_app.py); "minimal",
FastAPI + SQLAlchemy ORM behind func.AsgiMiddleware with one bearer-checked route reading the
caller's account (bench/minimal_app.py); with --before REV, this app at REV too (a git worktree).
The peers run on this app's installed packages (.python_packages), so every app imports the same
versions. The database is a migrated PostgreSQL database with one user and one account, created
and dropped. Settings: what each app requires (this app: Database__Url, Audit__ChainKey and a
local Auth__SigningKey; Notices__Runner None).

After the timed rounds, each app starts once more under PYTHONPROFILEIMPORTTIME (not timed): the
report lists the top-level imports that cost the most, and the package's size.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import os
import re
import shutil
import statistics
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.relay import bench_database
from bench.worktree import worktree
from tests.support.functions_host import WorkerSession, worker_session
from tests.support.python_worker import PythonWorker, python_worker
from tests.support.remote_build import Package, azure_launch, build_package, mounts_wwwroot

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
# What the report prints for each app, from the worker's process start.
PHASES = (
    ("start_stream", "the worker connects (StartStream)"),
    ("worker_init_response", "WorkerInit answered"),
    ("function_metadata_response", "indexing answered (FunctionsMetadata)"),
    ("loaded", "every Function loaded"),
    ("health", "the first GET /api/health answered"),
    ("accounts", "the first authenticated GET /api/accounts answered"),
)
# The answers compared across apps; the goals: indexing ≤ 1.3 × hello, accounts ≤ 1.0 × minimal.
RATIOS = ("function_metadata_response", "health", "accounts")
GOALS = (("function_metadata_response", "hello", 1.3), ("accounts", "minimal", 1.0))
_IMPORT_TIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)$")


@dataclass(frozen=True)
class App:
    label: str
    package: Package
    settings: dict[str, str]
    accounts: bool  # whether it serves GET /api/accounts


def _peer(name: str, module: Path, packages: Path, into: Path) -> Package:
    """A peer app's package: its module as function_app.py, host.json, this app's packages."""
    into.mkdir(parents=True)
    shutil.copy2(module, into / "function_app.py")
    shutil.copy2(REPO / "host.json", into / "host.json")
    (into / ".python_packages").mkdir()
    return Package(into, packages)


def _apps(stack: contextlib.ExitStack, tmp: Path, url: str, before: str | None) -> list[App]:
    ours = {
        "Database__Url": url,
        "Audit__ChainKey": base64.b64encode(os.urandom(32)).decode(),
        "Auth__SigningKey": "cold-start-bench-" + "k" * 32,
    }
    this = build_package(tmp / "azurebank")
    peer = {"Database__Url": url, "Auth__SigningKey": ours["Auth__SigningKey"]}
    apps = [
        App("azurebank", this, ours, True),
        App(
            "hello", _peer("hello", BENCH / "hello_app.py", this.packages, tmp / "hello"), {}, False
        ),
        App(
            "minimal",
            _peer("minimal", BENCH / "minimal_app.py", this.packages, tmp / "min"),
            peer,
            True,
        ),
    ]
    if before:
        checkout = stack.enter_context(worktree(before))
        apps.append(App("before", build_package(tmp / "before", root=checkout), ours, True))
    return apps


def _seed(url: str, signing_key: str) -> str:
    """Migrate, add one user with one account; a bearer token for it."""
    from decimal import Decimal

    from shared.clock import SystemClock
    from shared.db import migrate
    from shared.db.engine import build_engine
    from shared.db.uow import unit_of_work
    from shared.identity.tokens import issue_token
    from shared.identity.users import add_user
    from shared.settings import load_settings

    migrate.upgrade(url)
    engine = build_engine(url)
    try:
        with unit_of_work(engine) as session:
            user = add_user(
                session,
                SystemClock(),
                email="cold@example.test",
                password="correct horse battery staple",
                azure_tag="cold-start",
                balance=Decimal("10.00"),
                hash_iterations=1,
            )
            session.commit()
    finally:
        engine.dispose()
    settings = load_settings({"Auth__SigningKey": signing_key})
    return issue_token(settings, SystemClock(), user.user_id, minutes=240)


@contextlib.contextmanager
def _worker(worker: PythonWorker, app: App, tmp: Path, **extra: str) -> Iterator[WorkerSession]:
    folder = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{app.label}-"))
    (folder / "stage").mkdir()
    launch = azure_launch(worker, app.package, {**app.settings, **extra}, folder / "stage")
    with worker_session(worker, launch, folder) as session:
        yield session
    shutil.rmtree(folder, ignore_errors=True)


def _round(worker: PythonWorker, app: App, tmp: Path, token: str) -> dict[str, float]:
    with _worker(worker, app, tmp) as session:
        session.start()
        marks = dict(session.marks)
        health = session.http("GET", "/api/health")
        if health.status != 200:
            raise SystemExit(f"{app.label}: health answered {health.status}: {health.body!r}")
        marks["health"] = health.at
        if app.accounts:
            accounts = session.http("GET", "/api/accounts", {"Authorization": f"Bearer {token}"})
            if accounts.status != 200 or not accounts.json():
                raise SystemExit(f"{app.label}: accounts answered {accounts.status}")
            marks["accounts"] = accounts.at
    return marks


@dataclass(frozen=True)
class Imported:
    """A top-level import of one start: cumulative µs, its name, and its direct imports'."""

    micros: int
    name: str
    children: tuple[tuple[int, str], ...]


def _import_times(worker: PythonWorker, app: App, tmp: Path, token: str) -> list[Imported]:
    """The top-level imports of one start (the worker's, indexing's, the first requests'),
    the costliest first. `-X importtime` prints each module after the modules it imported, one
    indent deeper: a top-level line closes the second-level lines before it."""
    with _worker(worker, app, tmp, PYTHONPROFILEIMPORTTIME="1") as session:
        session.start()
        session.http("GET", "/api/health")
        if app.accounts:
            session.http("GET", "/api/accounts", {"Authorization": f"Bearer {token}"})
        stderr = session.stderr()
    found: list[Imported] = []
    children: list[tuple[int, str]] = []
    for line in stderr.splitlines():
        match = _IMPORT_TIME.match(line)
        if match is None:
            continue
        micros, depth, name = int(match.group(2)), len(match.group(3)) // 2, match.group(4)
        if depth == 1:
            children.append((micros, name))
        elif depth == 0:
            found.append(Imported(micros, name, tuple(sorted(children, reverse=True))))
            children = []
    return sorted(found, key=lambda i: i.micros, reverse=True)


def package_size(package: Package, tmp: Path) -> tuple[int, float, float]:
    """Files, MB, and MB zipped (deflate) of the package: the app's files and .python_packages."""
    files = [p for p in package.app.rglob("*") if p.is_file()]
    files += [p for p in (package.packages / ".python_packages").rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    archive = tmp / "package.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for p in files:
            zipped.write(
                p, p.relative_to(package.packages if ".python_packages" in p.parts else package.app)
            )
    return len(files), size / 1e6, archive.stat().st_size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="rounds (medians of ≥ 7)")
    parser.add_argument("--before", help="a git revision of this app measured beside it")
    parser.add_argument("--top", type=int, default=6, help="import-time entries per app")
    args = parser.parse_args()
    worker = python_worker()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="azurebank-cold-")))
        url = stack.enter_context(bench_database())
        apps = _apps(stack, tmp, url, args.before)
        token = _seed(url, apps[0].settings["Auth__SigningKey"])
        results: dict[str, list[dict[str, float]]] = {app.label: [] for app in apps}
        for round_ in range(args.runs):
            shift = round_ % len(apps)
            for app in apps[shift:] + apps[:shift]:
                results[app.label].append(_round(worker, app, tmp, token))
        imports = {app.label: _import_times(worker, app, tmp, token) for app in apps}
        size = package_size(apps[0].package, tmp)
    _report(args, results, imports, size)


def _median(results: dict[str, list[dict[str, float]]], app: str, phase: str) -> float | None:
    values = [r[phase] for r in results[app] if phase in r]
    return statistics.median(values) if values else None


def _paired(results: dict[str, list[dict[str, float]]], peer: str, phase: str) -> float | None:
    pairs = zip(results["azurebank"], results[peer], strict=True)
    ratios = [ours[phase] / theirs[phase] for ours, theirs in pairs if phase in theirs]
    return statistics.median(ratios) if ratios else None


def _report(
    args: argparse.Namespace,
    results: dict[str, list[dict[str, float]]],
    imports: dict[str, list[Imported]],
    size: tuple[int, float, float],
) -> None:
    where = "/home/site/wwwroot, read-only" if mounts_wwwroot() else "in place (no mount namespace)"
    print(
        f"cold start through the Python worker 4.34.0: median of {args.runs} rounds, "
        f"{os.cpu_count()} CPUs, package at {where}; seconds from the worker's process start"
    )
    labels = list(results)
    print(f"  {'':52s}" + "".join(f"{label:>10s}" for label in labels))
    for phase, what in PHASES:
        cells = [_median(results, label, phase) for label in labels]
        print(f"  {what:52s}" + "".join("         -" if c is None else f"{c:10.3f}" for c in cells))
    print("  ratios, this app ÷ another, each the median of the rounds' own ratios (the apps of a")
    print("  round run back to back, so a round's ratio is what one moment of the machine gives):")
    for phase, what in [p for p in PHASES if p[0] in RATIOS]:
        for peer in [p for p in labels if p != "azurebank"]:
            ratio = _paired(results, peer, phase)
            if ratio is not None:
                print(f"    {what:52s} ÷ {peer:8s} {ratio:5.2f}")
    for phase, peer, goal in GOALS:
        ratio = _paired(results, peer, phase)
        if ratio is not None:
            verdict = "met" if ratio <= goal else "not met"
            print(f"  goal: {phase} ≤ {goal} × {peer}: {ratio:.2f}, {verdict}")
    print("  each step's own seconds (median):")
    steps = [p for p, _ in PHASES]
    for before, after in itertools.pairwise(["spawn", *steps]):
        row = []
        for label in labels:
            own = [r[after] - r.get(before, 0.0) for r in results[label] if after in r]
            row.append(f"{statistics.median(own):10.3f}" if own else "         -")
        print(f"    {before:>26s} → {after:26s}" + "".join(row))
    _report_imports(args.top, imports)
    files, mb, zipped = size
    print(f"  this app's package: {files} files, {mb:.1f} MB, {zipped:.1f} MB zipped")


def _report_imports(top: int, imports: dict[str, list[Imported]]) -> None:
    print("  -X importtime: each app's costliest top-level imports, cumulative ms (their own):")
    for label, entries in imports.items():
        print(f"    {label}:")
        for entry in entries[:top]:
            inner = ", ".join(f"{name} {us / 1000:.0f}" for us, name in entry.children[:4])
            print(
                f"      {entry.name} {entry.micros / 1000:.0f}" + (f" ({inner})" if inner else "")
            )


if __name__ == "__main__":
    main()
