"""The composition root (DESIGN §2): one function builds every service of a host, once, from
checked settings, an engine and a clock.

The FastAPI context, the Functions host, `serve`, every command of the command line, the benches
and the test fixtures take their services from here; a route handler only reads them, so nothing
is built per request and a new collaborator of a service is wired in this one file. No FastAPI
or Azure type appears here: the edges translate, `shared` decides.

    bootstrap(settings, engine, clock, runner=…)   every service, and the notice sweep of a runner
    open_services(settings, clock=…, …)            the same, on the cached engine of the host's URL
    hosted_relay(kind, settings)                   a hosted host's services and its HostedRelay
    start_api_host(settings)                       `serve`'s services and its relay loop
    start_function_host(settings)                  the Functions host: composed, its relay announced
    function_host(telemetry)                       that, once per process, from the environment

The edge builds a host's telemetry (api_funcs.telemetry, the only place the OpenTelemetry SDK is
configured) and hands it in; the backlog gauges are wired here, to the host's engine.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from shared.clock import Clock, SystemClock
from shared.notices.hosted import HostedKind, HostedRelay, is_named
from shared.notices.runner_name import make_runner_name, runner_kind
from shared.notices.transports import (
    BlobContainerTransport,
    NoticeTransport,
    PickupDirectoryTransport,
)
from shared.settings import (
    Settings,
    SettingsError,
    fix_for,
    function_host_settings,
    notice_contact,
    pickup_target_problem,
    require_host,
)
from shared.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:
    # The services' modules (and SQLAlchemy, the ORM schema, PyJWT under them) are imported
    # where a host is composed, not here: the Functions host imports this module at its start
    # (function_app.py) and composes on its first request or tick, so a cold instance indexes
    # its Functions without them (DESIGN §2; bench/cold_start.py).
    from sqlalchemy import Engine

    from shared.audit.chain import AuditChain
    from shared.identity.pin_service import PinChanges
    from shared.identity.pins import PinVerifier
    from shared.identity.tokens import TokenVerifier
    from shared.money.applock_sql import DailyLimitLock
    from shared.money.daily_limit import DailyOutflowLimit
    from shared.money.mint import TransferMint
    from shared.money.rails import AccountRails
    from shared.money.transfers import TransferService
    from shared.notices.claim import NoticeClaim
    from shared.notices.relay_loop import NoticeRelayService
    from shared.notices.sweep import NoticeSweep
    from shared.readiness import ProbedTarget, Readiness

log = logging.getLogger("azurebank.bootstrap")

# DESIGN §4: the command line and `serve` only; the Functions host refuses to start without one.
LOCAL_DATABASE_URL = "sqlite:///azurebank.db"


@dataclass(frozen=True)
class Services:
    """Every service of one host, built once. `audit_chain` is None while Audit__ChainKey is
    unset (only hosts that never write audit rows may start so); `sweep` is the notice sweep of
    the runner this host was built for, or None when it was built for none. `readiness` checks
    the pickup target only where this host delivers notices (ADR-0048 D6)."""

    settings: Settings
    engine: Engine
    clock: Clock
    tokens: TokenVerifier
    limit: DailyOutflowLimit
    pins: PinVerifier
    pin_changes: PinChanges
    mint: TransferMint
    transfers: TransferService
    rails: AccountRails
    audit_chain: AuditChain | None
    sweep: NoticeSweep | None
    readiness: Readiness
    telemetry: Telemetry

    def require_audit_chain(self) -> AuditChain:
        """The chain under Audit__ChainKey; SettingsError naming the key while it is unset."""
        if self.audit_chain is None:
            from shared.audit.chain import AuditChain

            return AuditChain.from_settings(self.settings)  # raises, naming the key and the fix
        return self.audit_chain


def bootstrap(
    settings: Settings,
    engine: Engine,
    clock: Clock,
    *,
    runner: str | None = None,
    transport: NoticeTransport | None = None,
    daily_limit_lock: DailyLimitLock | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    checks_pickup: bool | None = None,
) -> Services:
    """Build every service of a host. `settings` have passed `require_host` for that host.
    Longer than most functions because it is the one list of a host's services, one per line.

    `runner` is the name this host's notice runner stamps into LeasedBy (ADR-0048 D2, D5); its
    sweep is built under it, with the verb's two-minute lease for a `verb/…` name. `transport`
    and `daily_limit_lock` replace the ones the settings would give: the control tests and the
    bench's baseline turn the lock off. `telemetry` is the edge's; its backlog gauges read
    `engine`. `checks_pickup` (default: whether a runner is named) puts the pickup target in
    the readiness checks."""
    from shared.audit.chain import AuditChain, UnkeyedAuditChain
    from shared.identity.pin_service import PinChanges
    from shared.identity.pins import PinVerifier
    from shared.money.applock_sql import DailyLimitLock
    from shared.money.daily_limit import DailyOutflowLimit
    from shared.money.mint import TransferMint
    from shared.money.ports import AuditAppender
    from shared.money.rails import AccountRails
    from shared.money.transfers import TransferService
    from shared.notices.status import owed_backlog_reader
    from shared.readiness import Readiness

    lock_timeout = settings.DailyLimit.LockTimeoutSeconds
    row_lock_timeout = settings.Database.LockTimeoutSeconds
    chain = AuditChain.from_settings(settings) if settings.Audit.ChainKey else None
    audit: AuditAppender = chain if chain is not None else UnkeyedAuditChain()
    limit = DailyOutflowLimit(settings.DailyLimit.Amount, clock)
    pins = PinVerifier(engine, clock, settings.Pin)
    sweep = None if runner is None else runner_sweep(settings, engine, clock, runner, transport)
    if checks_pickup is None:
        checks_pickup = runner is not None
    # ADR-0048 D6: readiness probes the target this host delivers into, the sweep's own.
    pickup = _pickup_target(settings, transport if sweep is None else sweep.transport)
    telemetry.watch_backlog(owed_backlog_reader(engine, clock))
    return Services(
        settings=settings,
        engine=engine,
        clock=clock,
        tokens=token_verifier(settings, clock),
        limit=limit,
        pins=pins,
        pin_changes=PinChanges(engine, clock, audit, pins),
        mint=TransferMint(
            engine,
            clock,
            limit,
            pins,
            authorization_seconds=settings.Transfers.AuthorizationSeconds,
        ),
        transfers=TransferService(
            engine, clock, limit, daily_limit_lock or DailyLimitLock(lock_timeout), audit
        ),
        # The rails take no application lock: their waits are the key's, the tail's and the
        # rows', Database__LockTimeoutSeconds, which every connection already has.
        rails=AccountRails(engine, clock, audit, busy_timeout_seconds=row_lock_timeout),
        audit_chain=chain,
        sweep=sweep,
        readiness=Readiness(
            lambda: engine,
            pickup=pickup if checks_pickup else None,
            timeout_seconds=settings.Health.ReadyTimeoutSeconds,
        ),
        telemetry=telemetry,
    )


def token_verifier(settings: Settings, clock: Clock) -> TokenVerifier:
    """The bearer-token verifier, with the identity provider's key set under Auth__JwksUrl.
    The JWKS machinery (and PyJWT under it) is imported only then (bench/cold_start.py)."""
    from shared.identity.tokens import TokenVerifier

    jwks = None
    if settings.Auth.JwksUrl:
        from shared.identity.jwks import JwksKeys

        jwks = JwksKeys(settings.Auth.JwksUrl, clock)
    return TokenVerifier(settings, clock, jwks=jwks)


def notice_transport(settings: Settings) -> NoticeTransport:
    """The pickup target `Notices` names: the directory or the blob container (exactly one).
    Call after `require_host`, which also checks the directory exists outside any git tree;
    nothing connects here (a container's client is built on its first delivery)."""
    problem = pickup_target_problem(settings)
    if problem is not None:
        raise SettingsError([problem])
    notices, storage = settings.Notices, settings.NoticesStorage
    if notices.PickupDirectory:
        return PickupDirectoryTransport(notices.PickupDirectory)
    assert notices.PickupContainer is not None
    return BlobContainerTransport(
        notices.PickupContainer,
        connection_string=storage.ConnectionString,
        blob_service_uri=storage.blobServiceUri,
    )


def notice_sweep(
    engine: Engine,
    clock: Clock,
    transport: NoticeTransport,
    *,
    runner: str,
    lease_seconds: int,
    batch_size: int,
    contact: str,
    claim: NoticeClaim | None = None,
    leftover_age: timedelta | None = None,
) -> NoticeSweep:
    """One runner's sweep: its claim (ADR-0048 D2) and its delivery run (D4) through
    `transport`, wired together. `claim` replaces the lease protocol (the race tests' witness)."""
    from shared.notices.claim import NoticeClaim
    from shared.notices.delivery import NoticeDeliveryRun
    from shared.notices.sweep import NoticeSweep

    claim = claim or NoticeClaim(runner, lease_seconds=lease_seconds, batch_size=batch_size)
    delivery = NoticeDeliveryRun(engine, clock, transport, claim, contact=contact)
    return NoticeSweep(engine, clock, claim, delivery, leftover_age=leftover_age)


def runner_sweep(
    settings: Settings,
    engine: Engine,
    clock: Clock,
    runner: str,
    transport: NoticeTransport | None = None,
) -> NoticeSweep:
    """The sweep of `runner` as the `Notices` section configures it (call `require_host`
    first): the verb's two-minute lease for a `verb/…` name (ADR-0048 D5), Notices__LeaseSeconds
    otherwise; into `transport`, or the target `Notices` names."""
    from shared.notices.claim import VERB_LEASE_SECONDS

    notices = settings.Notices
    contact = notice_contact(settings)
    lease = VERB_LEASE_SECONDS if runner_kind(runner) == "verb" else notices.LeaseSeconds
    return notice_sweep(
        engine,
        clock,
        transport or notice_transport(settings),
        runner=runner,
        lease_seconds=lease,
        batch_size=notices.BatchSize,
        contact=contact,
        # The hosted runners' lease, the verb's and this sweep's all write into one target.
        leftover_age=timedelta(seconds=max(lease, notices.LeaseSeconds, VERB_LEASE_SECONDS)),
    )


def _pickup_target(
    settings: Settings, transport: NoticeTransport | None
) -> Callable[[], ProbedTarget]:
    """What readiness probes: the host's transport, or, on a host that delivers through none
    built yet, the target `Notices` names, built on the first check that asks (a setting that
    cannot build one is a failing check, not a 500)."""
    from shared.readiness import ProbedTarget

    @functools.cache
    def target() -> ProbedTarget:
        found = transport if transport is not None else notice_transport(settings)
        if not isinstance(found, ProbedTarget):
            raise TypeError(f"{type(found).__name__} cannot be probed")
        return found

    return target


def database_url(settings: Settings, *, local_default: bool) -> str:
    """Database__Url, or (for the command line and `serve` only) the local SQLite file."""
    url = settings.Database.Url
    if url is None and local_default:
        return LOCAL_DATABASE_URL
    if url is None:
        raise SettingsError([f"Database__Url: missing. Fix: {fix_for('Database__Url')}."])
    return url


def open_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    database_url_override: str | None = None,
    local_default: bool = True,
    runner: str | None = None,
    transport: NoticeTransport | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    checks_pickup: bool | None = None,
) -> Services:
    """`bootstrap` on the process's cached engine for the host's database URL. The engine is
    built, not connected: a driver this install lacks is SettingsError now (exit 78)."""
    from shared.db.engine import EngineOptions, get_engine

    url = database_url_override or database_url(settings, local_default=local_default)
    engine = get_engine(url, EngineOptions.of(settings.Database))
    return bootstrap(
        settings,
        engine,
        clock or SystemClock(),
        runner=runner,
        transport=transport,
        telemetry=telemetry,
        checks_pickup=checks_pickup,
    )


class LazyServices:
    """A host's services, composed on their first use (a request or a tick), not at the host's
    start: importing function_app.py builds no engine (DESIGN §2). Thread-safe; built once."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock,
        database_url: str,
        runner: str | None = None,
        transport: NoticeTransport | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.runner = runner
        self.telemetry = telemetry
        self._url = database_url
        self._transport = transport
        self._built: Services | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Services:
        with self._lock:
            if self._built is None:
                self._built = open_services(
                    self.settings,
                    clock=self.clock,
                    database_url_override=self._url,
                    runner=self.runner,
                    transport=self._transport,
                    telemetry=self.telemetry,
                )
            return self._built

    def sweep(self) -> NoticeSweep:
        """The sweep of the runner these services were composed for."""
        sweep = self().sweep
        if sweep is None:
            raise ValueError("these services were composed for no notice runner")
        return sweep


def hosted_relay(
    kind: HostedKind,
    settings: Settings,
    *,
    clock: Clock | None = None,
    database_url_override: str | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
) -> tuple[LazyServices, HostedRelay]:
    """A hosted host's services and its relay, from settings checked here, once, at its start
    (ADR-0048 D6, ADR-0051 D3): a partial set is SettingsError naming the key and the fix.
    The flag is read here, once; the runner's name and target are fixed now, and nothing
    connects (a transport connects on its first delivery, the engine on the first sweep)."""
    require_host(settings, kind)
    named = is_named(settings, kind)
    transport = notice_transport(settings) if named else None
    services = LazyServices(
        settings,
        clock=clock or SystemClock(),
        # DESIGN §4: `serve` falls back to the local file; the Functions host never does.
        database_url=database_url_override or database_url(settings, local_default=kind == "api"),
        runner=make_runner_name(kind) if named else None,
        transport=transport,
        telemetry=telemetry,
    )
    relay = HostedRelay(
        kind,
        settings,
        runner=services.runner,
        target=None if transport is None else transport.describe(),
        sweep=services.sweep if named else None,
        telemetry=telemetry,
    )
    return services, relay


@dataclass(frozen=True)
class FunctionHost:
    """The Functions host: one set of services for the HTTP Functions and the timer."""

    services: LazyServices
    relay: HostedRelay


def start_api_host(
    settings: Settings, *, clock: Clock | None = None, telemetry: Telemetry = NO_TELEMETRY
) -> tuple[Services, NoticeRelayService]:
    """The API host `serve` runs: its services, built now (a driver this install lacks is
    SettingsError here, exit 78, not a 500 a request), and its relay loop, always registered
    (ADR-0048 D1) so every API host reads the flag and says what it does."""
    from shared.notices.relay_loop import NoticeRelayService

    services, relay = hosted_relay("api", settings, clock=clock, telemetry=telemetry)
    return services(), NoticeRelayService(relay)


def start_function_host(
    settings: Settings, *, clock: Clock | None = None, telemetry: Telemetry = NO_TELEMETRY
) -> FunctionHost:
    """Compose the Functions host and announce its relay (DESIGN §6), or its stepping aside."""
    services, relay = hosted_relay("function", settings, clock=clock, telemetry=telemetry)
    relay.announce(f"schedule {settings.Notices.Schedule}")
    return FunctionHost(services, relay)


_function_host: FunctionHost | None = None
_function_host_lock = threading.Lock()


def function_host(telemetry: Telemetry = NO_TELEMETRY) -> FunctionHost:
    """The Functions host, started once per process (relay_func's import) from the settings
    read and checked there; the HTTP Functions reuse it on their first request. The first
    call's telemetry is the host's: both pass the edge's one (function_host_telemetry)."""
    global _function_host
    with _function_host_lock:
        if _function_host is None:
            _function_host = start_function_host(function_host_settings(), telemetry=telemetry)
        return _function_host
