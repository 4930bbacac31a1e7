"""What a hosted runner of the relay needs for one sweep, and the two lines it logs at start.

Both hosted runners (the timer Function, ADR-0051; the API's loop, ADR-0048 D1) read
`Notices__Runner` once at start. The one it names announces itself with the name a reader
matches against `LeasedBy`; every other one says it steps aside (ADR-0051 D4) and never
touches the database.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from shared.clock import Clock
from shared.db.engine import get_engine
from shared.notices.runner_name import make_runner_name
from shared.notices.sweep import NoticeSweep, NoticeSweepSummary
from shared.notices.transports import NoticeTransport, transport_from_settings
from shared.settings import NoticeRunner, Settings
from shared.telemetry import NO_TELEMETRY, Telemetry

HostedKind = Literal["api", "function"]

log = logging.getLogger("azurebank.notices.relay")

# The flag value that names each hosted runner (ADR-0048 D6).
_NAMED_BY: dict[HostedKind, NoticeRunner] = {
    "api": NoticeRunner.API,
    "function": NoticeRunner.FUNCTION,
}


def is_named(settings: Settings, kind: HostedKind) -> bool:
    """ADR-0048 D1: the flag, not the lease, says whether this kind of runner delivers."""
    return settings.Notices.Runner is _NAMED_BY[kind]


def step_aside_line(settings: Settings) -> str:
    """ADR-0051 D4: the Information line of a host the flag does not name."""
    return (
        f"Notice relay: Notices__Runner is {settings.Notices.Runner.value}; "
        "this process delivers nothing"
    )


class RelayRunner:
    """One hosted runner: its name, and a NoticeSweep per call on an engine and a transport
    built on the first sweep (nothing connects at start, DESIGN §2)."""

    def __init__(
        self,
        kind: HostedKind,
        settings: Settings,
        *,
        database_url: str,
        clock: Clock,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.kind = kind
        self.telemetry = telemetry
        self.settings = settings
        self.database_url = database_url
        self.clock = clock
        self.name = make_runner_name(kind)
        self._transport: NoticeTransport | None = None
        self._built: NoticeSweep | None = None
        self._lock = threading.Lock()

    def announcement(self, cadence: str) -> str:
        """DESIGN §6: `Notice relay: live as NAME, CADENCE, lease Ns, batch N, into TARGET`."""
        n = self.settings.Notices
        return (
            f"Notice relay: live as {self.name}, {cadence}, lease {n.LeaseSeconds}s, "
            f"batch {n.BatchSize}, into {self.transport().describe()}"
        )

    def transport(self) -> NoticeTransport:
        """The delivery target, built once; building one opens no connection."""
        with self._lock:
            return self._transport_unlocked()

    def _transport_unlocked(self) -> NoticeTransport:
        if self._transport is None:
            self._transport = transport_from_settings(self.settings)
        return self._transport

    def sweep(self) -> NoticeSweepSummary:
        """One NoticeSweep under this runner's name (ADR-0048 D2: the same protocol for all),
        traced and counted by the host's telemetry."""
        return self.telemetry.sweep(self.kind, self._notice_sweep().run)

    def _notice_sweep(self) -> NoticeSweep:
        # Built on the first sweep, then reused: the engine is where connecting starts.
        with self._lock:
            if self._built is None:
                self._built = NoticeSweep.from_settings(
                    get_engine(self.database_url),
                    self.clock,
                    self.settings,
                    self.name,
                    transport=self._transport_unlocked(),
                )
            return self._built
