"""Column types that hold money exactly and time as UTC on every dialect (docs/database.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, DateTime, LargeBinary, Numeric, Text, Unicode
from sqlalchemy.dialects import mssql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

_SCALE = Decimal("10000")


class Money(TypeDecorator[Decimal]):
    """`Numeric(18,4)` where the server has exact decimals; on SQLite, which has none, an integer
    of ten-thousandths, so stored values and SUM() stay exact."""

    impl = Numeric(18, 4)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(BigInteger())
        return dialect.type_descriptor(Numeric(18, 4, asdecimal=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        amount = Decimal(value).quantize(Decimal("0.0001"))
        if dialect.name == "sqlite":
            return int(amount * _SCALE)
        return amount

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        if dialect.name == "sqlite":
            return (Decimal(int(value)) / _SCALE).quantize(Decimal("0.0001"))
        return Decimal(value).quantize(Decimal("0.0001"))


def Str(length: int) -> Unicode:
    """EF's `nvarchar(n)` on SQL Server; plain VARCHAR elsewhere."""
    return Unicode(length)


# SQL Server's binary collation (docs/database.md): case-, accent- and width-sensitive, like
# PostgreSQL's and SQLite's default comparison of text.
MSSQL_EXACT_COLLATION = "Latin1_General_100_BIN2"


def ExactStr(length: int) -> TypeEngine[str]:
    """`Str(length)` compared exactly on every dialect: on SQL Server the column carries the
    binary collation, so `=` and its indexes are case-sensitive there too (trailing spaces still
    pad under every SQL Server collation: shared/db/exact.py)."""
    return Unicode(length).with_variant(
        mssql.NVARCHAR(length, collation=MSSQL_EXACT_COLLATION), "mssql"
    )


# EF's `nvarchar(max)` and `varbinary(n)`: SQLAlchemy would otherwise emit the deprecated NTEXT,
# TEXT and IMAGE types on SQL Server when it cannot ask the server's version (offline DDL).
LongText = Text().with_variant(mssql.NVARCHAR(), "mssql")
Hash32 = LargeBinary(32).with_variant(mssql.VARBINARY(32), "mssql")


class UtcDateTime(TypeDecorator[datetime]):
    """A UTC instant stored without a zone (EF's `datetime2`), handed back timezone-aware.
    A naive value is refused on the way in: it is always a bug here."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        # SQL Server's DATETIME rounds to 1/300 s; the audit chain hashes the instant it wrote,
        # so anything but DATETIME2 would make every RowHash fail on read-back.
        if dialect.name == "mssql":
            return dialect.type_descriptor(mssql.DATETIME2(precision=7))
        return dialect.type_descriptor(DateTime(timezone=False))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ValueError("UtcDateTime needs a timezone-aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        instant: datetime = value.replace(tzinfo=UTC)
        return instant
