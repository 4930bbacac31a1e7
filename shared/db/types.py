"""Column types that hold money exactly and time as UTC on every dialect (docs/database.md), and
what a string must be before SQL sees it (docs/money.md#request-bodies)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, DateTime, LargeBinary, Numeric, Text, Unicode
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.types import TypeDecorator, TypeEngine

_SCALE = Decimal("10000")
_QUANTUM = Decimal("0.0001")
# EF's `nvarchar(n)` on SQL Server; plain VARCHAR elsewhere.
Str = Unicode
# SQL Server's binary collation (docs/database.md): case-, accent- and width-sensitive, like
# PostgreSQL's and SQLite's default comparison of text.
MSSQL_EXACT_COLLATION = "Latin1_General_100_BIN2"


class Money(TypeDecorator[Decimal]):
    """`Numeric(18,4)` where the server has exact decimals; on SQLite, which has none, an integer
    of ten-thousandths, so stored values and SUM() stay exact."""

    impl = Numeric(18, 4)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        sqlite = dialect.name == "sqlite"
        return dialect.type_descriptor(BigInteger() if sqlite else Numeric(18, 4, asdecimal=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        amount = Decimal(value).quantize(_QUANTUM)
        return int(amount * _SCALE) if dialect.name == "sqlite" else amount

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        amount = Decimal(int(value)) / _SCALE if dialect.name == "sqlite" else Decimal(value)
        return amount.quantize(_QUANTUM)


class _OnSqlServer(TypeDecorator[Any]):
    """`generic`, and on SQL Server `on_mssql(*args, **kwargs)`: there SQLAlchemy would emit the
    deprecated NTEXT, TEXT and IMAGE when it cannot ask the server's version (offline DDL)."""

    impl: Any = Text  # replaced by each instance's generic type
    cache_ok = True

    def __init__(self, generic: TypeEngine[Any], on_mssql: str, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.impl = self.generic = generic
        self.on_mssql, self.args, self.kwargs = on_mssql, args, kwargs

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name != "mssql":
            return dialect.type_descriptor(self.generic)
        # Imported only here: a PostgreSQL or SQLite host never loads SQL Server's dialect (~10 ms
        # of a cold start: bench/cold_start.py).
        from sqlalchemy.dialects import mssql

        return dialect.type_descriptor(getattr(mssql, self.on_mssql)(*self.args, **self.kwargs))


# EF's `nvarchar(max)` and `varbinary(n)`.
LongText = _OnSqlServer(Text(), "NVARCHAR")
Hash32 = _OnSqlServer(LargeBinary(32), "VARBINARY", 32)


def ExactStr(length: int) -> _OnSqlServer:
    """`Str(length)` compared exactly on every dialect: on SQL Server it carries the binary
    collation, for `=` and its indexes (trailing spaces still pad there: shared/db/exact.py)."""
    return _OnSqlServer(Unicode(length), "NVARCHAR", length, collation=MSSQL_EXACT_COLLATION)


class UtcDateTime(_OnSqlServer):
    """A UTC instant stored without a zone (EF's `datetime2`), handed back timezone-aware.
    A naive value is refused on the way in: it is always a bug here."""

    cache_ok = True

    def __init__(self) -> None:
        # SQL Server's DATETIME rounds to 1/300 s; the audit chain hashes the instant it wrote,
        # so anything but DATETIME2 would make every RowHash fail on read-back.
        super().__init__(DateTime(timezone=False), "DATETIME2", precision=7)

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ValueError("UtcDateTime needs a timezone-aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def column_length(column: InstrumentedAttribute[str] | InstrumentedAttribute[str | None]) -> int:
    """The declared length of a string column (`Str(n)` in shared.db.schema)."""
    length = getattr(column.type, "length", None)
    if not isinstance(length, int):
        raise TypeError(f"{column} has no declared length")
    return length


def unstorable_reason(value: str, max_length: int) -> str | None:
    """Why `value` cannot be stored in or compared with a column of `max_length` UTF-16 units (as
    nvarchar(n) counts): the caller's 400, never a driver's 500, naming a rule, never the value."""
    if "\x00" in value:
        return "must not contain NUL"
    try:
        units = len(value.encode("utf-16-le")) // 2
    except UnicodeEncodeError:
        return "must be valid Unicode text (no lone surrogates)"
    return f"at most {max_length} characters" if units > max_length else None
