"""The one injected clock (ADR-0050 D1, D6): the ledger, the mint, the expiry and the relay's
leases all read the same object, so tests move time for all of them at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock tests set and move; thread-safe so concurrent tests can share it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, instant: datetime) -> None:
        with self._lock:
            self._now = instant.astimezone(UTC)

    def advance(self, delta: timedelta | float) -> datetime:
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        with self._lock:
            self._now += step
            return self._now


def utc_day(instant: datetime) -> tuple[datetime, datetime]:
    """ADR-0050 D1: the UTC calendar day holding `instant`, as [00:00:00Z, next 00:00:00Z)."""
    start = instant.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def utc_text(instant: datetime) -> str:
    """An instant as ISO-8601 UTC with a `Z` (`2026-09-08T00:00:00Z`), as bodies and commands
    print times."""
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
