"""The SQL Server forms of the per-dialect SQL modules parse as T-SQL (but for the batches
UNPARSABLE_BATCHES lists with their reason), every such module is listed, and a broken table hint
is caught (tests/support/tsql_parse.py checks every other statement while the SQLite and
PostgreSQL suites run)."""

from __future__ import annotations

import pytest

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


def test_a_claim_hint_missing_its_parenthesis_does_not_parse() -> None:
    """The control: the checker fails the broken hint the compile test's string match would
    also catch, and any other statement broken the same way."""
    (claim,) = PER_DIALECT_SQL[0].mssql()
    sql = tsql_text(claim)
    assert parse_problem(sql) is None
    broken = sql.replace("WITH (UPDLOCK, READPAST, ROWLOCK)", "WITH (UPDLOCK, READPAST, ROWLOCK")
    assert broken != sql
    assert parse_problem(broken) is not None


def test_is_with_anything_but_null_does_not_parse() -> None:
    """SQL Server's IS takes only NULL: `IsDeleted IS 0`, SQLAlchemy's rendering of
    `.is_(False)` on a dialect without booleans, is a syntax error there; sqlglot accepts it."""
    assert parse_problem("SELECT 1 FROM t WHERE a IS NULL AND b IS NOT NULL") is None
    assert parse_problem("SELECT 1 FROM t WHERE a IS 0") is not None
