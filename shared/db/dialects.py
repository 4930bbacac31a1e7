"""The one way to choose what differs by dialect (docs/database.md#sql-that-differs-by-dialect).

Code that needs a dialect's own statement (or step) names every dialect's choice in one table
and picks from it with `for_dialect`; a dialect the table lacks is a ValueError naming the
dialect and what was asked for, never a silent fallback.
"""

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
