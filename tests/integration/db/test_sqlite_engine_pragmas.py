"""DESIGN §3: SQLite connections enforce foreign keys, use WAL and wait on a busy database, at
most Database__LockTimeoutSeconds (the only wait a local file has)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from shared.db.engine import EngineOptions, build_engine


def test_every_sqlite_connection_has_foreign_keys_wal_and_a_busy_timeout(sqlite_url: str) -> None:
    engine = build_engine(sqlite_url, options=EngineOptions(lock_timeout=7))
    try:
        for _ in range(2):  # NullPool: each checkout is a new connection, set up again
            with engine.connect() as conn:
                assert conn.scalar(text("PRAGMA foreign_keys")) == 1
                assert conn.scalar(text("PRAGMA journal_mode")) == "wal"
                busy = conn.scalar(text("PRAGMA busy_timeout"))
                assert busy == 7000
    finally:
        engine.dispose()


def test_a_row_pointing_at_a_missing_user_is_refused_on_sqlite(sqlite_url: str) -> None:
    engine = build_engine(sqlite_url)
    try:
        with pytest.raises(IntegrityError, match="FOREIGN KEY"), engine.begin() as conn:
            conn.execute(
                text(
                    'INSERT INTO "Accounts" ("Id", "UserId", "Name", "Balance", "Currency", '
                    '"IsDeleted", "CreatedAt", "Version") '
                    "VALUES (:id, 'nobody', 'Main', 0, 'EUR', 0, CURRENT_TIMESTAMP, 1)"
                ),
                {"id": "0" * 32},
            )
    finally:
        engine.dispose()
