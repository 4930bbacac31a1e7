"""What every request reads, handed to the FastAPI app by the host that serves it: how to get the
host's services (shared.bootstrap), and what the app needs before any of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shared.bootstrap import Services
from shared.settings import HostedKind, Settings
from shared.telemetry import NO_TELEMETRY, Telemetry


@dataclass(frozen=True)
class AppContext:
    settings: Settings
    # The host's services, composed (once, by the host) on the first request that reads one: a
    # request that reads none (health) builds no engine and imports no driver.
    compose: Callable[[], Services]
    # Which host serves the app: `serve` (api) or the Functions host (function). Their own
    # questions differ: who delivers notices (ADR-0048 D6), whether the API page is on.
    host: HostedKind = "api"
    # The host's (api_funcs.telemetry.host_telemetry), read without composing the services.
    telemetry: Telemetry = NO_TELEMETRY

    @property
    def services(self) -> Services:
        return self.compose()
