"""Alembic environment: the URL comes from the caller (shared.db.migrate), never from a file."""

from __future__ import annotations

from typing import Any

from alembic import context

from shared.db.engine import MIGRATION_WAITS, build_engine
from shared.db.schema import metadata

url = context.config.get_main_option("sqlalchemy.url")


def _migrate(**options: Any) -> None:
    context.configure(target_metadata=metadata(), **options)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _migrate(url=url, literal_binds=True, dialect_opts={"paramstyle": "named"})
else:
    engine = build_engine(url or "", options=MIGRATION_WAITS)
    try:
        with engine.connect() as connection:
            # ALTER on SQLite means copy-and-move; batch mode does that for us.
            sqlite = connection.dialect.name == "sqlite"
            _migrate(connection=connection, render_as_batch=sqlite, compare_type=True)
    finally:
        engine.dispose()
