"""Readiness (`GET /api/health/ready`): can this host do its job now? Each named check answers
`ok` or `failing` and nothing more: no message, no path, no exception text, no setting's value,
because the answer is anonymous (docs/http.md). The reason goes to the log, by exception type only.

    database   a connection opens and answers a trivial query
    schema     the database is at the migrations' head (`azurebank db upgrade` was run)
    auditChain the chain's tail row is there (every audited write locks it, ADR-0044)
    pickup     only on a host that delivers notices: the pickup target takes a write

Liveness (`GET /api/health`) stays separate and touches nothing.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sqlalchemy import Connection, Engine, column, select, table, text

from shared.audit.tail_sql import TAIL_ID
from shared.db.schema import AuditChainTail

log = logging.getLogger("azurebank.readiness")


class CheckState(enum.StrEnum):
    OK = "ok"
    FAILING = "failing"


@runtime_checkable
class ProbedTarget(Protocol):
    """A pickup target that can say whether it takes a write now, without delivering."""

    def probe(self) -> None:
        """Return when a notice could be written now; raise otherwise."""
        ...


@dataclass(frozen=True)
class ReadinessReport:
    checks: dict[str, CheckState]

    @property
    def ready(self) -> bool:
        return all(state is CheckState.OK for state in self.checks.values())

    def body(self) -> dict[str, object]:
        return {
            "status": CheckState.OK if self.ready else CheckState.FAILING,
            "checks": {name: state.value for name, state in self.checks.items()},
        }


@functools.cache
def migration_heads() -> frozenset[str]:
    """The revisions the migrations end at, read once from the scripts this install ships."""
    from alembic.script import ScriptDirectory

    from shared.db.migrate import alembic_config

    return frozenset(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())


# Alembic's own record of the revisions applied; read as a plain SELECT (no reflection), so an
# unmigrated database, which lacks the table, fails the statement and so the check.
_ALEMBIC_VERSION = table("alembic_version", column("version_num"))


def _schema_at_head(conn: Connection) -> bool:
    current = frozenset(conn.scalars(select(_ALEMBIC_VERSION.c.version_num)))
    return current == migration_heads()


def _tail_present(conn: Connection) -> bool:
    return conn.scalar(select(AuditChainTail.Id).where(AuditChainTail.Id == TAIL_ID)) is not None


class Readiness:
    """The host's checks: built once per host; the engine and the pickup target are asked for on
    each check (a setting that cannot build one is a failing check, not a 500), `pickup` only
    when this host delivers notices: the composition root hands in the host's own transport."""

    def __init__(
        self, engine: Callable[[], Engine], *, pickup: Callable[[], ProbedTarget] | None
    ) -> None:
        self._engine = engine
        self._pickup = pickup

    def check(self) -> ReadinessReport:
        checks: dict[str, CheckState] = {}
        try:
            with self._engine().connect() as conn:
                conn.execute(text("SELECT 1"))
                checks["database"] = CheckState.OK
                checks["schema"] = _state("schema", lambda: _schema_at_head(conn))
                conn.rollback()  # a failed statement must not poison the next one (PostgreSQL)
                checks["auditChain"] = _state("auditChain", lambda: _tail_present(conn))
        except Exception as exc:
            log.warning("Readiness: database failing (%s)", type(exc).__name__)
            # Nothing about the database can be vouched for when it cannot be reached.
            for name in ("database", "schema", "auditChain"):
                checks.setdefault(name, CheckState.FAILING)
            checks["database"] = CheckState.FAILING
        if self._pickup is not None:
            pickup = self._pickup
            checks["pickup"] = _state("pickup", lambda: _probed(pickup()))
        return ReadinessReport(checks)


def _probed(target: ProbedTarget) -> bool:
    target.probe()
    return True


def _state(name: str, holds: Callable[[], bool]) -> CheckState:
    try:
        if holds():
            return CheckState.OK
        log.warning("Readiness: %s failing", name)
    except Exception as exc:
        # By type only: an I/O error's text names the path, a driver's the server (ADR-0048 D4).
        log.warning("Readiness: %s failing (%s)", name, type(exc).__name__)
    return CheckState.FAILING
