"""The SQL Server forms of the per-dialect SQL modules parse as T-SQL, the one list of
batches sqlglot cannot parse stays honest, and a broken table hint is caught
(tests/support/tsql_parse.py checks every other statement while the SQLite and PostgreSQL suites
run)."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from tests.support import tsql_parse
from tests.support.checkout import REPO
from tests.support.tsql_parse import PER_DIALECT_SQL, UNPARSABLE_BATCHES, parse_problem, tsql_text

_UNPARSABLE_TEXTS = {tsql_text(batch.statement()) for batch in UNPARSABLE_BATCHES}


@pytest.mark.parametrize("twins", PER_DIALECT_SQL, ids=lambda t: t.module)
def test_the_sql_server_twin_of_each_per_dialect_module_parses_as_t_sql(
    twins: tsql_parse.DialectTwins,
) -> None:
    for statement in twins.mssql():
        if tsql_text(statement) in _UNPARSABLE_TEXTS:
            continue  # listed, with its reason, in UNPARSABLE_BATCHES
        tsql_parse.check_statement(statement)


def test_every_per_dialect_sql_module_has_its_twins_listed() -> None:
    """docs/database.md keeps dialect-specific SQL in `*_sql.py` modules: each is in
    PER_DIALECT_SQL, so its PostgreSQL and SQLite forms are skipped only because its SQL Server form
    is checked."""
    modules = {
        ".".join(path.relative_to(REPO).with_suffix("").parts)
        for path in (REPO / "shared").rglob("*_sql.py")
    }
    assert modules == {twins.module for twins in PER_DIALECT_SQL}


@pytest.mark.parametrize("dialect", [postgresql.dialect(), sqlite.dialect()], ids=["pg", "sqlite"])
def test_the_other_dialects_forms_are_recognised_by_their_compiled_text(dialect: object) -> None:
    texts = tsql_parse._twin_texts(dialect)  # type: ignore[arg-type]
    modules = set(texts.values())
    assert "shared.notices.claim_sql" in modules and "shared.audit.tail_sql" in modules


@pytest.mark.parametrize("batch", UNPARSABLE_BATCHES, ids=lambda b: b.name)
def test_each_listed_batch_is_still_unparsable_and_pinned_by_its_compile_test(
    batch: tsql_parse.Unparsable,
) -> None:
    # Should sqlglot learn THROW, the batch leaves the list and is parsed like everything else.
    assert parse_problem(tsql_text(batch.statement())) is not None
    assert (REPO / batch.pinned_by).is_file()
    assert batch.reason


def test_a_claim_hint_missing_its_parenthesis_does_not_parse() -> None:
    """The control: the checker fails the broken hint the compile test's string match would
    also catch, and any other statement broken the same way."""
    (claim,) = PER_DIALECT_SQL[0].mssql()
    sql = tsql_text(claim)
    assert parse_problem(sql) is None
    broken = sql.replace("WITH (UPDLOCK, READPAST, ROWLOCK)", "WITH (UPDLOCK, READPAST, ROWLOCK")
    assert broken != sql
    assert parse_problem(broken) is not None


def test_syntax_sqlglot_only_wraps_as_a_command_counts_as_unparsed() -> None:
    assert parse_problem("CREATE INDEX [IX_A] OM [T] ([C])") is not None
    assert parse_problem("CREATE INDEX [IX_A] ON [T] ([C])") is None
