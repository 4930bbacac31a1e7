"""HostedRelay: the one hosted runner of the relay, for the API's loop and the timer Function
alike (docs/architecture.md#the-composition-root, docs/decisions.md#adr-0048-d1). Built at the
host's start, it reads `Notices__Runner` once: the runner the flag names announces itself and
each tick runs one NoticeSweep; every other host steps aside and its ticks touch nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from shared.settings import HostedKind, Settings
from shared.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:
    # A host imports this at its start; the sweep (and the ORM under it) on its first tick.
    from shared.notices.sweep import NoticeSweepSummary

log = logging.getLogger("azurebank.notices.relay")


class Sweep(Protocol):
    """What a hosted runner needs of its NoticeSweep."""

    def run(self) -> NoticeSweepSummary: ...


class HostedRelay:
    """One hosted runner. Named by the flag: its runner name, its target's description and its
    sweep, built on the first tick (nothing connects at start). Not named: none of them."""

    def __init__(
        self,
        kind: HostedKind,
        settings: Settings,
        *,
        runner: str | None = None,
        target: str | None = None,
        sweep: Callable[[], Sweep] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        if (runner is None) != (sweep is None):
            raise ValueError("a hosted runner has both a name and a sweep, or neither")
        self.kind = kind
        self.settings = settings
        self.runner = runner  # the name it stamps into LeasedBy
        self.target = target
        self._sweep = sweep
        self.telemetry = telemetry

    @property
    def delivers(self) -> bool:
        return self._sweep is not None

    def announce(self, cadence: str) -> None:
        """Once, at start: the `live as …` line (docs/operations.md#reading-the-start-lines), or the
        step-aside line."""
        if self.runner is None:
            log.info(
                "Notice relay: Notices__Runner is %s; this process delivers nothing",
                self.settings.Notices.Runner.value,
            )
            return
        n = self.settings.Notices
        log.info(
            "Notice relay: live as %s, %s, lease %ss, batch %s, into %s",
            self.runner,
            cadence,
            n.LeaseSeconds,
            n.BatchSize,
            self.target,
        )

    def tick(self, *, past_due: bool = False) -> NoticeSweepSummary | None:
        """One sweep when this host is named, none otherwise; never raises (the sweep's own
        catch-all), traced and counted by the host's telemetry by runner kind."""
        if self._sweep is None:
            return None
        if past_due:
            log.warning("Notice relay: this tick is late (past due); sweeping now")
        return self.telemetry.sweep(self.kind, self._sweep().run)
