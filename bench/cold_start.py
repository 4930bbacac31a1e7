"""Benchmark: a cold Functions instance, as the worker meets it (bench/README.md, Cold start).

    python -m bench.cold_start [--runs 9] [--before REV]

Each figure is the median of `--runs` fresh interpreters, timed inside the interpreter from the
first import to the answer (the interpreter's own start is not counted). Per round the commands
run in a rotated order, so drift on a shared machine hits every command alike:

- frameworks: `import azure.functions, fastapi, sqlalchemy.orm, pydantic` (what the app runs on);
- import: `import function_app`;
- import + first health: then `health`'s user function called as the worker calls it,
  `fn.get_user_function()(func.HttpRequest(...), None)`, on the functions `get_functions()`
  indexed;
- import + first accounts: the same for `accounts` with a local bearer token, against a migrated
  PostgreSQL database with one user and one account.

With `--before REV` the three function_app commands also run on a detached git worktree of REV
(same virtualenv, same database, alternated with this checkout's), so before and after are one
run. Each path also lists the heavy modules it imported without needing them (HEAVY: what needs
each). Settings are the defaults plus what the Functions host requires (Database__Url,
Audit__ChainKey) and Auth__SigningKey: no blob container, no managed identity, no JWKS URL, no
telemetry connection string, Notices__Runner None. The database is created and dropped.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

from bench.relay import bench_database
from bench.worktree import worktree

REPO = Path(__file__).resolve().parent.parent

FRAMEWORKS = "import azure.functions, fastapi, sqlalchemy.orm, pydantic"

# Heavy modules, and what needs each; a path that imports one it does not need is listed.
HEAVY: dict[str, str] = {
    "fastapi": "an HTTP request (the one FastAPI app)",
    "sqlalchemy.orm": "the app's routes, or a database",
    "shared.db.schema": "the app's routes, or a database",
    "api_funcs.app": "an HTTP request",
    "jwt": "a bearer token",
    "cryptography": "a bearer token (PyJWT imports it when installed)",
    "shared.identity.jwks": "Auth__JwksUrl",
    "urllib.request": "a bearer token (PyJWT imports it for its JWKS client)",
    "psycopg": "a PostgreSQL database, on first use",
    "pyodbc": "a SQL Server database",
    "azure.identity": "a managed identity (NoticesStorage__blobServiceUri, Entra SQL sign-in)",
    "azure.storage.blob": "Notices__PickupContainer",
    "azure.core.pipeline": "Notices__PickupContainer or a managed identity",
    "alembic": "`azurebank db upgrade`",
    "uvicorn": "`azurebank serve`",
    "shared.notices.sweep": "Notices__Runner=Function, on a tick",
    "shared.notices.render": "Notices__Runner=Function, on a tick",
    "shared.money.transfers": "a money operation (the app's routes)",
    "opentelemetry.sdk": "a telemetry connection string",
    "azure.monitor.opentelemetry": "a telemetry connection string",
}
# What each path needs of HEAVY, with these settings.
NEEDS: dict[str, set[str]] = {
    "import": set(),
    "health": {"fastapi", "sqlalchemy.orm", "shared.db.schema", "api_funcs.app"}
    | {"shared.money.transfers"},
    "accounts": {"fastapi", "sqlalchemy.orm", "shared.db.schema", "api_funcs.app"}
    | {"shared.money.transfers", "jwt", "cryptography", "urllib.request", "psycopg"},
}

CHILD = textwrap.dedent(
    """
    import json, sys, time
    started, started_cpu = time.perf_counter(), time.process_time()
    {imports}
    imported, imported_cpu = time.perf_counter(), time.process_time()
    status = None
    if {call!r}:
        import asyncio
        import azure.functions as func
        fn = next(f for f in function_app.app.get_functions()
                  if f.get_function_name() == {call!r})
        request = func.HttpRequest(method="GET", url="http://localhost/api/" + {call!r},
                                   headers={headers!r}, body=b"", route_params={{}})
        response = asyncio.run(fn.get_user_function()(request, None))
        status = response.status_code
    done, done_cpu = time.perf_counter(), time.process_time()
    heavy = [m for m in {heavy!r} if m in sys.modules]
    print(json.dumps({{"import": imported - started, "total": done - started,
                      "import_cpu": imported_cpu - started_cpu, "total_cpu": done_cpu - started_cpu,
                      "status": status, "heavy": heavy,
                      "shared": sys.modules["shared"].__file__ if "shared" in sys.modules
                                else None}}))
    """
)


def _child(
    checkout: Path, imports: str, call: str, headers: dict[str, str], env: dict[str, str]
) -> dict[str, object]:
    code = CHILD.format(imports=imports, call=call, headers=headers, heavy=list(HEAVY))
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: {imports} / {call} failed:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    shared = result["shared"]
    if isinstance(shared, str) and not shared.startswith(str(checkout)):
        raise SystemExit(f"{checkout}: imported shared from {shared}")
    if call and result["status"] != 200:
        raise SystemExit(f"{checkout}: {call} answered {result['status']}")
    return result


def _seed(url: str, settings_env: dict[str, str]) -> str:
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
    return issue_token(load_settings(settings_env), SystemClock(), user.user_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="fresh interpreters per command (≥7)")
    parser.add_argument("--before", help="a git revision measured beside this checkout")
    args = parser.parse_args()

    with contextlib.ExitStack() as cleanup:
        url = cleanup.enter_context(bench_database())
        settings_env = {
            "Database__Url": url,
            "Audit__ChainKey": base64.b64encode(os.urandom(32)).decode(),
            "Auth__SigningKey": "cold-start-bench-" + "k" * 32,
        }
        token = _seed(url, settings_env)
        # The developer's own app settings must not leak into the measured host.
        env = {k: v for k, v in os.environ.items() if "__" not in k}
        env.update(settings_env)
        checkouts = {"after": REPO}
        if args.before:
            checkouts = {"before": cleanup.enter_context(worktree(args.before)), "after": REPO}
        auth = {"Authorization": f"Bearer {token}"}
        commands: list[tuple[str, Path, str, str, dict[str, str]]] = [
            ("frameworks", REPO, FRAMEWORKS, "", {})
        ]
        for label, checkout in checkouts.items():
            commands += [
                (f"{label} import", checkout, "import function_app", "", {}),
                (f"{label} health", checkout, "import function_app", "health", {}),
                (f"{label} accounts", checkout, "import function_app", "accounts", auth),
            ]
        results: dict[str, list[dict[str, object]]] = {c[0]: [] for c in commands}
        for round_ in range(args.runs):
            shift = round_ % len(commands)
            for label, checkout, imports, call, headers in commands[shift:] + commands[:shift]:
                results[label].append(_child(checkout, imports, call, headers, env))
    _report(args, results, list(checkouts))


def _median(results: list[dict[str, object]], key: str) -> float:
    return statistics.median(float(r[key]) for r in results)  # type: ignore[arg-type]


# (row label, command, the figure's key without its clock suffix)
_ROWS = (
    ("import function_app", "import", "import"),
    ("import + first health", "health", "total"),
    ("import + first accounts", "accounts", "total"),
)


def _report(
    args: argparse.Namespace, results: dict[str, list[dict[str, object]]], labels: list[str]
) -> None:
    print(
        f"cold start: median of {args.runs} fresh interpreters each, PostgreSQL, "
        f"{os.cpu_count()} CPUs; seconds of CPU (process_time) and of wall clock, "
        "timed inside the interpreter"
    )
    for clock, suffix in (("cpu", "_cpu"), ("wall", "")):
        frameworks = _median(results["frameworks"], "import" + suffix)
        print(f"  [{clock}] frameworks ({FRAMEWORKS}): {frameworks:.3f}")
        for label in labels:
            for row, command, key in _ROWS:
                value = _median(results[f"{label} {command}"], key + suffix)
                print(
                    f"  [{clock}] {label:6s} {row:24s} {value:6.3f}   "
                    f"÷ frameworks {value / frameworks:.2f}"
                )
        if "before" in labels:
            for row, command, key in _ROWS:
                b = _median(results[f"before {command}"], key + suffix)
                a = _median(results[f"after {command}"], key + suffix)
                print(f"  [{clock}] after ÷ before, {row:24s} {a / b:.2f}")
    for label in labels:
        for _, command, _ in _ROWS:
            heavy = results[f"{label} {command}"][0]["heavy"]
            assert isinstance(heavy, list)
            unneeded = [m for m in heavy if m not in NEEDS[command]]
            listed = ", ".join(unneeded) or "none"
            print(f"  {label:6s} {command:8s} imports without needing: {listed}")


if __name__ == "__main__":
    main()
