"""The key's claim (shared/money/key_claim_sql.py), pinned per dialect by compiling it and parsing
the result with sqlglot (no server, no pyodbc): it inserts the key's row only where the key has
none, answers the Id it inserted, and sets nothing beyond its own transaction. The behaviour on a
real server: tests/integration/money/test_idempotency.py (PostgreSQL, SQLite) and
tests/sqlserver/test_sqlserver_key_claim.py when AZUREBANK_TEST_SQLSERVER is set."""

from __future__ import annotations

import sqlglot
from sqlalchemy import UniqueConstraint
from sqlalchemy.dialects import mssql, postgresql, sqlite
from sqlglot import exp

from shared.db.schema import IdempotencyRecord, IdempotencyState
from shared.money.key_claim_sql import (
    bounds,
    claim_statement,
    mssql_claim,
    postgresql_claim,
    sqlite_claim,
)

COLUMNS = ["Id", "UserId", "Operation", "Key", "RequestHash", "State", "CreatedAt"]
KEY = ["UserId", "Operation", "Key"]


def _unique_key() -> list[str]:
    (unique,) = [
        c for c in IdempotencyRecord.__table__.constraints if isinstance(c, UniqueConstraint)
    ]
    return [column.name for column in unique.columns]


def _parsed(clause: object, dialect: object, read: str) -> exp.Insert:
    sql = str(clause.compile(dialect=dialect))  # type: ignore[attr-defined]
    tree = sqlglot.parse_one(sql, read=read)
    assert isinstance(tree, exp.Insert), sql
    return tree


def _inserted_columns(tree: exp.Insert) -> list[str]:
    return [identifier.name for identifier in tree.this.expressions]


def _literals(tree: exp.Expression) -> set[str]:
    return {
        node.this
        for node in tree.walk()
        if isinstance(node, exp.National) or (isinstance(node, exp.Literal) and node.is_string)
    }


def test_the_key_is_the_unique_index_the_claims_meet() -> None:
    assert _unique_key() == KEY


def test_sql_server_inserts_only_where_a_range_locked_read_finds_no_row_and_outputs_the_id() -> (
    None
):
    """UPDLOCK + HOLDLOCK: the read of an absent key holds its range to the end of the
    transaction (two claims serialise on it, neither inserts past the other), and a present but
    uncommitted row is waited on, not read past."""
    tree = _parsed(mssql_claim(), mssql.dialect(), "tsql")
    assert _inserted_columns(tree) == COLUMNS
    assert [c.sql("tsql") for c in tree.args["returning"].expressions] == ["inserted.[Id]"]
    select = tree.expression
    assert isinstance(select, exp.Select) and select.args.get("from_") is None
    guard = select.args["where"].this
    assert isinstance(guard, exp.Not) and isinstance(guard.this, exp.Exists)
    read = guard.this.this
    table = read.find(exp.Table)
    assert table is not None and table.name == "IdempotencyRecords"
    hints = [var.name for hint in table.args["hints"] for var in hint.expressions]
    assert hints == ["UPDLOCK", "HOLDLOCK"]
    matched = {eq.this.name: eq.expression.name for eq in read.args["where"].find_all(exp.EQ)}
    assert matched == {"UserId": "user_id", "Operation": "operation", "Key": "key"}
    assert _literals(tree) == {IdempotencyState.IN_PROGRESS.value}


def test_postgresql_does_nothing_on_the_keys_conflict_and_checks_its_client_meanwhile() -> None:
    tree = _parsed(postgresql_claim(), postgresql.dialect(), "postgres")
    assert _inserted_columns(tree) == COLUMNS
    conflict = tree.args["conflict"]
    assert [c.name for c in conflict.args["conflict_keys"]] == KEY
    assert conflict.args.get("action").sql() == "DO NOTHING"
    assert [c.name for c in tree.args["returning"].expressions] == ["Id"]
    settings = {
        call.expressions[0].name: call.expressions[2].sql()
        for call in tree.find_all(exp.Anonymous)
        if call.name.lower() == "set_config"
    }
    # set_config(…, true): local to the transaction, gone at its commit or rollback.
    assert settings == {"client_connection_check_interval": "TRUE"}
    assert _literals(tree) - set(settings) == {IdempotencyState.IN_PROGRESS.value}


def test_sqlite_does_nothing_on_the_keys_conflict() -> None:
    tree = _parsed(sqlite_claim(), sqlite.dialect(), "sqlite")
    assert _inserted_columns(tree) == COLUMNS
    assert [c.name for c in tree.args["conflict"].args["conflict_keys"]] == KEY
    assert [c.name for c in tree.args["returning"].expressions] == ["Id"]


def test_no_form_commits_or_begins_only_the_money_transaction_does() -> None:
    for dialect in ("postgresql", "mssql", "sqlite"):
        words = claim_statement(dialect).text.upper().split()
        for word in ("COMMIT", "ROLLBACK", "TRANSACTION", "BEGIN", "SET"):
            assert word not in words, (dialect, word)


def test_postgresql_checks_its_client_every_half_second_and_the_others_need_no_bound() -> None:
    assert bounds("postgresql") == {"client_check": "500ms"}
    assert bounds("mssql") == bounds("sqlite") == {}
