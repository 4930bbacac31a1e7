"""NoticeRelayService: the API's hosted loop (ADR-0048 D1), run beside `azurebank serve`.

The shape of the two hygiene sweeps: a periodic timer, the first look one full period after
start, a catch-all per sweep logged at Error, cancellation absorbed as shutdown. The sweep runs
on a worker thread, so the event loop that serves HTTP is never blocked by delivery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from shared.clock import Clock, SystemClock
from shared.notices.relay_runner import RelayRunner, is_named, step_aside_line
from shared.notices.sweep import NoticeSweepSummary
from shared.settings import Settings, require_host
from shared.telemetry import NO_TELEMETRY, Telemetry

log = logging.getLogger("azurebank.notices.relay")


class NoticeRelayService:
    """Always registered, so a second API host inherits it; reads `Notices__Runner` once, at
    construction. Unless the flag names the API it logs the flag and never starts a loop."""

    def __init__(
        self,
        settings: Settings,
        *,
        database_url: str,
        clock: Clock | None = None,
        sweep: Callable[[], NoticeSweepSummary] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        # ADR-0048 D6: a partial set stops the host (serve exits 78 before it gets here).
        require_host(settings, "api")
        self.period_seconds = float(settings.Notices.PeriodSeconds)
        self.lease_seconds = float(settings.Notices.LeaseSeconds)
        self.runner: RelayRunner | None = None
        self._sweep: Callable[[], NoticeSweepSummary] | None = None
        self._settings = settings
        if is_named(settings, "api"):
            self.runner = RelayRunner(
                "api",
                settings,
                database_url=database_url,
                clock=clock or SystemClock(),
                telemetry=telemetry,
            )
            self._sweep = sweep or self.runner.sweep
        self._task: asyncio.Task[None] | None = None
        self._inflight: asyncio.Future[NoticeSweepSummary] | None = None

    @property
    def delivers(self) -> bool:
        return self._sweep is not None

    def start(self) -> None:
        """Announce, or step aside; when named, start the loop on the running event loop."""
        if self.runner is None:
            log.info(step_aside_line(self._settings))
            return
        log.info(self.runner.announcement(f"every {int(self.period_seconds)}s"))
        self._task = asyncio.get_running_loop().create_task(self.run(), name="notice-relay")

    async def stop(self) -> None:
        """Cancel the loop, then let a sweep already on its thread finish its marks, bounded by
        the lease it holds: a file written and never marked would be refused next time (D3)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight], timeout=self.lease_seconds)
            if inflight.done() and not inflight.cancelled() and inflight.exception() is not None:
                log.error(
                    "Notice relay: the sweep failed as a whole (%s) while stopping",
                    type(inflight.exception()).__name__,
                )

    async def run(self) -> None:
        """The loop: first look one full period after start, then one sweep per period. A sweep
        that overruns its period is followed by one at once, never by a burst (PeriodicTimer)."""
        loop = asyncio.get_running_loop()
        next_at = loop.time() + self.period_seconds
        try:
            while True:
                await asyncio.sleep(max(0.0, next_at - loop.time()))
                await self.sweep_once()
                next_at = max(next_at + self.period_seconds, loop.time())
        except asyncio.CancelledError:
            # ADR-0048 D1: cancellation is shutdown, not a failure.
            log.info("Notice relay: stopped")

    async def sweep_once(self) -> NoticeSweepSummary | None:
        """One sweep off the event loop; never raises but for cancellation. Returns at once,
        touching nothing, when the flag does not name the API."""
        if self._sweep is None:
            return None
        self._inflight = asyncio.ensure_future(asyncio.to_thread(self._sweep))
        try:
            # Shielded: cancelling the loop must not orphan a sweep mid-delivery unawaited.
            return await asyncio.shield(self._inflight)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # ADR-0048 D1, D4: a catch-all per sweep, by exception type only.
            log.error(
                "Notice relay: the sweep failed as a whole (%s); the next period runs normally",
                type(exc).__name__,
            )
            return None
