"""Every statement the code executes, parsed as T-SQL (docs/database.md: SQL Server is production).

While the SQLite and PostgreSQL suites run, an Engine-class listener sees each statement the
application sends (`before_cursor_execute`), compiles the same statement for SQL Server 2022
(binds rendered as literals, post-compile parameters expanded) and parses the text with sqlglot's
T-SQL dialect. A statement sqlglot cannot parse, or only as an opaque `Command`, fails the test
that ran it. Parses are cached by the executing dialect's compiled text, so each distinct
statement is compiled and parsed once per run.

What is checked, and what is not, by design:

- Checked: every SELECT/INSERT/UPDATE/DELETE/text() the application's code executes (the nearest
  project frame on the stack is in shared/, api_funcs/, relay_func/ or function_app.py), ORM flushes
  included.
- Not checked at run time, checked here instead: the statements of the per-dialect SQL modules
  (docs/database.md: claim_sql, tail_sql, applock_sql, transfer_write_sql, key_claim_sql). Their
  PostgreSQL and SQLite forms are not what SQL Server runs, so recompiling them proves nothing;
  `PER_DIALECT_SQL` names each module's SQL Server twin, which `tests/unit/test_tsql_parse.py`
  builds and parses.
- Listed as unparsable, in `UNPARSABLE_BATCHES` only: procedural batches sqlglot has no grammar
  for (T-SQL's `THROW`); what each does is pinned by the test its `pinned_by` names.
- Not seen: statements of other processes (the e2e ring's `azurebank` processes); the same code
  paths run in-process in the integration ring.
- Not checked: a test's own SQL (its instruments: `pg_terminate_backend`, `EXPLAIN`, fault
  injection), SQLAlchemy's and Alembic's reflection, the migrations run online (their SQL Server
  DDL is parsed offline by tests/unit/test_sqlserver_ddl_offline.py), and driver-level text sent
  with `exec_driver_sql` (SQLite's PRAGMA and BEGIN IMMEDIATE in shared/db/engine.py and
  shared/db/uow.py, and PostgreSQL's CREATE ROLE and GRANTs in shared/db/grant_sql.py, which have
  no SQL Server form; grant_sql's SQL Server forms are parsed through their twin).
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import sqlglot
from sqlalchemy import Engine, Insert, Update, event
from sqlalchemy.dialects import mssql
from sqlalchemy.dialects.mssql.base import MSSQLCompiler
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import DDLCompiler
from sqlalchemy.sql.elements import BindParameter, ClauseElement
from sqlglot import ErrorLevel, exp
from sqlglot.errors import SqlglotError

from shared.audit import tail_sql
from shared.audit.chain import SealedAuditRow
from shared.db import grant_sql
from shared.money import applock_sql, key_claim_sql, transfer_write_sql
from shared.money.idempotency import SuccessRecord
from shared.notices import claim_sql
from tests.support.checkout import REPO

_APP_PARTS = ("shared", "api_funcs", "relay_func", "function_app.py")
_THIS_FILE = str(Path(__file__).resolve())


class _LiteralCompiler(MSSQLCompiler):
    def render_literal_value(self, value: Any, type_: Any) -> str:
        # SQLAlchemy has no literal form for bytes; production binds them (VARBINARY), and here
        # only the text's shape matters: T-SQL's binary literal.
        if isinstance(value, bytes):
            return "0x" + value.hex()
        return str(super().render_literal_value(value, type_))


def sqlserver_dialect() -> Dialect:
    """The mssql dialect as it is after connecting to SQL Server 2022 (production's version):
    OFFSET/FETCH, multi-row VALUES, NVARCHAR(max)."""
    dialect = mssql.dialect()
    dialect.statement_compiler = _LiteralCompiler
    dialect.server_version_info = (16, 0, 1000, 6)
    dialect._setup_version_attributes()  # type: ignore[attr-defined]
    dialect._supports_nvarchar_max = True  # type: ignore[attr-defined]
    return dialect


MSSQL = sqlserver_dialect()


def tsql_text(statement: ClauseElement) -> str:
    """`statement` as SQL Server would receive it, values inline (sqlglot parses
    SQLAlchemy's mssql output once post-compile parameters are rendered)."""
    return str(
        statement.compile(
            dialect=MSSQL, compile_kwargs={"render_postcompile": True, "literal_binds": True}
        )
    )


def parse_problem(sql: str) -> str | None:
    """Why sqlglot's T-SQL dialect refuses `sql`, or None when every statement in it parses."""
    try:
        _parse(sql)
    except SqlglotError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _parse(sql: str) -> list[exp.Expression]:
    trees = [t for t in sqlglot.parse(sql, read="tsql", error_level=ErrorLevel.RAISE) if t]
    for tree in trees:
        # sqlglot falls back to an opaque Command for syntax it does not know: not a parse.
        opaque = tree if isinstance(tree, exp.Command) else tree.find(exp.Command)
        if opaque is not None:
            raise SqlglotError(f"parsed only as an opaque Command: {opaque.sql('tsql')[:200]}")
        # sqlglot accepts `x IS 0`; SQL Server's IS takes only NULL (a syntax error there).
        for test in tree.find_all(exp.Is):
            if not isinstance(test.expression, exp.Null):
                raise SqlglotError(f"IS with something but NULL: {test.sql('tsql')[:200]}")
    return trees


# --- the one list of procedural batches sqlglot cannot parse ----------------------------------

_NOW = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Unparsable:
    name: str
    reason: str
    pinned_by: str
    statement: Callable[[], ClauseElement]


UNPARSABLE_BATCHES: tuple[Unparsable, ...] = (
    Unparsable(
        name="daily-limit lock batch (shared/money/applock_sql.py mssql_applock_batch)",
        reason="a procedural batch: DECLARE, EXEC @result = sp_getapplock, IF … BEGIN … END and "
        "THROW; sqlglot has no grammar for THROW",
        pinned_by="tests/unit/test_applock_sql.py",
        statement=lambda: applock_sql.mssql_applock_batch().bindparams(
            resource=applock_sql.lock_resource("00000000-user"), timeout_ms=30000
        ),
    ),
    Unparsable(
        name="the app identity's user (shared/db/grant_sql.py mssql_create_user)",
        reason="CREATE USER … FROM EXTERNAL PROVIDER WITH OBJECT_ID: sqlglot has no grammar for "
        "CREATE USER and parses it only as an opaque Command",
        pinned_by="tests/unit/test_grant_sql.py",
        statement=lambda: grant_sql.mssql_create_user(
            "id-azurebank-app", uuid.UUID("00000000-0000-0000-0000-0000000000a1")
        ),
    ),
)


# --- the per-dialect SQL modules: their non-SQL-Server forms, and the SQL Server twin ---------


@dataclass(frozen=True)
class DialectTwins:
    """One protocol's per-dialect statements (docs/database.md). `others` builds the statements the
    module sends PostgreSQL or SQLite (recognised at run time by their compiled text, and then not
    recompiled); `mssql` builds what it sends SQL Server, parsed by tests/unit/test_tsql_parse.py
    or listed in UNPARSABLE_BATCHES."""

    module: str
    others: Mapping[str, Callable[[], Iterable[ClauseElement]]]
    mssql: Callable[[], Iterable[ClauseElement]]


def _claim(dialect: str) -> Callable[[], Iterable[ClauseElement]]:
    def build() -> list[ClauseElement]:
        lease = _NOW + timedelta(minutes=2)
        claim = claim_sql.claim_statement(dialect, runner="r", now=_NOW, lease_until=lease, limit=3)
        return [claim]

    return build


def _transfer_writes(dialect: str) -> Callable[[], Iterable[ClauseElement]]:
    """The transfer's one round trip of writes, bound to the values of one transfer."""
    build = {
        "postgresql": transfer_write_sql.postgresql_transfer_write,
        "mssql": transfer_write_sql.mssql_transfer_write,
    }[dialect]

    def statements() -> list[ClauseElement]:
        writes = transfer_write_sql.TransferWrites(
            audit=SealedAuditRow(
                uuid.UUID(int=1), 8, 1, "u", "TransferCompleted", _NOW, "{}", bytes(32), bytes(32)
            ),
            balances=(
                transfer_write_sql.BalanceWrite(uuid.UUID(int=2), 3, Decimal(90)),
                transfer_write_sql.BalanceWrite(uuid.UUID(int=3), 1, Decimal(10)),
            ),
            transaction_id=uuid.UUID(int=4),
            transfer_in_id=uuid.UUID(int=5),
            sender_id=uuid.UUID(int=2),
            receiver_id=uuid.UUID(int=3),
            recipient_azure_tag="bob",
            amount=Decimal(10),
            authorization_id=uuid.UUID(int=6),
            now=_NOW,
            success=SuccessRecord(uuid.UUID(int=9), 201, "{}", _NOW),
        )
        clause = build()
        # At run time the PostgreSQL text is recognised unbound; the twin renders its values.
        if dialect == "mssql":
            clause = clause.bindparams(**transfer_write_sql.parameters(writes))
        return [clause]

    return statements


def _key_claim(dialect: str) -> Callable[[], Iterable[ClauseElement]]:
    """The key's claim, bound to one claim's values (the twin renders them)."""

    def statements() -> list[ClauseElement]:
        clause = key_claim_sql.claim_statement(dialect)
        if dialect == "mssql":
            clause = clause.bindparams(
                record_id=uuid.UUID(int=9),
                user_id="u",
                operation="deposit",
                key="k",
                request_hash="0" * 64,
                now=_NOW,
            )
        return [clause]

    return statements


PER_DIALECT_SQL: tuple[DialectTwins, ...] = (
    DialectTwins(
        module="shared.notices.claim_sql",
        others={"postgresql": _claim("postgresql"), "sqlite": _claim("sqlite")},
        mssql=_claim("mssql"),
    ),
    DialectTwins(
        module="shared.audit.tail_sql",
        others={
            "postgresql": lambda: [tail_sql.postgresql_tail_lock()],
            "sqlite": lambda: [tail_sql.sqlite_writer_lock()],
        },
        mssql=lambda: [tail_sql.mssql_tail_lock()],
    ),
    DialectTwins(
        module="shared.money.applock_sql",
        others={"postgresql": lambda: [applock_sql.postgresql_advisory_lock()]},
        mssql=lambda: [UNPARSABLE_BATCHES[0].statement()],
    ),
    DialectTwins(
        module="shared.db.grant_sql",
        # Its PostgreSQL role and grants go to the driver as text (exec_driver_sql), which the
        # run-time check does not see; its two reads are plain SELECTs, checked as executed.
        others={},
        mssql=lambda: [
            grant_sql.mssql_user_exists().bindparams(name="id-azurebank-app"),
            UNPARSABLE_BATCHES[1].statement(),
            *grant_sql.mssql_grants("id-azurebank-app"),
        ],
    ),
    DialectTwins(
        module="shared.money.transfer_write_sql",
        others={"postgresql": _transfer_writes("postgresql")},
        mssql=_transfer_writes("mssql"),
    ),
    DialectTwins(
        module="shared.money.key_claim_sql",
        others={"postgresql": _key_claim("postgresql"), "sqlite": _key_claim("sqlite")},
        mssql=_key_claim("mssql"),
    ),
)


# --- the run's record --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Seen:
    problem: str | None = None
    twin_of: str | None = None


@dataclass
class _Record:
    lock: threading.Lock = field(default_factory=threading.Lock)
    # (executing dialect, its compiled text) -> what checking it found, for app statements.
    seen: dict[tuple[str, str], _Seen] = field(default_factory=dict)
    # T-SQL template (values as parameters) -> (the text parsed, values inline; where it came
    # from: "executed", "twin" or "ddl").
    tsql_parsed: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Distinct application statements executed on PostgreSQL (its compiled text).
    postgresql_executed: set[str] = field(default_factory=set)
    twins_seen: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    calls: int = 0  # statements seen, and the time spent on them: the check's overhead
    seconds: float = 0.0
    twin_texts: dict[str, dict[str, str]] = field(default_factory=dict)  # dialect -> text -> module


RECORD = _Record()
_origin_of_code: dict[CodeType, str] = {}


def _origin(code: CodeType) -> str:
    """'app', 'migration', 'test' or 'other', by the file a frame runs."""
    origin = _origin_of_code.get(code)
    if origin is None:
        path = code.co_filename
        origin = "other"
        if path.startswith(str(REPO)) and path != _THIS_FILE and "/.venv/" not in path:
            relative = Path(path).relative_to(REPO).parts
            if relative[:2] == ("shared", "migrations"):
                origin = "migration"
            elif relative and relative[0] in _APP_PARTS:
                origin = "app"
            elif relative and relative[0] == "tests":
                origin = "test"
        _origin_of_code[code] = origin
    return origin


def _caller_origin(frame: FrameType | None) -> str:
    """The origin of the nearest project frame: who executed the statement."""
    while frame is not None:
        origin = _origin(frame.f_code)
        if origin != "other":
            return origin
        frame = frame.f_back
    return "other"


def _twin_texts(dialect: Dialect) -> dict[str, str]:
    """The compiled texts of the per-dialect modules' statements for `dialect`, built once."""
    texts = RECORD.twin_texts.get(dialect.name)
    if texts is None:
        texts = {}
        for twins in PER_DIALECT_SQL:
            build = twins.others.get(dialect.name)
            for statement in build() if build else ():
                texts[statement.compile(dialect=dialect).string] = twins.module
        RECORD.twin_texts[dialect.name] = texts
    return texts


def _with_values(statement: ClauseElement, params: Mapping[str, Any]) -> ClauseElement:
    """`statement` with the executed parameter values bound into it, so it renders as literals.

    Values passed at execute time (ORM flushes, `session.get`, `text()` with a dict) are not in
    the statement: named binds get theirs by key, and an INSERT's or UPDATE's columns named only
    by the parameters (the ORM's unit of work) through `.values()`."""
    if not params:
        return statement

    def with_value(element: Any, **_kw: Any) -> Any:
        if isinstance(element, BindParameter) and element.key in params:
            return element._with_value(params[element.key], maintain_key=True)
        return None

    bound = visitors.replacement_traverse(statement, {}, with_value)
    if isinstance(bound, Insert | Update) and not bound._values and not bound._multi_values:
        binds = {b.key for b in visitors.iterate(bound) if isinstance(b, BindParameter)}
        columns = {
            key: value for key, value in params.items() if key in bound.table.c and key not in binds
        }
        if columns:
            bound = bound.values(columns)
    return bound


def check_statement(
    statement: ClauseElement, *, params: Mapping[str, Any] | None = None, source: str = "twin"
) -> str:
    """Compile `statement` for SQL Server, parse it, record it; the T-SQL template it counted as.
    Raises AssertionError with the T-SQL text when it does not parse."""
    bound = _with_values(statement, params or {})
    template = str(bound.compile(dialect=MSSQL))
    sql = tsql_text(bound)
    problem = parse_problem(sql)
    if problem is not None:
        raise AssertionError(f"T-SQL does not parse ({problem}):\n{sql}")
    with RECORD.lock:
        RECORD.tsql_parsed.setdefault(template, (sql, source))
    return template


def check_ddl(script: str) -> int:
    """Parse an offline migration script (GO-separated batches); how many statements it held."""
    count = 0
    for batch in script.split("\nGO\n"):
        try:
            trees = _parse(batch)
        except SqlglotError as exc:
            raise AssertionError(f"T-SQL DDL does not parse ({exc}):\n{batch}") from None
        with RECORD.lock:
            for tree in trees:
                text = tree.sql("tsql")
                RECORD.tsql_parsed.setdefault(text, (text, "ddl"))
        count += len(trees)
    return count


def _on_execute(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    started = time.perf_counter()
    try:
        _check_executed(conn, context)
    finally:
        spent = time.perf_counter() - started
        with RECORD.lock:
            RECORD.calls += 1
            RECORD.seconds += spent


def _check_executed(conn: Any, context: Any) -> None:
    compiled = getattr(context, "compiled", None)
    if compiled is None or isinstance(compiled, DDLCompiler):
        return  # driver-level text (exec_driver_sql) or DDL: see the module's docstring
    dialect = conn.dialect
    key = (dialect.name, compiled.string)
    known = RECORD.seen.get(key)
    if known is not None:
        if known.problem is not None:  # every test that runs it fails, not only the first
            with RECORD.lock:
                RECORD.problems.append(known.problem)
        return
    if _caller_origin(sys._getframe(1)) != "app":
        return
    if dialect.name == "postgresql":
        with RECORD.lock:
            RECORD.postgresql_executed.add(compiled.string)
    module = _twin_texts(dialect).get(compiled.string)
    if module is not None:
        with RECORD.lock:
            RECORD.twins_seen.add(module)
            RECORD.seen[key] = _Seen(twin_of=module)
        return
    params = context.compiled_parameters[0] if context.compiled_parameters else {}
    try:
        check_statement(compiled.statement, params=params, source="executed")
    except Exception as exc:  # a compile error is as much a failure as a parse error
        problem = f"{exc}\n(executed on {dialect.name}: {compiled.string})"
        with RECORD.lock:
            RECORD.problems.append(problem)
            RECORD.seen[key] = _Seen(problem=problem)
        return
    with RECORD.lock:
        RECORD.seen[key] = _Seen()


def install() -> None:
    if not event.contains(Engine, "before_cursor_execute", _on_execute):
        event.listen(Engine, "before_cursor_execute", _on_execute)


def take_problems() -> list[str]:
    with RECORD.lock:
        problems, RECORD.problems[:] = list(RECORD.problems), []
    return problems


def dump(path: str) -> None:
    """Write every T-SQL text parsed, for a reader (AZUREBANK_TSQL_DUMP)."""
    with RECORD.lock:
        texts = [sql for sql, _source in RECORD.tsql_parsed.values()]
    Path(path).write_text("\n\n-- next\n".join(texts) + "\n", encoding="utf-8")


def summary_line() -> str:
    with RECORD.lock:
        sources = [source for _sql, source in RECORD.tsql_parsed.values()]
        executed_on_postgresql = len(RECORD.postgresql_executed)
        calls, seconds = RECORD.calls, RECORD.seconds
        twins_on_postgresql = sum(
            1 for (d, _), seen in RECORD.seen.items() if d == "postgresql" and seen.twin_of
        )
    parts = ", ".join(f"{sources.count(s)} {s}" for s in ("executed", "twin", "ddl"))
    return (
        f"t-sql: {len(sources)} distinct statements parsed ({parts}; "
        f"{len(UNPARSABLE_BATCHES)} listed unparsable); "
        f"postgresql: {executed_on_postgresql} distinct statements executed "
        f"({twins_on_postgresql} of them per-dialect, checked through their SQL Server twins); "
        f"{calls} executions seen in {seconds:.1f}s"
    )
