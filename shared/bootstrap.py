"""The composition root (docs/architecture.md): `bootstrap` gives a host's services, each built
once on first use, and takes a test's own collaborators, so no service has a mode for tests; a
`Host` is `serve` or the Functions host around them. No FastAPI or Azure type appears here."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from shared.clock import Clock, SystemClock
from shared.notices.hosted import HostedRelay, make_runner_name, runner_kind
from shared.settings import (
    CONTACT_MISSING,
    HostedKind,
    Settings,
    SettingsError,
    is_named,
    pickup_target_problem,
    refusal,
    require_host,
)
from shared.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:
    # Each service's module is imported where the service is first built: a cold Functions
    # instance indexes without them (bench/cold_start.py).
    from sqlalchemy import Engine

    from shared.audit.chain import AuditAppender, AuditChain
    from shared.identity.pin_service import PinChanges
    from shared.identity.tokens import TokenVerifier
    from shared.money.applock_sql import DailyLimitLock
    from shared.money.daily_limit import DailyOutflowLimit
    from shared.money.mint import TransferMint
    from shared.money.ports import PinCheck
    from shared.money.rails import AccountRails
    from shared.money.transfer_write_sql import TransferWriter
    from shared.money.transfers import TransferService
    from shared.notices.claim import NoticeClaim
    from shared.notices.hosted import NoticeRelayService
    from shared.notices.status import OwedBacklog
    from shared.notices.sweep import NoticeSweep
    from shared.notices.transports import NoticeTransport
    from shared.readiness import ProbedTarget, Readiness

# The command line's and `serve`'s; the Functions host needs Database__Url.
LOCAL_DATABASE_URL = "sqlite:///azurebank.db"


@dataclass(repr=False, eq=False)
class Services:
    """Every service of one host, each built on its first use (bench/cold_start.py); `audit_chain`
    is None while Audit__ChainKey is unset, `sweep` while the host was built for no runner."""

    settings: Settings
    engine: Engine
    clock: Clock
    sweep: NoticeSweep | None
    telemetry: Telemetry
    daily_limit_lock: DailyLimitLock | None
    transfer_writes: TransferWriter | None

    @functools.cached_property
    def tokens(self) -> TokenVerifier:
        from shared.identity.tokens import TokenVerifier

        jwks = None
        if self.settings.Auth.JwksUrl:  # the JWKS machinery only then (bench/cold_start.py)
            from shared.identity.jwks import JwksKeys

            jwks = JwksKeys(self.settings.Auth.JwksUrl, self.clock)
        return TokenVerifier(self.settings, self.clock, jwks=jwks)

    @functools.cached_property
    def audit_chain(self) -> AuditChain | None:
        from shared.audit.chain import AuditChain

        return AuditChain.from_settings(self.settings) if self.settings.Audit.ChainKey else None

    @functools.cached_property
    def _audit(self) -> AuditAppender:
        from shared.audit.chain import UnkeyedAuditChain

        return self.audit_chain if self.audit_chain is not None else UnkeyedAuditChain()

    @functools.cached_property
    def limit(self) -> DailyOutflowLimit:
        from shared.money.daily_limit import DailyOutflowLimit

        return DailyOutflowLimit(self.settings.DailyLimit.Amount, self.clock)

    @functools.cached_property
    def pins(self) -> PinCheck:
        from shared.identity.pins import verify_pin

        return functools.partial(verify_pin, self.engine, self.clock, self.settings.Pin)

    @functools.cached_property
    def pin_changes(self) -> PinChanges:
        from shared.identity.pin_service import PinChanges

        return PinChanges(self.engine, self.clock, self._audit, self.pins)

    @functools.cached_property
    def mint(self) -> TransferMint:
        from shared.money.mint import TransferMint

        seconds = self.settings.Transfers.AuthorizationSeconds
        return TransferMint(
            self.engine, self.clock, self.limit, self.pins, authorization_seconds=seconds
        )

    @functools.cached_property
    def transfers(self) -> TransferService:
        from shared.money.applock_sql import DailyLimitLock
        from shared.money.transfer_write_sql import write_transfer
        from shared.money.transfers import TransferService

        lock = self.daily_limit_lock or DailyLimitLock(self.settings.DailyLimit.LockTimeoutSeconds)
        writes = self.transfer_writes or write_transfer
        return TransferService(self.engine, self.clock, self.limit, lock, self._audit, writes)

    @functools.cached_property
    def rails(self) -> AccountRails:
        from shared.money.rails import AccountRails

        return AccountRails(self.engine, self.clock, self._audit)

    @functools.cached_property
    def readiness(self) -> Readiness:
        from shared.readiness import Readiness

        # ADR-0048 D6: the pickup is probed only where the host delivers; either transport can.
        pickup = None if self.sweep is None else cast("ProbedTarget", self.sweep.transport)
        return Readiness(self.engine, pickup, self.settings.Health.ReadyTimeoutSeconds)

    def require_audit_chain(self) -> AuditChain:
        """The chain under Audit__ChainKey; SettingsError naming the key while it is unset."""
        from shared.audit.chain import AuditChain

        return self.audit_chain or AuditChain.from_settings(self.settings)


def bootstrap(
    settings: Settings,
    engine: Engine | str | None = None,
    clock: Clock | None = None,
    *,
    runner: str | None = None,
    transport: NoticeTransport | None = None,
    claim: NoticeClaim | None = None,
    daily_limit_lock: DailyLimitLock | None = None,
    transfer_writes: TransferWriter | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
) -> Services:
    """The services of a host whose `settings` passed `require_host`. `engine`: the host's, or a
    URL (built, not connected: a driver this install lacks is SettingsError now, exit 78), or None
    (Database__Url or the local file); `runner`: the name its sweep stamps into LeasedBy (ADR-0048
    D2, D5); the other collaborators replace the settings' and the dialect's, for a test's own."""
    from shared.db.engine import EngineOptions, get_engine

    if engine is None or isinstance(engine, str):
        url = engine or database_url(settings, local_default=True)
        engine = get_engine(url, EngineOptions.of(settings.Database))
    clock = clock or SystemClock()
    sweep = None
    if runner is not None:  # the sweep's modules only for a host that runs one
        from shared.notices.claim import VERB_LEASE_SECONDS, NoticeClaim
        from shared.notices.delivery import NoticeDeliveryRun
        from shared.notices.sweep import NoticeSweep

        n = settings.Notices
        if not n.Contact:  # every notice names it
            raise SettingsError([CONTACT_MISSING])
        # The verb's two-minute lease for a `verb/…` name (ADR-0048 D5), the host's otherwise.
        lease = VERB_LEASE_SECONDS if runner_kind(runner) == "verb" else n.LeaseSeconds
        claim = claim or NoticeClaim(runner, lease_seconds=lease, batch_size=n.BatchSize)
        transport = transport or notice_transport(settings)
        delivery = NoticeDeliveryRun(engine, clock, transport, claim, contact=n.Contact)
        # The hosted runners' lease, the verb's and this sweep's all write into one target.
        leftover = timedelta(seconds=max(lease, n.LeaseSeconds, VERB_LEASE_SECONDS))
        sweep = NoticeSweep(engine, clock, claim, delivery, leftover_age=leftover)

    def read_backlog() -> OwedBacklog:
        # Imported on the first collection, which only a host with an exporter makes.
        from shared.notices.status import owed_backlog_reader

        return owed_backlog_reader(engine, clock)()

    telemetry.watch_backlog(read_backlog)
    return Services(settings, engine, clock, sweep, telemetry, daily_limit_lock, transfer_writes)


def notice_transport(settings: Settings) -> NoticeTransport:
    """The pickup directory or blob container `Notices` names; nothing connects here."""
    from shared.notices.transports import BlobContainerTransport, PickupDirectoryTransport

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


def database_url(settings: Settings, *, local_default: bool) -> str:
    """Database__Url, or (for the command line and `serve` only) the local SQLite file."""
    url = settings.Database.Url
    if url is None and not local_default:
        raise SettingsError([refusal("Database__Url", "missing")])
    return LOCAL_DATABASE_URL if url is None else url


class Host:
    """`serve` ("api") or the Functions host ("function"), one per process: its start checks the
    settings and connects nothing (docs/architecture.md#the-composition-root)."""

    def __init__(
        self,
        kind: HostedKind,
        settings: Settings,
        *,
        clock: Clock | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        require_host(settings, kind)
        self.kind, self.settings, self.telemetry = kind, settings, telemetry
        named = is_named(settings, kind)
        transport = notice_transport(settings) if named else None
        runner = make_runner_name(kind) if named else None
        url = database_url(settings, local_default=kind == "api")
        self._compose = functools.partial(
            bootstrap, settings, url, clock, runner=runner, transport=transport, telemetry=telemetry
        )
        self._built: Services | None = None
        self._lock = threading.Lock()
        target = None if transport is None else transport.describe()
        sweep = self._sweep if named else None
        self.relay = HostedRelay(
            kind, settings, runner=runner, target=target, sweep=sweep, telemetry=telemetry
        )
        if kind == "function":  # `serve`'s loop announces itself as it starts
            self.relay.announce(f"schedule {settings.Notices.Schedule}")

    def services(self) -> Services:
        with self._lock:
            if self._built is None:
                self._built = self._compose()
            return self._built

    def _sweep(self) -> NoticeSweep:
        sweep = self.services().sweep
        assert sweep is not None  # composed under this host's runner name
        return sweep

    def relay_loop(self) -> NoticeRelayService:
        """`serve`'s loop, always registered (ADR-0048 D1) so every API host says what it does."""
        from shared.notices.hosted import NoticeRelayService

        return NoticeRelayService(self.relay)
