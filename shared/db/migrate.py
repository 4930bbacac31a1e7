"""Run the Alembic migrations programmatically (`azurebank db upgrade`, tests, the quick start)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str, *, output_buffer: TextIO | None = None) -> Config:
    # Offline (--sql) DDL goes to output_buffer: Config's `stdout` is Alembic's own messages.
    config = Config(output_buffer=output_buffer)
    config.set_main_option("script_location", str(MIGRATIONS))
    # `%` would be read as interpolation by configparser; a password may contain one.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str) -> None:
    command.upgrade(alembic_config(url), "head")


def downgrade(url: str) -> None:
    command.downgrade(alembic_config(url), "base")


def offline_sql(url: str) -> str:
    """The DDL the migrations would run on `url`'s dialect, generated without connecting."""
    out = io.StringIO()
    command.upgrade(alembic_config(url, output_buffer=out), "head", sql=True)
    return out.getvalue()
