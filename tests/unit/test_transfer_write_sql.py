"""The transfer's one round trip of writes after the tail lock (shared/money/transfer_write_sql.py),
pinned per dialect by compiling it and parsing the result with sqlglot (no server, no pyodbc):
which rows each statement writes, in which order, under which guard, and what it answers. The
behaviour on a real server: tests/integration/money/test_transfer_critical_section.py
(PostgreSQL), and the SQL Server suite when AZUREBANK_TEST_SQLSERVER is set."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import sqlglot
from sqlalchemy.dialects import mssql, postgresql
from sqlalchemy.types import NullType
from sqlglot import exp

from shared.audit.chain import SealedAuditRow
from shared.db.schema import (
    AuthorizationStatus,
    IdempotencyState,
    TransactionStatus,
    TransactionType,
)
from shared.money.idempotency import SuccessRecord
from shared.money.transfer_write_sql import (
    BalanceWrite,
    TransferWrites,
    mssql_transfer_write,
    parameters,
    postgresql_transfer_write,
)

# Every row the transfer writes after the tail lock, in the order the batch writes them: the two
# balances first (in the order the caller sorted them), the tail last but the key's record.
WRITES = [
    ("Update", "Accounts"),
    ("Update", "Accounts"),
    ("Insert", "Transactions"),
    ("Update", "TransferAuthorizations"),
    ("Insert", "AuditEvents"),
    ("Update", "AuditChainTail"),
    ("Update", "IdempotencyRecords"),
]
GUARDS = {
    "first_balance": "Id = :first_account_id AND Version = :first_version AND IsDeleted = {no}",
    "second_balance": (
        "Id = :second_account_id AND Version = :second_version AND IsDeleted = {no}"
    ),
    "spend": "Id = :authorization_id AND Status = {n}'Pending' AND ExpiresAt > :now",
    "tail": "Id = 1",
    # The row this transaction's claim inserted: nobody else can see it, so no guard.
    "stored": "Id = :record_id",
}


def _mssql() -> list[exp.Expression]:
    sql = str(mssql_transfer_write().compile(dialect=mssql.dialect()))
    return [e for e in sqlglot.parse(sql, read="tsql") if e is not None]


def _postgresql_text() -> str:
    """The PostgreSQL statement as compiled, its constants (which SQLAlchemy binds: the
    statuses, the tail's Id, the token's increment) written as the literals they are."""
    compiled = postgresql_transfer_write().compile(dialect=postgresql.dialect())
    sql = str(compiled)
    for name, bind in compiled.binds.items():
        if not bind.required:
            value = bind.value
            literal = "NULL" if value is None else repr(value)
            sql = sql.replace(f"%({name})s", literal)
    return sql


def _postgresql() -> exp.Expression:
    return sqlglot.parse_one(_postgresql_text(), read="postgres")


def _unquoted(node: exp.Expression, dialect: str) -> str:
    """The clause without quoting, without table qualifiers, bound values as `:name`, and
    without the casts SQLAlchemy adds to PostgreSQL's typed parameters (`%(now)s::TIMESTAMP
    WITHOUT TIME ZONE`)."""

    def bare(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Cast):
            return n.this
        if isinstance(n, exp.Column) and n.table:
            return exp.column(n.name)
        return n

    sql = node.transform(bare).sql(dialect).replace("[", "").replace("]", "").replace('"', "")
    return re.sub(r"%\((\w+)\)s", r":\1", sql)


def _writes(statements: list[exp.Expression]) -> list[tuple[str, str]]:
    return [
        (type(s).__name__, s.find(exp.Table).name)  # type: ignore[union-attr]
        for s in statements
        if isinstance(s, exp.Update | exp.Insert)
    ]


def test_sql_server_writes_every_row_in_one_batch_in_lock_order_and_answers_the_counts() -> None:
    statements = _mssql()
    assert _unquoted(statements[0], "tsql") == "SET NOCOUNT ON"
    assert _writes(statements) == WRITES
    final = statements[-1]
    assert isinstance(final, exp.Select)
    assert final.named_selects == ["balances", "spent"]
    # Each conditional write's count is read right after it, before anything else runs.
    after = {
        statements[i].find(exp.Table).name  # type: ignore[union-attr]
        + ":"
        + _unquoted(statements[i + 1], "tsql")
        for i in range(len(statements) - 1)
        if isinstance(statements[i], exp.Update) and isinstance(statements[i + 1], exp.Set)
    }
    assert after == {
        "Accounts:SET @balances = @@ROWCOUNT",
        "Accounts:SET @balances = @balances + @@ROWCOUNT",
        "TransferAuthorizations:SET @spent = @@ROWCOUNT",
    }


def test_neither_form_commits_begins_or_throws_only_the_boundary_commits() -> None:
    """The caller judges the counts and its unit of work rolls back what a losing
    write left; a batch that committed (or began a transaction of its own) would break that."""
    for sql in (mssql_transfer_write().text, _postgresql_text()):
        words = sql.upper().split()
        for word in ("COMMIT", "ROLLBACK", "TRANSACTION", "TRAN", "THROW", "BEGIN", "XACT_ABORT"):
            assert word not in words, word


def test_sql_server_guards_each_conditional_write_by_the_token_the_state_or_the_expiry() -> None:
    wheres = [
        _unquoted(s.args["where"].this, "tsql") for s in _mssql() if isinstance(s, exp.Update)
    ]
    names = ["first_balance", "second_balance", "spend", "tail", "stored"]
    assert wheres == [GUARDS[name].format(no="0", n="N") for name in names]


def test_postgresql_writes_every_row_in_one_statement_and_answers_the_counts() -> None:
    tree = _postgresql()
    assert isinstance(tree, exp.Select)
    ctes = [(cte.alias, cte.this) for cte in tree.find_all(exp.CTE)]
    assert [(type(w).__name__, w.find(exp.Table).name) for _, w in ctes] == WRITES  # type: ignore[union-attr]
    # What the caller judges comes back through RETURNING: the conditional writes only.
    assert {alias for alias, w in ctes if w.args.get("returning")} == {
        "first_balance",
        "second_balance",
        "spend",
    }
    assert tree.named_selects == ["balances", "spent"]
    wheres = {
        alias: _unquoted(w.args["where"].this, "postgres")
        for alias, w in ctes
        if w.args.get("where")
    }
    assert wheres == {name: guard.format(no="FALSE", n="") for name, guard in GUARDS.items()}
    # The balances' locks are taken in the order the caller sorted them: first, then second.
    counts = _unquoted(tree.expressions[0], "postgres")
    assert counts.index("first_balance") < counts.index("second_balance")


@pytest.mark.parametrize("form", ["mssql", "postgresql"])
def test_the_literals_are_the_schemas_statuses(form: str) -> None:
    """The statuses are written as literals; they are the enums' values and nothing else."""
    if form == "mssql":
        trees: list[exp.Expression] = _mssql()
    else:
        trees = [_postgresql()]
    # SQL Server's are N'…' (nvarchar, as the columns are), PostgreSQL's plain strings.
    literals = {
        node.this
        for tree in trees
        for node in tree.walk()
        if isinstance(node, exp.National) or (isinstance(node, exp.Literal) and node.is_string)
    }
    assert literals == {
        TransactionType.TRANSFER_OUT.value,
        TransactionType.TRANSFER_IN.value,
        TransactionStatus.COMPLETED.value,
        AuthorizationStatus.PENDING.value,
        AuthorizationStatus.SPENT.value,
        IdempotencyState.COMPLETED.value,
    }


def _sample() -> TransferWrites:
    now = datetime(2026, 9, 7, 12, tzinfo=UTC)
    return TransferWrites(
        audit=SealedAuditRow(
            uuid.uuid4(), 8, 1, "user", "TransferCompleted", now, "{}", bytes(32), bytes(32)
        ),
        balances=(
            BalanceWrite(uuid.uuid4(), 3, Decimal(90)),
            BalanceWrite(uuid.uuid4(), 1, Decimal(10)),
        ),
        transaction_id=uuid.uuid4(),
        transfer_in_id=uuid.uuid4(),
        sender_id=uuid.uuid4(),
        receiver_id=uuid.uuid4(),
        recipient_azure_tag="bob",
        amount=Decimal(10),
        authorization_id=uuid.uuid4(),
        now=now,
        success=SuccessRecord(uuid.uuid4(), 201, "{}", now),
    )


def test_every_bound_value_is_given_and_typed_by_its_column() -> None:
    """Money, instants, ids and hashes bind through the schema's own column types (the exact
    Money type, UTC instants), as every other write binds them."""
    given = set(parameters(_sample()))
    compiled = postgresql_transfer_write().compile(dialect=postgresql.dialect())
    forms = {
        # what text() will bind, by name; the statement's own binds, but its constants
        "mssql": mssql_transfer_write()._bindparams,
        "postgresql": {name: b for name, b in compiled.binds.items() if b.required},
    }
    for binds in forms.values():
        assert set(binds) == given
        assert not [name for name, bind in binds.items() if isinstance(bind.type, NullType)]
