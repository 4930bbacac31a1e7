"""The Idempotency-Key's claim, every money transaction's first statement, one text per dialect
(docs/money.md#idempotency-records: PostgreSQL's polls the client, SQL Server's locks a range)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.types import TypeEngine

from shared.db.engine import DialectName, for_dialect
from shared.db.schema import IdempotencyRecord

_COLUMNS = IdempotencyRecord.__table__.c
_PARAMETERS: dict[str, TypeEngine[Any]] = {
    "record_id": _COLUMNS.Id.type,
    "user_id": _COLUMNS.UserId.type,
    "operation": _COLUMNS.Operation.type,
    "key": _COLUMNS.Key.type,
    "request_hash": _COLUMNS.RequestHash.type,
    "now": _COLUMNS.CreatedAt.type,
}

# How often a PostgreSQL backend polls its client's socket while a statement of the money's
# transaction runs or waits: cheap, and well inside the 2 s a retry after a crash is owed.
CLIENT_CHECK_MS = 500


def _typed(sql: str) -> TextClause:
    return text(sql).bindparams(*(bindparam(n, type_=t) for n, t in _PARAMETERS.items()))


def postgresql_claim() -> TextClause:
    """PostgreSQL; the interval is text ('500ms'), as set_config takes it."""
    return _typed("""INSERT INTO "IdempotencyRecords"
    ("Id", "UserId", "Operation", "Key", "RequestHash", "State", "CreatedAt")
SELECT :record_id, :user_id, :operation, :key, :request_hash, 'InProgress', :now
FROM (SELECT set_config('client_connection_check_interval', :client_check, true)) AS bounds
ON CONFLICT ("UserId", "Operation", "Key") DO NOTHING
RETURNING "Id\"""")


def mssql_claim() -> TextClause:
    return _typed("""INSERT INTO [IdempotencyRecords]
    ([Id], [UserId], [Operation], [Key], [RequestHash], [State], [CreatedAt])
OUTPUT inserted.[Id]
SELECT :record_id, :user_id, :operation, :key, :request_hash, N'InProgress', :now
WHERE NOT EXISTS (
    SELECT 1 FROM [IdempotencyRecords] WITH (UPDLOCK, HOLDLOCK)
    WHERE [UserId] = :user_id AND [Operation] = :operation AND [Key] = :key
)""")


def sqlite_claim() -> TextClause:
    return _typed("""INSERT INTO "IdempotencyRecords"
    ("Id", "UserId", "Operation", "Key", "RequestHash", "State", "CreatedAt")
VALUES (:record_id, :user_id, :operation, :key, :request_hash, 'InProgress', :now)
ON CONFLICT ("UserId", "Operation", "Key") DO NOTHING
RETURNING "Id\"""")


_CLAIMS: dict[DialectName, Callable[[], TextClause]] = {
    "postgresql": postgresql_claim,
    "mssql": mssql_claim,
    "sqlite": sqlite_claim,
}


def claim_statement(dialect: str) -> TextClause:
    return for_dialect(dialect, _CLAIMS, what="key claim")()


def bounds(dialect: str) -> dict[str, str]:
    """The claim's extra parameters: on PostgreSQL its client check (see above)."""
    return {"client_check": f"{CLIENT_CHECK_MS}ms"} if dialect == "postgresql" else {}
