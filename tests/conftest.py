"""Fixtures every ring shares: hermetic settings, a migrated SQLite file per test, a PostgreSQL
database per run (unique name, migrated, dropped), a SQL Server database per test when
AZUREBANK_TEST_SQLSERVER holds a URL (opt-in), the Azurite blob endpoint, and the relay's pickup
directory; the leak watch over every test, and no interpreter started from the unit ring. The
helpers are in tests/support/, one module per concern.

Under CI=true a suite that would be skipped for a missing service fails instead: a green run must
mean the PostgreSQL and Azurite suites ran. SQL Server is opt-in: its skip stays a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from hypothesis import settings
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from shared.db import migrate
from shared.db.engine import EngineOptions, build_engine, dispose_engines
from shared.notices.transports import pickup_directory_problem
from tests.support import ids, tsql_parse
from tests.support.fault_proxy import FaultProxy
from tests.support.leak_watch import (
    leak_watch,
    record_text,
    secret_shapes_in,
    watching_server_loggers,
)
from tests.support.services import SQLSERVER_SKIP, SQLSERVER_URL, service_missing, sqlserver_param

__all__ = ["leak_watch"]
# `adr("0050", "D5")` markers, selectable as `-m adr_0050_d5` (tests/support/adr_marker.py).
pytest_plugins = ["tests.support.adr_marker"]

POSTGRES_ADMIN_URL = os.environ.get(
    "AZUREBANK_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
AZURITE_BLOB_ENDPOINT = os.environ.get(
    "AZUREBANK_TEST_AZURITE_BLOB", "http://127.0.0.1:10000/devstoreaccount1"
)
# Azurite's published development account (not a secret: it is in Microsoft's docs).
AZURITE_ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
_SETTING_SECTIONS = (
    "database",
    "health",
    "notices",
    "noticesstorage",
    "dailylimit",
    "auth",
    "audit",
    "pin",
    "transfers",
)


# Property tests keep their own bounded max_examples; under CI=true they are derandomized, so a
# green CI run is repeatable.
settings.register_profile("ci", derandomize=True, max_examples=100, deadline=None, print_blob=True)
if os.environ.get("CI", "").lower() == "true":
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def hermetic_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No app setting of the developer's shell leaks into a test."""
    for key in list(os.environ):
        head = key.replace(":", "__").split("__")[0].lower()
        if head in _SETTING_SECTIONS:
            monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def secret_shapes_in_logs(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> Iterator[None]:
    """The suite's leak watch over every test, uvicorn's loggers included: no captured log
    record of setup or call holds a token, a test address or one of the suite's keys (whatever
    level the test captures at). A test that plants one to prove the watch is marked
    `plants_secrets`."""
    with watching_server_loggers() as server_records:
        yield
    if request.node.get_closest_marker("plants_secrets"):
        return
    records = [*caplog.get_records("setup"), *caplog.get_records("call")]
    leaks = {
        f"{kind} in log record {record.name}:{record.levelname}"
        for record in [*records, *server_records.records]
        for kind in secret_shapes_in(record_text(record))
    }
    assert not leaks, sorted(leaks)


_UNIT_RING = Path(__file__).resolve().parent / "unit"


class _NoInterpreter(subprocess.Popen):  # type: ignore[type-arg]
    """subprocess.Popen for a unit test: any other program runs (the pickup guard asks git),
    an interpreter is refused."""

    def __init__(self, args: Any, *rest: Any, **options: Any) -> None:
        program = args if isinstance(args, str | bytes | os.PathLike) else args[0]
        first = os.fsdecode(program).split()[0]
        if first == sys.executable or Path(first).name.startswith("python"):
            raise AssertionError(
                "a unit test starts an interpreter; it belongs in tests/integration/<behaviour>/"
            )
        super().__init__(args, *rest, **options)


@pytest.fixture(autouse=True)
def unit_tests_start_no_interpreter(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/unit does no I/O beyond reading the checkout's files: an interpreter it starts, by
    any road through subprocess, fails the test (tests/unit/test_unit_ring_spawns_nothing.py
    checks the imports)."""
    if _UNIT_RING in Path(request.node.path).parents:
        monkeypatch.setattr(subprocess, "Popen", _NoInterpreter)


@pytest.fixture(autouse=True, scope="session")
def _dispose_cached_engines() -> Iterator[None]:
    yield
    dispose_engines()


# --- SQLite -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(_sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated SQLite file of this test's own."""
    path = tmp_path / "azurebank.db"
    shutil.copyfile(_sqlite_template, path)
    return f"sqlite:///{path}"


# --- PostgreSQL -------------------------------------------------------------------------------


def _postgres_reachable() -> bool:
    url = make_url(POSTGRES_ADMIN_URL)
    try:
        with socket.create_connection((url.host or "127.0.0.1", url.port or 5432), timeout=2):
            return True
    except OSError:
        return False


def _admin_engine() -> Engine:
    return create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")


def _create_database(name: str, template: str | None = None) -> str:
    admin = _admin_engine()
    try:
        with admin.connect() as conn:
            clause = f' TEMPLATE "{template}"' if template else ""
            conn.execute(text(f'CREATE DATABASE "{name}"{clause}'))
    finally:
        admin.dispose()
    return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _drop_database(name: str) -> None:
    admin = _admin_engine()
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def _postgres_template() -> Iterator[str]:
    if not _postgres_reachable():
        service_missing("PostgreSQL")
    name = f"azurebank_test_{uuid.uuid4().hex[:12]}"
    url = _create_database(name)
    migrate.upgrade(url)
    yield name
    dispose_engines()
    _drop_database(name)


@pytest.fixture(scope="session")
def postgres_url(_postgres_template: str) -> Iterator[str]:
    """One migrated PostgreSQL database shared by the run; tests use unique keys in it."""
    name = f"{_postgres_template}_shared"
    yield _create_database(name, template=_postgres_template)
    dispose_engines()
    _drop_database(name)


@pytest.fixture
def postgres_proxy(postgres_url: str) -> Iterator[FaultProxy]:
    """The suite's fault proxy in front of `postgres_url`'s server, passing until told."""
    with FaultProxy.in_front_of(postgres_url) as running:
        yield running


@pytest.fixture
def proxied_engine(postgres_proxy: FaultProxy, postgres_url: str) -> Iterator[Engine]:
    """An engine of one pooled connection to `postgres_url` through `postgres_proxy`."""
    engine = build_engine(postgres_proxy.url(postgres_url), options=EngineOptions(pool_size=1))
    yield engine
    engine.dispose()


@pytest.fixture
def fresh_postgres_url(_postgres_template: str) -> Iterator[str]:
    """A migrated PostgreSQL database of this test's own (for tests that count whole tables)."""
    name = f"{_postgres_template}_{uuid.uuid4().hex[:8]}"
    url = _create_database(name, template=_postgres_template)
    yield url
    dispose_engines()
    _drop_database(name)


# --- SQL Server (opt-in) ---------------------------------------------------------------------


def _on_sqlserver_master(statement: str) -> None:
    # CREATE and DROP DATABASE refuse to run inside a transaction.
    admin = build_engine(make_url(SQLSERVER_URL).set(database="master"))
    try:
        with admin.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text(statement))
    finally:
        admin.dispose()


@pytest.fixture
def fresh_sqlserver_url() -> Iterator[str]:
    """A SQL Server database of this test's own: created, migrated as `azurebank db upgrade`
    migrates (shared.db.migrate.upgrade), dropped at the end."""
    if not SQLSERVER_URL:
        pytest.skip(SQLSERVER_SKIP)
    name = f"azurebank_test_{uuid.uuid4().hex[:12]}"
    # READ COMMITTED with locks, as docs/database.md runs it (never row versions: ADR-0050's lock
    # would not hold under them); Azure SQL's default is ON.
    _on_sqlserver_master(
        f"CREATE DATABASE [{name}]; ALTER DATABASE [{name}] SET READ_COMMITTED_SNAPSHOT OFF"
    )
    try:
        url = make_url(SQLSERVER_URL).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        yield url
    finally:
        dispose_engines()
        _on_sqlserver_master(
            f"IF DB_ID(N'{name}') IS NOT NULL BEGIN "
            f"ALTER DATABASE [{name}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE; "
            f"DROP DATABASE [{name}]; END"
        )


# --- the relay's pickup directory ------------------------------------------------------------


@pytest.fixture
def pickup(tmp_path: Path) -> Path:
    """A fresh pickup directory of this test's own, outside any git tree (ADR-0048 D6)."""
    directory = tmp_path / "pickup"
    directory.mkdir()
    assert pickup_directory_problem(directory) is None
    return directory


# --- the database fixtures --------------------------------------------------------------------


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), sqlserver_param()]
)
def db_url(request: pytest.FixtureRequest) -> str:
    """The same test on SQLite, PostgreSQL and (opt-in) SQL Server, each with a database of its
    own."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    if request.param == "sqlserver":
        return str(request.getfixturevalue("fresh_sqlserver_url"))
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), sqlserver_param()])
def server_url(request: pytest.FixtureRequest) -> str:
    """A database server of this test's own, for the concurrency tests (SQLite has one writer):
    PostgreSQL, and (opt-in) SQL Server."""
    if request.param == "sqlserver":
        return str(request.getfixturevalue("fresh_sqlserver_url"))
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = build_engine(db_url)
    yield eng
    eng.dispose()


# --- Azurite ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def azurite_connection_string() -> str:
    """A connection string for Azurite's blob service; tests create containers with unique names."""
    parsed = urlparse(AZURITE_BLOB_ENDPOINT)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 10000), 2):
            pass
    except OSError:
        service_missing("Azurite (blob)")
    return (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={AZURITE_ACCOUNT_KEY};BlobEndpoint={AZURITE_BLOB_ENDPOINT};"
    )


# --- every statement the code executes, parsed as T-SQL (tests/support/tsql_parse.py) --------


def pytest_configure(config: pytest.Config) -> None:
    tsql_parse.install()


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A str or bytes parameter pytest would escape gets an id spelled in printable ASCII, so
    its node id selects it again (tests/support/ids.py)."""
    return ids.readable(val) if ids.needs_spelling(val) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield  # type: ignore[misc]
    # A statement SQL Server could not parse fails the test that ran it (setup's with the call).
    if call.when in ("call", "teardown") and report.passed:
        problems = tsql_parse.take_problems()
        if problems:
            report.outcome = "failed"
            report.longrepr = "\n\n".join(problems)
    return report  # type: ignore[return-value]


# --- the suites summary: which rings ran (scripts/test.sh prints and checks it) ---------------

_SUITE_ORDER = ("sqlite", "postgres", "azurite", "sqlserver", "worker", "e2e", "unit")
_suite_of_test: dict[str, str] = {}
_outcome_of_test: dict[str, str] = {}


def _suite_of(item: pytest.Item) -> str:
    """The ring a test belongs to: the worker ring, else the service it needs, else e2e, else
    unit."""
    for marker in ("worker", "sqlserver", "postgres", "azurite"):
        if item.get_closest_marker(marker) is not None:
            return marker
    # SQLite: the sqlite_url fixture, or the "sqlite" case of a parametrised database fixture.
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    if "sqlite_url" in getattr(item, "fixturenames", ()) or any(
        isinstance(p, str) and p == "sqlite" for p in params
    ):
        return "sqlite"
    return "e2e" if item.get_closest_marker("e2e") is not None else "unit"


def pytest_itemcollected(item: pytest.Item) -> None:
    _suite_of_test[item.nodeid] = _suite_of(item)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    previous = _outcome_of_test.get(report.nodeid)
    if report.failed:
        _outcome_of_test[report.nodeid] = "failed"
    elif report.skipped and previous != "failed":
        _outcome_of_test[report.nodeid] = "skipped"
    elif report.when == "call" and report.passed and previous is None:
        _outcome_of_test[report.nodeid] = "passed"


def _suite_counts() -> dict[str, dict[str, int]]:
    counts = {s: {"passed": 0, "failed": 0, "skipped": 0} for s in _SUITE_ORDER}
    for nodeid, outcome in _outcome_of_test.items():
        counts[_suite_of_test.get(nodeid, "unit")][outcome] += 1
    return counts


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts = _suite_counts()
    parts = []
    for suite in _SUITE_ORDER:
        c = counts[suite]
        extra = "".join(f", {c[k]} {k}" for k in ("failed", "skipped") if c[k])
        parts.append(f"{suite} {c['passed']} passed{extra}")
    terminalreporter.write_sep("-", "suites")
    terminalreporter.write_line("suites: " + "; ".join(parts))
    terminalreporter.write_line(tsql_parse.summary_line())
    if os.environ.get("AZUREBANK_TSQL_DUMP"):
        tsql_parse.dump(os.environ["AZUREBANK_TSQL_DUMP"])
    path = os.environ.get("AZUREBANK_SUITE_SUMMARY")
    if path:
        Path(path).write_text(json.dumps(counts), encoding="utf-8")
