"""Exact text equality on every dialect: plain `=` on PostgreSQL and SQLite, on SQL Server the
three terms docs/database.md gives (the index seek, the binary comparison, trailing spaces)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, ColumnElement, and_, bindparam, func
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.visitors import InternalTraversal

from shared.db.types import MSSQL_EXACT_COLLATION


class ExactEquals(ColumnElement[bool]):
    """`column = value`, exact on every dialect (see the module's docstring)."""

    inherit_cache = True
    type = Boolean()
    # A comparison, so dialects without a boolean type (SQL Server) add no `= 1` after it.
    _is_implicitly_boolean = True
    # Both parts take part in the statement cache key and in cloning (the binds' values).
    _traverse_internals = [  # noqa: RUF012 (SQLAlchemy's own declaration style)
        ("column", InternalTraversal.dp_clauseelement),
        ("value", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, column: ColumnElement[str], value: BindParameter[str]) -> None:
        self.column = column
        self.value = value

    @property
    def _from_objects(self) -> list[Any]:  # the FROM the expression needs: the column's
        return list(self.column._from_objects)


@compiles(ExactEquals)
def _exact_default(element: ExactEquals, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(element.column == element.value, **kw))


@compiles(ExactEquals, "mssql")
def _exact_mssql(element: ExactEquals, compiler: SQLCompiler, **kw: Any) -> str:
    column, value = element.column, element.value
    exact = and_(
        column == value,
        column.collate(MSSQL_EXACT_COLLATION) == value,
        func.datalength(column) == func.datalength(value),
    )
    return f"({compiler.process(exact, **kw)})"


def exact_equals(
    column: ColumnElement[str] | QueryableAttribute[str], value: str
) -> ColumnElement[bool]:
    """A WHERE term true only when the column holds exactly `value` (case and trailing spaces
    included), on SQL Server as on PostgreSQL and SQLite."""
    element = column.__clause_element__() if isinstance(column, QueryableAttribute) else column
    return ExactEquals(element, bindparam(None, value, type_=element.type))


def exact_equals_parameter(
    column: ColumnElement[str] | QueryableAttribute[str], name: str
) -> ColumnElement[bool]:
    """`exact_equals` against the named bind parameter `name`, for a statement built once and
    executed with its values."""
    element = column.__clause_element__() if isinstance(column, QueryableAttribute) else column
    return ExactEquals(element, bindparam(name, type_=element.type))
