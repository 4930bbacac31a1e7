"""Exact text equality on every dialect: plain `=` on PostgreSQL and SQLite, on SQL Server the
three terms docs/database.md gives (the index seek, the binary comparison, trailing spaces)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, ColumnElement, and_, bindparam, func
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from shared.db.types import MSSQL_EXACT_COLLATION


class ExactEquals(FunctionElement[bool]):
    """`column = value`, exact on every dialect, compiled per dialect below (a FunctionElement
    for its cache key, cloning and FROM: its two arguments)."""

    inherit_cache = True
    type = Boolean()
    # A comparison, so dialects without a boolean type (SQL Server) add no `= 1` after it.
    _is_implicitly_boolean = True


@compiles(ExactEquals)
def _exact_default(element: ExactEquals, compiler: SQLCompiler, **kw: Any) -> str:
    column, value = element.clauses
    return str(compiler.process(column == value, **kw))


@compiles(ExactEquals, "mssql")
def _exact_mssql(element: ExactEquals, compiler: SQLCompiler, **kw: Any) -> str:
    column, value = element.clauses
    exact = and_(
        column == value,
        column.collate(MSSQL_EXACT_COLLATION) == value,
        func.datalength(column) == func.datalength(value),
    )
    return f"({compiler.process(exact, **kw)})"


StrColumn = ColumnElement[str] | QueryableAttribute[str]


def exact_equals(column: StrColumn, value: str) -> ColumnElement[bool]:
    """A WHERE term: the column holds exactly `value`, case and trailing spaces included."""
    return ExactEquals(column, bindparam(None, value, type_=column.type))


def exact_equals_parameter(column: StrColumn, name: str) -> ColumnElement[bool]:
    """`exact_equals` against the named bind parameter `name`, for a statement built once."""
    return ExactEquals(column, bindparam(name, type_=column.type))
