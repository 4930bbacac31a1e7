"""The Idempotency-Key's claim, the first statement of every money transaction, and the ONE
module holding its SQL, one function per dialect.

The claim inserts the key's row (`InProgress`) unless the key has one, and answers its Id when it
did. The row stays uncommitted until the money's own commit completes it, so nobody else ever
sees an `InProgress` row: a duplicate's claim meets the unique (UserId, Operation, Key) held by
the open transaction and waits for it to end — its commit (the duplicate then inserts nothing
and reads the stored answer) or its rollback (the duplicate's row goes in). A process that dies
mid-request takes its transaction, and the key with it, away with its connection.

    PostgreSQL  INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING, from a one-row subquery
                that first sets `client_connection_check_interval` for this transaction only:
                a backend whose client died while it waited on a lock (a transfer parked on the
                customer's lock, the tail) notices within the interval and rolls back, instead
                of holding the key to the end of that wait
    SQL Server  INSERT … OUTPUT … SELECT … WHERE NOT EXISTS (… WITH (UPDLOCK, HOLDLOCK)): the
                range lock makes the read and the insert one step (two claims of one absent key
                serialise on it) and waits on another transaction's uncommitted row
    SQLite      INSERT … ON CONFLICT DO NOTHING RETURNING, inside BEGIN IMMEDIATE: the one
                writer never meets an uncommitted row of another

The claim's wait is the connection's lock wait, Database__LockTimeoutSeconds (shared/db/engine.py
sets it on every connection: PostgreSQL's lock_timeout, SQL Server's LOCK_TIMEOUT); when it runs
out the key is still held by an attempt alive in its transaction, which is 409
IDEMPOTENCY_IN_PROGRESS. A connection whose client went silent (half-open) ends with its
idle-in-transaction timeout and keepalives, set there too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sqlalchemy import BindParameter, TextClause, bindparam, text
from sqlalchemy.types import TypeEngine

from shared.db.dialects import DialectName, for_dialect
from shared.db.schema import IdempotencyRecord

_COLUMNS = IdempotencyRecord.__table__.c
# The bound values, typed by the columns they are written to (ids, instants, exact text).
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

_POSTGRESQL_CLAIM = """INSERT INTO "IdempotencyRecords"
    ("Id", "UserId", "Operation", "Key", "RequestHash", "State", "CreatedAt")
SELECT :record_id, :user_id, :operation, :key, :request_hash, 'InProgress', :now
FROM (SELECT set_config('client_connection_check_interval', :client_check, true)) AS bounds
ON CONFLICT ("UserId", "Operation", "Key") DO NOTHING
RETURNING "Id\""""

_MSSQL_CLAIM = """INSERT INTO [IdempotencyRecords]
    ([Id], [UserId], [Operation], [Key], [RequestHash], [State], [CreatedAt])
OUTPUT inserted.[Id]
SELECT :record_id, :user_id, :operation, :key, :request_hash, N'InProgress', :now
WHERE NOT EXISTS (
    SELECT 1 FROM [IdempotencyRecords] WITH (UPDLOCK, HOLDLOCK)
    WHERE [UserId] = :user_id AND [Operation] = :operation AND [Key] = :key
)"""

_SQLITE_CLAIM = """INSERT INTO "IdempotencyRecords"
    ("Id", "UserId", "Operation", "Key", "RequestHash", "State", "CreatedAt")
VALUES (:record_id, :user_id, :operation, :key, :request_hash, 'InProgress', :now)
ON CONFLICT ("UserId", "Operation", "Key") DO NOTHING
RETURNING "Id\""""


def _typed(sql: str) -> TextClause:
    binds: list[BindParameter[object]] = [
        bindparam(name, type_=type_) for name, type_ in _PARAMETERS.items()
    ]
    return text(sql).bindparams(*binds)


@functools.cache
def postgresql_claim() -> TextClause:
    """PostgreSQL; the interval is text ('500ms'), as set_config takes it."""
    return _typed(_POSTGRESQL_CLAIM)


@functools.cache
def mssql_claim() -> TextClause:
    return _typed(_MSSQL_CLAIM)


@functools.cache
def sqlite_claim() -> TextClause:
    return _typed(_SQLITE_CLAIM)


_CLAIMS: dict[DialectName, Callable[[], TextClause]] = {
    "postgresql": postgresql_claim,
    "mssql": mssql_claim,
    "sqlite": sqlite_claim,
}


def claim_statement(dialect: str) -> TextClause:
    return for_dialect(dialect, _CLAIMS, what="key claim")()


def bounds(dialect: str) -> dict[str, str]:
    """The claim's extra parameters: on PostgreSQL its client check (see above)."""
    if dialect != "postgresql":
        return {}
    return {"client_check": f"{CLIENT_CHECK_MS}ms"}
