"""The edge of telemetry: shared's `Telemetry` port implemented with OpenTelemetry, and the one
place a host builds it (`host_telemetry`).

With APPLICATIONINSIGHTS_CONNECTION_STRING set, the Azure Monitor OpenTelemetry distro exports
traces and metrics; without it the host gets NO_TELEMETRY and neither the SDK nor the distro is
imported (a cold start pays nothing for it). Only the OpenTelemetry API is imported here, which
FastAPI imports anyway.

What is exported, and nothing more (docs/operations.md, "Alerting"):
  traces   one SERVER span per HTTP operation, named `METHOD /route/template`; one span per sweep
  metrics  azurebank.notices.delivered / .refused / .failed (per sweep, by runner kind),
           azurebank.notices.sweeps (by result), azurebank.notices.owed and
           azurebank.notices.oldest_owed_age (observable gauges read from the database),
           azurebank.daily_limit.refusals, azurebank.money.lock_timeouts,
           azurebank.money.concurrency_conflicts, azurebank.pin.lockouts (by operation)
Attributes are route templates, methods, status codes, operation names and runner kinds: never a
raw URL, query string, address, PIN, token, tag or user id (ADR-0017, ADR-0048 D4).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from starlette.types import ASGIApp, Receive, Scope, Send

from api_funcs.http_middleware import HttpMiddleware, WatchedSend
from shared.clock import Clock, SystemClock
from shared.db.engine import get_engine
from shared.db.uow import unit_of_work
from shared.errors import DomainError
from shared.identity.pins import PinLockedOut
from shared.money.refusals import ConcurrencyConflict, DailyLimitExceeded, LockTimeout
from shared.notices.status import OwedBacklog, read_owed_backlog
from shared.notices.sweep import NoticeSweepSummary
from shared.settings import Settings
from shared.telemetry import NO_TELEMETRY, Telemetry

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
SCOPE = "azurebank"
log = logging.getLogger("azurebank.telemetry")

# The refusals and faults an operator alerts on, by the domain type that answers them.
_REFUSAL_METRICS: tuple[tuple[type[DomainError], str, str], ...] = (
    (
        DailyLimitExceeded,
        "azurebank.daily_limit.refusals",
        "Mints and transfers refused for the UTC day's limit (ADR-0050 D7)",
    ),
    (
        LockTimeout,
        "azurebank.money.lock_timeouts",
        "Money operations that waited out DailyLimit__LockTimeoutSeconds (ADR-0050 D5)",
    ),
    (
        ConcurrencyConflict,
        "azurebank.money.concurrency_conflicts",
        "Money operations that lost every retry on an account's concurrency token",
    ),
    (
        PinLockedOut,
        "azurebank.pin.lockouts",
        "Wrong PINs that reached Pin__MaxFailedAttempts and locked the PIN",
    ),
)

Backlog = Callable[[], OwedBacklog | None]


class OpenTelemetryRecorder:
    """`Telemetry` on the OpenTelemetry API, over the providers it is given (the distro's
    globals on Azure; the SDK's in-memory ones in tests)."""

    def __init__(
        self,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        *,
        backlog: Backlog | None = None,
    ) -> None:
        self.tracer = tracer_provider.get_tracer(SCOPE)
        meter = meter_provider.get_meter(SCOPE)
        self._delivered = meter.create_counter(
            "azurebank.notices.delivered", unit="{notice}", description="Notices delivered"
        )
        self._refused = meter.create_counter(
            "azurebank.notices.refused",
            unit="{notice}",
            description="Notices refused: the file or blob already existed (ADR-0048 D3)",
        )
        self._failed = meter.create_counter(
            "azurebank.notices.failed",
            unit="{notice}",
            description="Notices not delivered: unusable address, unrenderable kind, transport",
        )
        self._sweeps = meter.create_counter(
            "azurebank.notices.sweeps", unit="{sweep}", description="Sweeps, by result"
        )
        self._refusals = {
            kind: meter.create_counter(name, unit="{request}", description=text)
            for kind, name, text in _REFUSAL_METRICS
        }
        if backlog is not None:
            reading = _BacklogGauges(backlog)
            meter.create_observable_gauge(
                "azurebank.notices.owed",
                callbacks=[reading.owed],
                unit="{notice}",
                description="Notices owed (not yet delivered)",
            )
            meter.create_observable_gauge(
                "azurebank.notices.oldest_owed_age",
                callbacks=[reading.oldest_age],
                unit="s",
                description="Age of the oldest owed notice; alert when it exceeds a few periods",
            )

    def sweep(self, runner_kind: str, run: Callable[[], NoticeSweepSummary]) -> NoticeSweepSummary:
        attributes = {"azurebank.runner.kind": runner_kind}
        with self.tracer.start_as_current_span(
            "notice sweep", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            summary = run()
            span.set_attributes(
                {
                    "azurebank.notices.held": summary.held,
                    "azurebank.notices.delivered": summary.delivered,
                    "azurebank.notices.refused": summary.refused,
                    "azurebank.notices.failed": summary.failed,
                    "azurebank.notices.lease_lapsed": summary.lease_lapsed,
                }
            )
            if summary.failed_whole is not None:
                # The exception's type only (ADR-0048 D4: its message can echo a path).
                span.set_status(Status(StatusCode.ERROR, summary.failed_whole))
        self._delivered.add(summary.delivered, attributes)
        self._refused.add(summary.refused, attributes)
        self._failed.add(summary.failed, attributes)
        result = "failed" if summary.failed_whole is not None else "ok"
        self._sweeps.add(1, {**attributes, "azurebank.sweep.result": result})
        return summary

    def refused(self, operation: str, error: DomainError) -> None:
        for kind, counter in self._refusals.items():
            if isinstance(error, kind):
                counter.add(1, {"azurebank.operation": operation})


class _BacklogGauges:
    """The two gauges' callbacks: a read each (one statement, once per export interval), and no
    observation when the read fails: a gauge is no reason to fail an export."""

    def __init__(self, backlog: Backlog) -> None:
        self._backlog = backlog

    def _read(self) -> OwedBacklog | None:
        try:
            return self._backlog()
        except Exception as exc:
            log.warning("Telemetry: the owed backlog was not read (%s)", type(exc).__name__)
            return None

    def owed(self, _options: CallbackOptions) -> Iterable[Observation]:
        backlog = self._read()
        return [] if backlog is None else [Observation(backlog.owed)]

    def oldest_age(self, _options: CallbackOptions) -> Iterable[Observation]:
        backlog = self._read()
        return [] if backlog is None else [Observation(backlog.oldest_owed_age.total_seconds())]


class RequestSpans(HttpMiddleware):
    """One SERVER span per HTTP request, named by its route template once routing is done, so
    no raw path or query string (which could carry anything a caller typed) is exported."""

    def __init__(self, app: ASGIApp, tracer: trace.Tracer) -> None:
        super().__init__(app)
        self.tracer = tracer

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = str(scope.get("method", "GET"))
        sent = WatchedSend(send)
        with self.tracer.start_as_current_span(
            method, kind=SpanKind.SERVER, attributes={"http.request.method": method}
        ) as span:
            try:
                await self.app(scope, receive, sent)
            finally:
                route = scope.get("route")
                template = getattr(route, "path", None)
                if route is not None and template is not None:
                    span.update_name(f"{method} {template}")
                    span.set_attributes(
                        {"http.route": template, "azurebank.operation": str(route.name)}
                    )
                # No response started: an exception escaped, which the catch-all answers 500.
                code = 500 if sent.status is None else sent.status
                span.set_attribute("http.response.status_code", code)
                if code >= 500:
                    span.set_status(Status(StatusCode.ERROR))


def install_request_spans(app: Any, telemetry: Telemetry) -> None:
    """Trace every request when this host exports telemetry; nothing otherwise."""
    if isinstance(telemetry, OpenTelemetryRecorder):
        app.add_middleware(RequestSpans, tracer=telemetry.tracer)


def record_refusal(request: Any, error: DomainError) -> None:
    """Count a refusal an operator alerts on, by the operation (route name) that answered it."""
    route = request.scope.get("route")
    telemetry: Telemetry = request.app.state.ctx.telemetry
    telemetry.refused(str(getattr(route, "name", "unrouted")), error)


def owed_backlog_reader(database_url: str, clock: Clock) -> Backlog:
    """The gauges' read: one statement on the host's engine, built on the first collection."""

    def read() -> OwedBacklog:
        with unit_of_work(get_engine(database_url)) as session:
            return read_owed_backlog(session, clock.now())

    return read


def _configure_azure_monitor() -> tuple[TracerProvider, MeterProvider]:
    # Imported here and only here: a host without the connection string never loads the distro.
    from azure.monitor.opentelemetry import configure_azure_monitor

    configure_azure_monitor(
        # The Functions host already sends this process's log lines to Application Insights.
        disable_logging=True,
        # Every library instrumentation off: the spans are RequestSpans' and the sweep's, whose
        # attributes are chosen; an outgoing call's URL (a SAS, a JWKS query) is not.
        instrumentation_options={
            name: {"enabled": False}
            for name in (
                "azure_sdk",
                "django",
                "fastapi",
                "flask",
                "httpx",
                "httpx2",
                "psycopg2",
                "requests",
                "urllib",
                "urllib3",
            )
        },
    )
    return trace.get_tracer_provider(), metrics.get_meter_provider()


Configure = Callable[[], tuple[TracerProvider, MeterProvider]]


def host_telemetry(
    settings: Settings,
    *,
    database_url: str | None,
    clock: Clock | None = None,
    environ: Mapping[str, str] = os.environ,
    configure: Configure = _configure_azure_monitor,
) -> Telemetry:
    """The one place a host builds its telemetry: NO_TELEMETRY without the connection string;
    with it, the distro configured once and a recorder whose gauges read `database_url`."""
    if not environ.get(CONNECTION_STRING, "").strip():
        return NO_TELEMETRY
    tracer_provider, meter_provider = configure()
    url = database_url or settings.Database.Url
    backlog = None if url is None else owed_backlog_reader(url, clock or SystemClock())
    return OpenTelemetryRecorder(tracer_provider, meter_provider, backlog=backlog)


@functools.cache
def function_host_telemetry() -> Telemetry:
    """The Functions host's telemetry, built once per process and shared by the timer Function
    (relay_func) and the HTTP Functions."""
    from shared.settings import function_host_settings

    return host_telemetry(function_host_settings(), database_url=None)
