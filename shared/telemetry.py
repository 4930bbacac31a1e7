"""The telemetry port, with no SDK in sight: api_funcs/telemetry.py implements it with OpenTelemetry
when APPLICATIONINSIGHTS_CONNECTION_STRING is set. Nothing reported carries an address, PIN,
token, tag or user id: outcomes are counted by kind (ADR-0048 D4, ADR-0017)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from shared.errors import DomainError
    from shared.notices.status import OwedBacklog
    from shared.notices.sweep import NoticeSweepSummary


class Telemetry(Protocol):
    """What shared code reports; each body is every host's default, `NO_TELEMETRY`: nothing."""

    def sweep(self, runner_kind: str, run: Callable[[], NoticeSweepSummary]) -> NoticeSweepSummary:
        """Run one NoticeSweep (`run`) as one trace, and count what it delivered, refused and
        failed; `runner_kind` is `api` or `function`, never the runner's full name."""
        return run()

    def refused(self, operation: str, error: DomainError) -> None:
        """An HTTP operation (its Function name) answered a domain refusal or fault."""
        return None

    def watch_backlog(self, read: Callable[[], OwedBacklog]) -> None:
        """Report the owed backlog `read` returns when the exporter collects, never per request."""
        return None


class NoTelemetry(Telemetry):
    """Reports nothing."""


NO_TELEMETRY: Telemetry = NoTelemetry()
