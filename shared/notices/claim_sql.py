"""The lease claim as SQL, one set-based UPDATE per dialect and nowhere else; why it reads as it
does: docs/database.md#sql-that-differs-by-dialect and docs/decisions.md#adr-0048-d2."""

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

from shared.db.engine import DialectName, for_dialect
from shared.db.schema import SubscriberNotice

_NOTICES = cast(Table, SubscriberNotice.__table__)

# SQLAlchemy drops `with_for_update` on mssql: update locks, skipping rows another claim holds.
MSSQL_CLAIM_HINT = "WITH (UPDLOCK, READPAST, ROWLOCK)"


def claim_statement(
    dialect_name: str, *, runner: str, now: datetime, lease_until: datetime, limit: int
) -> Update:
    """The claim UPDATE, returning the `Id` of each row it stamped; `now` and `lease_until` are
    its parameters' values until an execution passes others."""
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


def lease_free(table: FromClause, now: BindParameter[datetime] | datetime) -> ColumnElement[bool]:
    """Never leased, or leased under a lease that has lapsed by `now`."""
    return or_(table.c.LeasedUntil.is_(None), table.c.LeasedUntil <= now)


def _is_free(table: FromClause, now: BindParameter[datetime]) -> ColumnElement[bool]:
    return and_(table.c.DeliveredAt.is_(None), lease_free(table, now))


def _postgresql(oldest_free: Select[Any], _free: FromClause) -> Select[Any]:
    # MATERIALIZED: a plan may rescan a plain `IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`, each
    # rescan skipping the rows just written, so one claim stamped more than `limit` rows.
    picked = oldest_free.with_for_update(skip_locked=True).cte("picked").prefix_with("MATERIALIZED")
    return select(picked.c.Id)


def _mssql(oldest_free: Select[Any], free: FromClause) -> Select[Any]:
    return oldest_free.with_hint(free, MSSQL_CLAIM_HINT, dialect_name="mssql")


_BUILDERS: dict[DialectName, Callable[[Select[Any], FromClause], Select[Any]]] = {
    "postgresql": _postgresql,
    "mssql": _mssql,
    "sqlite": lambda oldest_free, _free: oldest_free,
}
