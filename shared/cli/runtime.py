"""What the commands share: the database URL fallback (DESIGN §4) and a unit of work."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.settings import Settings

# DESIGN §4: the command line and `serve` only; the Functions host refuses to start without one.
DEFAULT_DATABASE_URL = "sqlite:///azurebank.db"


def database_url(settings: Settings) -> str:
    return settings.Database.Url or DEFAULT_DATABASE_URL


def utc_text(instant: datetime) -> str:
    """An instant as ISO-8601 UTC with a `Z`, as the commands print times."""
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
