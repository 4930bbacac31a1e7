"""docs/database.md: `exact_equals` is plain `=` where that is exact already, and on SQL Server
a seek under the column's collation, a binary comparison and a length check (its `=` ignores case
under the default collation and trailing spaces under every collation)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import mssql, postgresql, sqlite

from shared.db.exact import exact_equals
from shared.db.schema import AspNetUser

_STATEMENT = select(AspNetUser.Id).where(exact_equals(AspNetUser.Id, "8d1c0b9e-user"))


def _where(dialect: object) -> str:
    sql = str(_STATEMENT.compile(dialect=dialect))  # type: ignore[arg-type]
    return " ".join(sql.split("WHERE", 1)[1].split())


def test_sql_server_compares_binary_and_by_length_after_the_seek() -> None:
    assert _where(mssql.dialect()) == (
        "([AspNetUsers].[Id] = :param_1 AND "
        "([AspNetUsers].[Id] COLLATE Latin1_General_100_BIN2) = :param_1 AND "
        "datalength([AspNetUsers].[Id]) = datalength(:param_1))"
    )


def test_postgresql_and_sqlite_compare_with_their_own_exact_equals() -> None:
    assert _where(postgresql.dialect()) == '"AspNetUsers"."Id" = %(param_1)s::VARCHAR'
    assert _where(sqlite.dialect()) == '"AspNetUsers"."Id" = ?'
