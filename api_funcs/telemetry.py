"""Where a host builds its telemetry (docs/architecture.md): the distro and recorder, or none."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from shared.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
# The distro's library instrumentations: web frameworks, and clients of outgoing calls.
_SERVERS = ("django", "fastapi", "flask")
_CLIENTS = ("azure_sdk", "httpx", "httpx2", "psycopg2", "requests", "urllib", "urllib3")


def _configure_azure_monitor() -> tuple[TracerProvider, MeterProvider]:
    # Imported here and only here: a host without the connection string never loads the distro.
    from azure.monitor.opentelemetry import configure_azure_monitor
    from opentelemetry import metrics, trace

    configure_azure_monitor(
        # The Functions host already sends this process's log lines to Application Insights.
        disable_logging=True,
        # Every library instrumentation off: the spans are RequestSpans' and the sweep's, whose
        # attributes are chosen; an outgoing call's URL (a SAS, a JWKS query) is not.
        instrumentation_options={name: {"enabled": False} for name in (*_SERVERS, *_CLIENTS)},
    )
    return trace.get_tracer_provider(), metrics.get_meter_provider()


def host_telemetry(
    *,
    environ: Mapping[str, str] = os.environ,
    configure: Callable[[], tuple[TracerProvider, MeterProvider]] = _configure_azure_monitor,
) -> Telemetry:
    """NO_TELEMETRY without the connection string; with it, a recorder over the distro."""
    if not environ.get(CONNECTION_STRING, "").strip():
        return NO_TELEMETRY
    from api_funcs.telemetry_recorder import OpenTelemetryRecorder

    return OpenTelemetryRecorder(*configure())
