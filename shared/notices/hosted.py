"""HostedRelay: the one hosted runner of the relay, for the API's loop and the timer Function
alike (docs/architecture.md#the-composition-root, docs/decisions.md#adr-0048-d1). Built at the
host's start, it reads `Notices__Runner` once: the runner the flag names announces itself and
each tick runs one NoticeSweep; every other host steps aside and its ticks touch nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass(frozen=True, eq=False)
class HostedRelay:
    """One hosted runner. Named by the flag: its runner name (what it stamps into LeasedBy), its
    target's description and its sweep, built on the first tick (nothing connects at start). Not
    named: none of them."""

    kind: HostedKind
    settings: Settings
    runner: str | None = field(default=None, kw_only=True)
    target: str | None = field(default=None, kw_only=True)
    sweep: Callable[[], Sweep] | None = field(default=None, kw_only=True)
    telemetry: Telemetry = field(default=NO_TELEMETRY, kw_only=True)

    def __post_init__(self) -> None:
        if (self.runner is None) != (self.sweep is None):
            raise ValueError("a hosted runner has both a name and a sweep, or neither")

    @property
    def delivers(self) -> bool:
        return self.sweep is not None

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
        if self.sweep is None:
            return None
        if past_due:
            log.warning("Notice relay: this tick is late (past due); sweeping now")
        return self.telemetry.sweep(self.kind, self.sweep().run)
