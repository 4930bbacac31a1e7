"""The one way to choose what differs by dialect (docs/database.md#sql-that-differs-by-dialect): a
table naming every dialect's choice, picked from with `for_dialect`, which refuses a dialect the
table lacks with a ValueError naming it, never a silent fallback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

DialectName = Literal["postgresql", "mssql", "sqlite"]
T = TypeVar("T")


def dialect_name(bind: Engine | Connection | Session | str) -> str:
    """The dialect `bind` talks to (a name passes through)."""
    if isinstance(bind, str):
        return bind
    if isinstance(bind, Session):
        return bind.get_bind().dialect.name
    return bind.dialect.name


def for_dialect(
    bind: Engine | Connection | Session | str, choices: Mapping[DialectName, T], *, what: str
) -> T:
    """`choices`' entry for `bind`'s dialect; ValueError naming the dialect when it has none."""
    name = dialect_name(bind)
    try:
        return choices[name]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"no {what} for dialect {name!r}") from None
