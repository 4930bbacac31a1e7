"""The one injected clock (ADR-0050 D1, D6): the ledger, the mint, the expiry and the relay's
leases all read the same object, so tests move time for all of them at once."""

from __future__ import annotations

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


def utc_day(instant: datetime) -> tuple[datetime, datetime]:
    """ADR-0050 D1: the UTC calendar day holding `instant`, as [00:00:00Z, next 00:00:00Z)."""
    start = instant.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def utc_text(instant: datetime) -> str:
    """An instant as bodies and commands print it: ISO-8601 UTC with a `Z`."""
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
