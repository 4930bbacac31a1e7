"""Alembic migrations; `azurebank db upgrade` runs them (shared.db.migrate)."""
