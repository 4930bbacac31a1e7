"""What every request reads, built once per host and handed to the FastAPI app: the host's
services from the composition root (shared.bootstrap), built on the first request that needs
them, or handed in already built by the host that started the app."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from shared.bootstrap import Services, open_services
from shared.clock import Clock, SystemClock
from shared.notices.hosted import HostedKind, is_named
from shared.settings import Settings
from shared.telemetry import NO_TELEMETRY, Telemetry


@dataclass
class AppContext:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    # A test's database; otherwise Database__Url. The Functions host has no local default and
    # never falls back to a file (docs/settings.md); `serve` hands its services in (`of`).
    database_url: str | None = None
    # The host's own composition, called on the first request that reads a service: the
    # Functions host composes lazily (shared.bootstrap.LazyServices), so a request that reads
    # none (health) builds no engine and imports no driver.
    compose: Callable[[], Services] | None = None
    # Which host serves the app: `serve` (api) or the Functions host (function). Its own
    # questions differ: who delivers notices (ADR-0048 D6), whether the API page is on.
    host: HostedKind = "api"
    # The host's, built at its edge (api_funcs.telemetry.host_telemetry) and handed to its
    # services too; read here without composing them. Reports nothing by default.
    telemetry: Telemetry = NO_TELEMETRY

    @classmethod
    def of(cls, services: Services) -> AppContext:
        """The context of a host that built its services already (serve, the Functions host)."""
        context = cls(services.settings, services.clock, telemetry=services.telemetry)
        context.__dict__["services"] = services
        return context

    @cached_property
    def services(self) -> Services:
        if self.compose is not None:
            return self.compose()
        return open_services(
            self.settings,
            clock=self.clock,
            database_url_override=self.database_url,
            local_default=False,
            telemetry=self.telemetry,
            # Readiness checks the pickup only where this host delivers (ADR-0048 D6).
            checks_pickup=is_named(self.settings, self.host),
        )
