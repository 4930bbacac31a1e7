"""NoticeRelayService: the API's hosted loop beside `azurebank serve`, shaped as
docs/decisions.md#adr-0048-d1 says; each tick is HostedRelay's, on a worker thread, so the event
loop that serves HTTP is never blocked by delivery."""

from __future__ import annotations

import asyncio
import logging

from shared.notices.hosted import HostedRelay
from shared.notices.sweep import NoticeSweepSummary

log = logging.getLogger("azurebank.notices.relay")


class NoticeRelayService:
    """Always registered; unless the flag names the API it logs the flag and never starts a
    loop."""

    def __init__(self, relay: HostedRelay) -> None:
        self.relay = relay
        notices = relay.settings.Notices
        self.period_seconds = float(notices.PeriodSeconds)
        self.lease_seconds = float(notices.LeaseSeconds)
        self._task: asyncio.Task[None] | None = None
        self._inflight: asyncio.Future[NoticeSweepSummary | None] | None = None

    @property
    def delivers(self) -> bool:
        return self.relay.delivers

    def start(self) -> None:
        """Announce, or step aside; when named, start the loop on the running event loop."""
        self.relay.announce(f"every {int(self.period_seconds)}s")
        if self.relay.delivers:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="notice-relay")

    async def stop(self) -> None:
        """Cancel the loop, then let a sweep already on its thread finish its marks, bounded by
        the lease it holds: a file written and never marked would be refused next time."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight], timeout=self.lease_seconds)

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
            # Cancellation is shutdown, not a failure.
            log.info("Notice relay: stopped")

    async def sweep_once(self) -> NoticeSweepSummary | None:
        """One tick off the event loop; it never raises but for cancellation, and returns at once
        when the flag does not name the API."""
        if not self.relay.delivers:
            return None
        self._inflight = asyncio.ensure_future(asyncio.to_thread(self.relay.tick))
        # Shielded: cancelling the loop must not orphan a sweep mid-delivery unawaited.
        return await asyncio.shield(self._inflight)
