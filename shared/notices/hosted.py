"""HostedRelay, the one hosted runner for the API's loop and the timer Function alike
(docs/decisions.md#adr-0048-d1); NoticeRelayService, the API's loop; the names in `LeasedBy`."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from shared.settings import HostedKind, Settings
from shared.telemetry import NO_TELEMETRY, Telemetry

if TYPE_CHECKING:
    # A host imports this at its start; the sweep (and the ORM under it) on its first tick.
    from shared.notices.sweep import NoticeSweepSummary

log = logging.getLogger("azurebank.notices.relay")

RunnerKind = Literal["api", "function", "verb"]

# LeasedBy is String(200); a host name longer than a DNS label says nothing more to a reader.
_HOST_MAX = 63


def make_runner_name(kind: RunnerKind) -> str:
    """A fresh `{kind}/{host}/{pid}/{8 hex}` (docs/operations.md#reading-the-start-lines); the
    random suffix tells two processes apart when a pid is reused."""
    if kind not in ("api", "function", "verb"):
        raise ValueError(f"unknown runner kind {kind!r}")
    # The host's first label, with '/' and whitespace replaced, so the name splits into four parts.
    label = socket.gethostname().split(".")[0] or "unknown-host"
    host = re.sub(r"[/\s]", "-", label)[:_HOST_MAX]
    return f"{kind}/{host}/{os.getpid()}/{secrets.token_hex(4)}"


def runner_kind(name: str) -> str:
    return name.split("/", 1)[0]


class Sweep(Protocol):
    def run(self) -> NoticeSweepSummary: ...


@dataclass(frozen=True, eq=False)
class HostedRelay:
    """One hosted runner. Named by `Notices__Runner`, it has a runner name, a target and a sweep
    built on its first tick (nothing connects at start); else none, and its ticks touch nothing."""

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
        """Once, at start: the `live as …` line, or the step-aside line."""
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


@dataclass(eq=False)
class NoticeRelayService:
    """The API's loop beside `azurebank serve`, always registered (ADR-0048 D1): each tick is
    HostedRelay's, on a worker thread, so delivery never blocks the event loop serving HTTP."""

    relay: HostedRelay
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _inflight: asyncio.Future[NoticeSweepSummary | None] | None = field(default=None, init=False)

    @property
    def delivers(self) -> bool:
        return self.relay.delivers

    def start(self) -> None:
        self.relay.announce(f"every {self.relay.settings.Notices.PeriodSeconds}s")
        if self.relay.delivers:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="notice-relay")

    async def stop(self) -> None:
        """Cancel the loop, then let a sweep already on its thread finish its marks, bounded by
        the lease it holds: a file written and never marked would be refused next time."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._inflight is not None and not self._inflight.done():
            await asyncio.wait([self._inflight], timeout=self.relay.settings.Notices.LeaseSeconds)

    async def run(self) -> None:
        """The first look one full period after start, then one sweep per period; a sweep that
        overruns its period is followed by one at once, never by a burst (PeriodicTimer)."""
        loop, period = asyncio.get_running_loop(), self.relay.settings.Notices.PeriodSeconds
        next_at = loop.time() + period
        try:
            while True:
                await asyncio.sleep(max(0.0, next_at - loop.time()))
                await self.sweep_once()
                next_at = max(next_at + period, loop.time())
        except asyncio.CancelledError:
            log.info("Notice relay: stopped")  # cancellation is shutdown, not a failure

    async def sweep_once(self) -> NoticeSweepSummary | None:
        """One tick off the event loop; never raises but for cancellation."""
        if not self.relay.delivers:
            return None
        self._inflight = asyncio.ensure_future(asyncio.to_thread(self.relay.tick))
        # Shielded: cancelling the loop must not orphan a sweep mid-delivery unawaited.
        return await asyncio.shield(self._inflight)
