"""The claim of ADR-0048 D2 as SQL: one set-based UPDATE per dialect, and nowhere else
(docs/database.md).

The statement stamps up to `limit` of the oldest owed rows whose lease is null or lapsed with the
runner's name and the lease end, and returns their ids. The database serialises two claims, so
the second finds nothing free among the first's rows. Per dialect:

- PostgreSQL: the rows are picked `FOR UPDATE SKIP LOCKED` in a MATERIALIZED CTE. A plain
  `IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` may be rescanned by the plan (a nested loop's
  inner side), and each rescan skips the rows the UPDATE has just written, so one claim stamped
  more than `limit` rows (seen here: batch 3 claimed 5). MATERIALIZED evaluates the pick once.
- SQL Server: `WITH (UPDLOCK, READPAST, ROWLOCK)` on the subquery's table, via `with_hint`
  (SQLAlchemy silently drops `with_for_update` on mssql). The subquery is `TOP (n)`.
- SQLite: nothing; one writer at a time (the claim's unit of work begins IMMEDIATE).

The outer UPDATE repeats the free-row predicate, so a row that stopped being free between the
pick and the write is never stamped.

The instants are named bind parameters (`now`, `lease_until`), so a runner builds the statement
once per batch size and passes each sweep's instants when it executes it (NoticeClaim;
shared/db/prebuilt.py says why).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    FromClause,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    or_,
    select,
    update,
)

from shared.db.dialects import DialectName, for_dialect
from shared.db.schema import SubscriberNotice

_NOTICES = cast(Table, SubscriberNotice.__table__)

# SQL Server's row-lock hint for a claim: take update locks, skip rows another claim holds.
MSSQL_CLAIM_HINT = "WITH (UPDLOCK, READPAST, ROWLOCK)"


def claim_statement(
    dialect_name: str, *, runner: str, now: datetime, lease_until: datetime, limit: int
) -> Update:
    """The claim UPDATE for `dialect_name`, returning the `Id` of each row it stamped. `now` and
    `lease_until` are the values of its `now` and `lease_until` parameters; an execution may pass
    others."""
    build = for_dialect(dialect_name, _BUILDERS, what="claim statement")
    instant = _NOTICES.c.LeasedUntil.type
    now_param = bindparam("now", now, type_=instant)
    free = _NOTICES.alias("free")
    oldest_free = (
        select(free.c.Id)
        .where(_is_free(free, now_param))
        .order_by(free.c.CreatedAt, free.c.Id)
        .limit(limit)
    )
    return (
        update(_NOTICES)
        .where(_NOTICES.c.Id.in_(build(oldest_free, free)), _is_free(_NOTICES, now_param))
        .values(LeasedBy=runner, LeasedUntil=bindparam("lease_until", lease_until, type_=instant))
        .returning(_NOTICES.c.Id)
    )


def _is_free(table: FromClause, now: BindParameter[datetime]) -> ColumnElement[bool]:
    # Owed, and either never leased or leased under a lease that has lapsed.
    return and_(
        table.c.DeliveredAt.is_(None),
        or_(table.c.LeasedUntil.is_(None), table.c.LeasedUntil <= now),
    )


def _postgresql(oldest_free: Select[Any], _free: FromClause) -> Select[Any]:
    picked = oldest_free.with_for_update(skip_locked=True).cte("picked").prefix_with("MATERIALIZED")
    return select(picked.c.Id)


def _mssql(oldest_free: Select[Any], free: FromClause) -> Select[Any]:
    return oldest_free.with_hint(free, MSSQL_CLAIM_HINT, dialect_name="mssql")


def _sqlite(oldest_free: Select[Any], _free: FromClause) -> Select[Any]:
    return oldest_free


_BUILDERS: dict[DialectName, Callable[[Select[Any], FromClause], Select[Any]]] = {
    "postgresql": _postgresql,
    "mssql": _mssql,
    "sqlite": _sqlite,
}
