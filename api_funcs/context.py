"""What every request needs, built once per host and handed to the FastAPI app: settings, the
one clock, and the engine (built lazily, on the first request that needs it)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from sqlalchemy import Engine

from shared.audit.chain import AuditChain
from shared.clock import Clock, SystemClock
from shared.db.engine import get_engine
from shared.identity.tokens import TokenVerifier
from shared.notices.relay_runner import is_named
from shared.readiness import Readiness, pickup_probe
from shared.settings import Settings, SettingsError, fix_for
from shared.telemetry import NO_TELEMETRY, Telemetry


@dataclass
class AppContext:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    # `serve` passes its command-line default here (shared.cli.runtime.database_url); the
    # Functions host passes nothing and never falls back to a local file (DESIGN §4).
    database_url: str | None = None
    # Which host serves the app: `serve` (api) or the Functions host (function). Its own
    # questions differ: who delivers notices (ADR-0048 D6), whether the API page is on.
    host: Literal["api", "function"] = "api"
    # Built by the host (api_funcs.telemetry.host_telemetry); reports nothing by default.
    telemetry: Telemetry = NO_TELEMETRY

    @property
    def url(self) -> str:
        url = self.database_url or self.settings.Database.Url
        if url is None:
            raise SettingsError([f"Database__Url: missing. Fix: {fix_for('Database__Url')}."])
        return url

    @property
    def engine(self) -> Engine:
        return get_engine(self.url)

    @cached_property
    def token_verifier(self) -> TokenVerifier:
        return TokenVerifier(self.settings, self.clock)

    @cached_property
    def readiness(self) -> Readiness:
        """This host's readiness checks; the pickup is checked only where this host delivers
        (ADR-0048 D6: the flag names it)."""
        delivers = is_named(self.settings, self.host)
        pickup = functools.cache(functools.partial(pickup_probe, self.settings))
        return Readiness(lambda: self.engine, pickup=pickup if delivers else None)

    @cached_property
    def audit_chain(self) -> AuditChain:
        """The chain under Audit__ChainKey; SettingsError (not cached) while the key is unset."""
        return AuditChain.from_settings(self.settings)
