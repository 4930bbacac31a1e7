"""A test host: its app settings (the suite's keys and contact), the one FastAPI app in-process,
and a hosted relay whose sweep a test stands in for."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from api_funcs.app import FEATURES, AppContext, create_app
from shared.bootstrap import Services, bootstrap, database_url
from shared.clock import Clock, SystemClock
from shared.notices.hosted import HostedRelay, make_runner_name
from shared.settings import HostedKind, Settings, is_named, load_settings, require_host
from shared.telemetry import NO_TELEMETRY, Telemetry

SIGNING_KEY = "test-signing-key-" + "x" * 32
CHAIN_KEY = base64.b64encode(b"k" * 32).decode()
# The Notices__Contact every test host uses (ADR-0048 D6: mandatory content of a notice).
CONTACT = "AzureBank support, +1 555 0100"


def setting_keys() -> list[str]:
    """Every app-settings key as an operator spells it, `Section__Key`."""
    settings = Settings()
    return [
        f"{section.name}__{key.name}"
        for section in fields(settings)
        for key in fields(getattr(settings, section.name))
    ]


def host_environ(db_url: str, **overrides: str) -> dict[str, str]:
    """A complete, valid app-settings environment for a test host."""
    env = {
        "Database__Url": db_url,
        "Auth__SigningKey": SIGNING_KEY,
        "Audit__ChainKey": CHAIN_KEY,
    }
    env.update(overrides)
    return env


def relay_environ(db_url: str, pickup: Path, runner: str, **overrides: str) -> dict[str, str]:
    """A host's environment with the relay's section complete (ADR-0048 D6): the flag set to
    `runner`, the pickup directory, the contact."""
    env = {
        "Database__Url": db_url,
        "Audit__ChainKey": CHAIN_KEY,
        "Notices__Runner": runner,
        "Notices__PickupDirectory": str(pickup),
        "Notices__Contact": CONTACT,
    }
    env.update(overrides)
    return env


def host_settings(db_url: str, **overrides: str) -> Settings:
    return load_settings(host_environ(db_url, **overrides))


def make_app(
    settings: Settings,
    *,
    db_url: str | None = None,
    clock: Clock | None = None,
    host: HostedKind = "api",
    telemetry: Telemetry = NO_TELEMETRY,
    features: Sequence[str] = FEATURES,
) -> FastAPI:
    """The FastAPI app as `host` serves it (routing `features`, by default all), over `db_url`
    (default Database__Url, never a local file), its services composed through the root on the
    first request that reads one, with the runner the flag names for `host` (so readiness checks
    its pickup); unlike a host's start, nothing checks the settings first."""
    lock = threading.Lock()
    built: list[Services] = []
    runner = make_runner_name(host) if is_named(settings, host) else None

    def compose() -> Services:
        with lock:
            if not built:
                url = db_url or database_url(settings, local_default=False)
                clocked = clock or SystemClock()
                built.append(bootstrap(settings, url, clocked, runner=runner, telemetry=telemetry))
            return built[0]

    return create_app(AppContext(settings, compose, host, telemetry), features)


@contextmanager
def api_client(
    db_url: str, clock: Clock, environ: Mapping[str, str] | None = None
) -> Iterator[TestClient]:
    """The one FastAPI app over `db_url`, on `clock`, without a server process."""
    settings = load_settings(dict(environ) if environ is not None else host_environ(db_url))
    with TestClient(
        make_app(settings, db_url=db_url, clock=clock), raise_server_exceptions=False
    ) as client:
        yield client


def served_routes() -> list[tuple[str, str]]:
    """Every (method, path) the app serves, HEAD aside: each operation and the document."""
    app = make_app(load_settings({}), db_url="sqlite://")
    # FastAPI 0.16x resolves included routers lazily: walk the contexts, not app.routes.
    return sorted(
        (method, context.path)
        for context in iter_route_contexts(app.routes)
        if context.path
        for method in (context.methods or {"GET"}) - {"HEAD"}
    )


class FakeSweep:
    """Stands in for a NoticeSweep where only a host's loop or tick is under test: each run calls
    `work` (the sweep's own protocol is tested on real databases elsewhere)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._work = work

    def run(self) -> Any:
        return self._work()


def hosted(kind: HostedKind, settings: Settings, work: Callable[[], Any]) -> HostedRelay:
    """A HostedRelay as `shared.bootstrap.Host` builds it (settings checked, the flag read once),
    with `work` in place of the sweep when the flag names this kind."""
    require_host(settings, kind)
    if not is_named(settings, kind):
        return HostedRelay(kind, settings)
    sweep = FakeSweep(work)
    return HostedRelay(
        kind,
        settings,
        runner=make_runner_name(kind),
        target="pickup directory (Notices__PickupDirectory)",
        sweep=lambda: sweep,
    )
