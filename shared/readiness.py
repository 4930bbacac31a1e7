"""Readiness (`GET /api/health/ready`, docs/operations.md): each named check answers `ok` or
`failing` within Health__ReadyTimeoutSeconds; reasons go to the log by exception type only."""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sqlalchemy import Connection, Engine, column, select, table, text

from shared.audit.tail_sql import TAIL_ID
from shared.db.schema import AuditChainTail

log = logging.getLogger("azurebank.readiness")
T = TypeVar("T")
_DATABASE_CHECKS = ("database", "schema", "auditChain")


class CheckState(enum.StrEnum):
    OK = "ok"
    FAILING = "failing"


class ProbedTarget(Protocol):
    def probe(self) -> None:
        """Return when a notice could be written now, without delivering one; raise otherwise."""
        ...


@dataclass(frozen=True)
class ReadinessReport:
    checks: dict[str, CheckState]

    @property
    def ready(self) -> bool:
        return all(state is CheckState.OK for state in self.checks.values())

    def body(self) -> dict[str, object]:
        status = CheckState.OK if self.ready else CheckState.FAILING
        return {"status": status.value, "checks": {k: v.value for k, v in self.checks.items()}}


@functools.cache
def migration_heads() -> frozenset[str]:
    """The revisions the migrations this install ships end at."""
    from alembic.script import ScriptDirectory

    from shared.db.migrate import alembic_config

    return frozenset(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())


# Read without reflection: an unmigrated database lacks the table, which fails the check.
_ALEMBIC_VERSION = table("alembic_version", column("version_num"))


def _schema_at_head(conn: Connection) -> bool:
    current = frozenset(conn.scalars(select(_ALEMBIC_VERSION.c.version_num)))
    return current == migration_heads()


def _tail_present(conn: Connection) -> bool:
    return conn.scalar(select(AuditChainTail.Id).where(AuditChainTail.Id == TAIL_ID)) is not None


class _SingleFlight(Generic[T]):
    """`work` on a daemon thread, one run at a time: a caller that comes while a run is in flight
    waits on that run, so a hanging check is not started again."""

    def __init__(self, name: str, work: Callable[[], T]) -> None:
        self._name = name
        self._work = work
        self._lock = threading.Lock()
        self._running: Future[T] | None = None

    def start(self) -> Future[T]:
        with self._lock:
            if self._running is None or self._running.done():
                self._running = Future()
                threading.Thread(
                    target=self._run, args=(self._running,), daemon=True, name=self._name
                ).start()
            return self._running

    def _run(self, future: Future[T]) -> None:
        try:
            future.set_result(self._work())
        except BaseException as exc:  # delivered to the waiting caller
            future.set_exception(exc)


class Readiness:
    """The host's checks, built once per host; the pickup target only where the host delivers."""

    def __init__(self, engine: Engine, pickup: ProbedTarget | None, timeout_seconds: float) -> None:
        self._engine = engine
        self._timeout = timeout_seconds
        self._database = _SingleFlight("readiness-database", self._database_checks)
        probe = None if pickup is None else functools.partial(_state, "pickup", pickup.probe)
        self._pickup_check = None if probe is None else _SingleFlight("readiness-pickup", probe)

    def check(self) -> ReadinessReport:
        deadline = time.monotonic() + self._timeout
        # Both start now, so the bound is the whole check's, not each one's in turn.
        database = self._database.start()
        pickup = None if self._pickup_check is None else self._pickup_check.start()
        # A copy: the run's result is shared by every caller that waited on it.
        answered: dict[str, CheckState] | None = _within(database, deadline, "database")
        checks = dict(answered or dict.fromkeys(_DATABASE_CHECKS, CheckState.FAILING))
        if pickup is not None:
            checks["pickup"] = _within(pickup, deadline, "pickup") or CheckState.FAILING
        return ReadinessReport(checks)

    def _database_checks(self) -> dict[str, CheckState]:
        # Each is failing until it holds: nothing can be vouched for when the database is out.
        checks = dict.fromkeys(_DATABASE_CHECKS, CheckState.FAILING)
        try:
            with self._engine.connect() as conn:
                conn.execute(text("SELECT 1"))
                checks["database"] = CheckState.OK
                checks["schema"] = _state("schema", lambda: _schema_at_head(conn))
                conn.rollback()  # a failed statement must not poison the next one (PostgreSQL)
                checks["auditChain"] = _state("auditChain", lambda: _tail_present(conn))
        except Exception as exc:
            log.warning("Readiness: database failing (%s)", type(exc).__name__)
            checks["database"] = CheckState.FAILING
        return checks


def _within(future: Future[T], deadline: float, name: str) -> T | None:
    try:
        return future.result(max(deadline - time.monotonic(), 0))
    except FutureTimeout:
        log.warning("Readiness: %s failing (no answer within the bound)", name)
        return None


def _state(name: str, holds: Callable[[], bool | None]) -> CheckState:
    """`holds` fails by returning False or raising; a probe, which returns None, by raising."""
    try:
        if holds() is not False:
            return CheckState.OK
        log.warning("Readiness: %s failing", name)
    except Exception as exc:
        # By type only: an I/O error's text names the path, a driver's the server (ADR-0048 D4).
        log.warning("Readiness: %s failing (%s)", name, type(exc).__name__)
    return CheckState.FAILING
