"""The Function runner's host logic (ADR-0051), kept out of the trigger so it is testable with
no Azure type in sight: the timer Function only hands each tick's `past_due` to `tick`."""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.clock import Clock, SystemClock
from shared.notices.relay_runner import RelayRunner, is_named, step_aside_line
from shared.notices.sweep import NoticeSweepSummary
from shared.settings import Settings, require_host
from shared.telemetry import NO_TELEMETRY, Telemetry

log = logging.getLogger("azurebank.notices.relay")


class FunctionRelayHost:
    """Reads `Notices__Runner` once, at start. Named: announces itself and runs one NoticeSweep
    per tick. Not named: says so once, and every tick returns at once (ADR-0051 D4)."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        sweep: Callable[[], NoticeSweepSummary] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        # ADR-0048 D6 / ADR-0051 D3: a partial set stops the host, naming the key and the fix.
        require_host(settings, "function")
        self.runner: RelayRunner | None = None
        self._sweep: Callable[[], NoticeSweepSummary] | None = None
        if is_named(settings, "function"):
            assert settings.Database.Url is not None  # require_host refuses a missing one
            self.runner = RelayRunner(
                "function",
                settings,
                database_url=settings.Database.Url,
                clock=clock or SystemClock(),
                telemetry=telemetry,
            )
            self._sweep = sweep or self.runner.sweep
            log.info(self.runner.announcement(f"schedule {settings.Notices.Schedule}"))
        else:
            log.info(step_aside_line(settings))

    @property
    def delivers(self) -> bool:
        return self._sweep is not None

    def tick(self, *, past_due: bool) -> NoticeSweepSummary | None:
        """One timer tick: one sweep when this host is named, none otherwise. Never raises, so
        the next tick runs normally; a failed sweep is an Error by exception type only (ADR-0048
        D4: an I/O message can echo a path)."""
        if self._sweep is None:
            return None
        if past_due:
            log.warning("Notice relay: this tick is late (past due); sweeping now")
        try:
            return self._sweep()
        except Exception as exc:
            log.error(
                "Notice relay: the sweep failed as a whole (%s); the next tick runs normally",
                type(exc).__name__,
            )
            return None
