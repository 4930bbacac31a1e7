"""The clock tests set and move; shared code reads it through `shared.clock.Clock`."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


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
