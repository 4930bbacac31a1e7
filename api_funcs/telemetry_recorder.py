"""shared's `Telemetry` port on the OpenTelemetry API, imported on a first request, never at a cold
start: docs/operations.md's "Alerting", with no raw URL, address, PIN, token, tag or user id."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from starlette.types import ASGIApp, Receive, Scope

from api_funcs.middleware import HttpMiddleware, WatchedSend
from shared.errors import DomainError, LockTimeout
from shared.identity.refusals import PinLockedOut
from shared.money.refusals import ConcurrencyConflict, DailyLimitExceeded

if TYPE_CHECKING:
    # Types only: the sweep (and the renderer under it) is imported only where a host delivers.
    from shared.notices.status import OwedBacklog
    from shared.notices.sweep import NoticeSweepSummary

SCOPE = "azurebank"
log = logging.getLogger("azurebank.telemetry")

# The refusals and faults an operator alerts on, by the domain type that answers them.
_REFUSAL_METRICS: dict[type[DomainError], tuple[str, str]] = {
    DailyLimitExceeded: (
        "azurebank.daily_limit.refusals",
        "Mints and transfers refused for the UTC day's limit (ADR-0050 D7)",
    ),
    LockTimeout: (
        "azurebank.money.lock_timeouts",
        "Operations that waited out a lock: DailyLimit__LockTimeoutSeconds (ADR-0050 D5) or "
        "Database__LockTimeoutSeconds (the audit tail, a row)",
    ),
    ConcurrencyConflict: (
        "azurebank.money.concurrency_conflicts",
        "Money operations that lost every retry on an account's concurrency token",
    ),
    PinLockedOut: (
        "azurebank.pin.lockouts",
        "Wrong PINs that reached Pin__MaxFailedAttempts and locked the PIN",
    ),
}

# A sweep's counts, exported per sweep by runner kind as `azurebank.notices.<count>`.
_SWEEP_COUNTS = {
    "delivered": "Notices delivered",
    "refused": "Notices refused: the file or blob already existed (ADR-0048 D3)",
    "failed": "Notices not delivered: unusable address, unrenderable kind, transport",
}

Backlog = Callable[[], "OwedBacklog"]
Gauge = Callable[[CallbackOptions], Iterable[Observation]]


class OpenTelemetryRecorder:
    """`Telemetry` over the distro's providers on Azure, the SDK's in-memory ones in tests."""

    _backlog: Backlog  # the read the gauges make, from the first watch_backlog on

    def __init__(
        self,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        *,
        backlog: Backlog | None = None,
    ) -> None:
        self.tracer = tracer_provider.get_tracer(SCOPE)
        self._meter = meter = meter_provider.get_meter(SCOPE)
        self._counts = {
            count: meter.create_counter(
                f"azurebank.notices.{count}", unit="{notice}", description=text
            )
            for count, text in _SWEEP_COUNTS.items()
        }
        self._sweeps = meter.create_counter(
            "azurebank.notices.sweeps", unit="{sweep}", description="Sweeps, by result"
        )
        self._refusals = {
            kind: meter.create_counter(name, unit="{request}", description=text)
            for kind, (name, text) in _REFUSAL_METRICS.items()
        }
        if backlog is not None:
            self.watch_backlog(backlog)

    def watch_backlog(self, read: Backlog) -> None:
        # The two gauges are registered once; a later composition's read replaces the first.
        registered = hasattr(self, "_backlog")
        self._backlog = read
        if registered:
            return
        self._meter.create_observable_gauge(
            "azurebank.notices.owed",
            callbacks=[self._observe(lambda backlog: backlog.owed)],
            unit="{notice}",
            description="Notices owed (not yet delivered)",
        )
        self._meter.create_observable_gauge(
            "azurebank.notices.oldest_owed_age",
            callbacks=[self._observe(lambda backlog: backlog.oldest_owed_age.total_seconds())],
            unit="s",
            description="Age of the oldest owed notice; alert when it exceeds a few periods",
        )

    def _observe(self, value: Callable[[OwedBacklog], float]) -> Gauge:
        # A read per export; no observation when it fails: a gauge is no reason to fail an export.
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            try:
                backlog = self._backlog()
            except Exception as exc:
                log.warning("Telemetry: the owed backlog was not read (%s)", type(exc).__name__)
                return []
            return [Observation(value(backlog))]

        return callback

    def sweep(self, runner_kind: str, run: Callable[[], NoticeSweepSummary]) -> NoticeSweepSummary:
        attributes = {"azurebank.runner.kind": runner_kind}
        with self.tracer.start_as_current_span("notice sweep", attributes=attributes) as span:
            summary = run()
            counts = ("held", "delivered", "refused", "failed", "lease_lapsed")
            span.set_attributes({f"azurebank.notices.{n}": getattr(summary, n) for n in counts})
            if summary.failed_whole is not None:
                # The exception's type only (ADR-0048 D4: its message can echo a path).
                span.set_status(Status(StatusCode.ERROR, summary.failed_whole))
        for count, counter in self._counts.items():
            counter.add(getattr(summary, count), attributes)
        result = "failed" if summary.failed_whole is not None else "ok"
        self._sweeps.add(1, {**attributes, "azurebank.sweep.result": result})
        return summary

    def refused(self, operation: str, error: DomainError) -> None:
        for kind, counter in self._refusals.items():
            if isinstance(error, kind):
                counter.add(1, {"azurebank.operation": operation})


class RequestSpans(HttpMiddleware):
    """One SERVER span per HTTP request, named by its route template, never its raw path."""

    def __init__(self, app: ASGIApp, tracer: trace.Tracer) -> None:
        super().__init__(app)
        self.tracer = tracer

    async def http(self, scope: Scope, receive: Receive, send: WatchedSend) -> None:
        method = str(scope.get("method", "GET"))
        with self.tracer.start_as_current_span(
            method, kind=SpanKind.SERVER, attributes={"http.request.method": method}
        ) as span:
            try:
                await self.app(scope, receive, send)
            finally:
                route = scope.get("route")
                template = getattr(route, "path", None)
                if route is not None and template is not None:
                    span.update_name(f"{method} {template}")
                    span.set_attributes(
                        {"http.route": template, "azurebank.operation": str(route.name)}
                    )
                # No response started: an exception escaped, which the catch-all answers 500.
                code = 500 if send.status is None else send.status
                span.set_attribute("http.response.status_code", code)
                if code >= 500:
                    span.set_status(Status(StatusCode.ERROR))
