"""What the commands share: the database URL fallback (DESIGN §4)."""

from __future__ import annotations

from shared.settings import Settings

# DESIGN §4: the command line and `serve` only; the Functions host refuses to start without one.
DEFAULT_DATABASE_URL = "sqlite:///azurebank.db"


def database_url(settings: Settings) -> str:
    return settings.Database.Url or DEFAULT_DATABASE_URL
