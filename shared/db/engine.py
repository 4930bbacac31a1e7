"""Engines for the three dialects (docs/database.md#connections-and-their-bounds), built lazily
and cached per URL, and `for_dialect`, the one way to choose by dialect. Nothing connects at
import time: the Functions host unloads every function when importing `function_app.py` raises."""

from __future__ import annotations

import logging
import re
import struct
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import NoSuchModuleError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from shared.db.faults import is_mssql_transient, translate_driver_error
from shared.settings import DatabaseSettings, SettingsError, fix_for

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

T = TypeVar("T")
DialectName = Literal["postgresql", "mssql", "sqlite"]
log = logging.getLogger("azurebank.db")

CredentialFactory = Callable[[], "TokenCredential"]
# The ODBC driver's pre-connect attribute for an Entra access token.
_SQL_COPT_SS_ACCESS_TOKEN = 1256
_AZURE_SQL_SCOPE = "https://database.windows.net/.default"
# ODBC Driver 18 refuses an access token beside any other way of signing in.
_SIGN_IN_KEYWORDS = frozenset({"trusted_connection", "authentication", "uid", "pwd"})
# One `key=value` attribute of an ODBC connection string: a braced value may hold `;` and `}}`.
_ODBC_ATTRIBUTE = re.compile(r"([^=;]+)=(\{(?:[^}]|\}\})*\}|[^;]*)")
# A refused SQL Server connect costs a request at most three login timeouts and three seconds.
CONNECT_BACKOFF_SECONDS = (1.0, 2.0)
CONNECT_ATTEMPTS = len(CONNECT_BACKOFF_SECONDS) + 1
_RETRYING = "SQL Server refused a connection for now (%s); retrying (attempt %d of %d)"


def for_dialect(
    bind: Engine | Connection | Session | str, choices: Mapping[DialectName, T], *, what: str
) -> T:
    """`choices`' entry for `bind`'s dialect (or name); a ValueError, never a fallback, if none."""
    if isinstance(bind, Session):
        bind = bind.get_bind()
    name = bind if isinstance(bind, str) else bind.dialect.name
    try:
        return choices[name]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"no {what} for dialect {name!r}") from None


@dataclass(frozen=True)
class EngineOptions:
    """How an engine pools its connections and bounds every wait, in seconds: each field is the
    `Database__` setting it names (docs/settings.md#waits-on-the-database), with its default."""

    pool_size: int = field(default=10, metadata={"setting": "PoolSize"})
    max_overflow: int = field(default=20, metadata={"setting": "MaxOverflow"})
    pool_timeout: int = field(default=5, metadata={"setting": "PoolTimeoutSeconds"})
    connect_timeout: int = field(default=5, metadata={"setting": "ConnectTimeoutSeconds"})
    statement_timeout: int = field(default=15, metadata={"setting": "StatementTimeoutSeconds"})
    lock_timeout: int = field(default=5, metadata={"setting": "LockTimeoutSeconds"})
    keepalive: int = field(default=10, metadata={"setting": "KeepaliveSeconds"})

    @classmethod
    def of(cls, database: DatabaseSettings) -> EngineOptions:
        return cls(**{f.name: getattr(database, f.metadata["setting"]) for f in fields(cls)})


# `azurebank db upgrade`: an operator's run, not a request. A migration's DDL may rewrite a large
# table, and fails (to be run again) after a minute waiting on the locks live traffic holds.
MIGRATION_WAITS = EngineOptions(statement_timeout=3600, lock_timeout=60)

_engines: dict[tuple[str, EngineOptions], Engine] = {}
_lock = threading.Lock()


def get_engine(url: str, options: EngineOptions | None = None) -> Engine:
    """The engine for `url` and `options`, built on first use and cached for the process."""
    key = (url, options or EngineOptions())
    with _lock:
        if key not in _engines:
            _engines[key] = build_engine(url, options=key[1])
        return _engines[key]


def dispose_engines() -> None:
    """Close every cached engine (tests, shutdown)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


def build_engine(
    url: str | URL,
    *,
    options: EngineOptions | None = None,
    credential_factory: CredentialFactory | None = None,
) -> Engine:
    """A new engine at READ COMMITTED (never SNAPSHOT: ADR-0050's lock does not hold under it),
    raising the domain's faults; `credential_factory` signs in a SQL Server URL with no password."""
    parsed = make_url(url)
    options = options or EngineOptions()
    build = for_dialect(parsed.get_backend_name(), _BUILDERS, what="engine")
    try:
        engine = build(parsed, options, credential_factory or _default_credential)
    except (ImportError, NoSuchModuleError) as exc:
        # A URL naming a driver this install lacks is a setting to fix, not a crash (exit 78).
        problem = (
            f"Database__Url: the {parsed.drivername} driver cannot be loaded "
            f"({type(exc).__name__}). Fix: {fix_for('Database__Url')}, with a driver this "
            "install has (psycopg for PostgreSQL, pyodbc with ODBC Driver 18 for SQL Server)."
        )
        raise SettingsError([problem]) from None
    event.listen(engine, "handle_error", translate_driver_error)
    # What a unit of work compares its own wait with (shared.db.uow).
    engine.update_execution_options(default_lock_wait=options.lock_timeout)
    return engine


def default_lock_wait(engine: Engine) -> int:
    """The seconds each lock wait on `engine` is bounded by unless a unit of work asks another."""
    return int(engine.get_execution_options().get("default_lock_wait", EngineOptions.lock_timeout))


def _sqlite_engine(url: URL, options: EngineOptions, _credentials: CredentialFactory) -> Engine:
    # One connection per checkout: a pooled connection left mid-transaction in another thread
    # would hold the file's one write lock, whose busy wait is the lock timeout.
    busy_seconds = options.lock_timeout
    engine = create_engine(
        url,
        # Hidden from logs and error text: a parameter can be an address (ADR-0017), a hash, a body.
        hide_parameters=True,
        poolclass=NullPool,
        connect_args={"timeout": busy_seconds, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy issue BEGIN itself (below), so a unit of work can ask for IMMEDIATE.
        dbapi_connection.isolation_level = None
        pragmas = ("foreign_keys=ON", "journal_mode=WAL", f"busy_timeout={busy_seconds * 1000}")
        for pragma in pragmas:
            dbapi_connection.execute(f"PRAGMA {pragma}")

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql(connection.info.pop("sqlite_begin", "BEGIN"))

    return engine


def _server_engine(url: URL, options: EngineOptions, **arguments: Any) -> Engine:
    return create_engine(
        url,
        isolation_level="READ COMMITTED",
        hide_parameters=True,  # see _sqlite_engine
        pool_size=options.pool_size,
        max_overflow=options.max_overflow,
        pool_timeout=options.pool_timeout,
        # A connection the server or the network dropped while pooled is replaced, not failed.
        pool_pre_ping=True,
        **arguments,
    )


def _postgresql_engine(url: URL, options: EngineOptions, _credentials: CredentialFactory) -> Engine:
    from shared.db import postgres_bounds

    arguments = postgres_bounds.connect_arguments(url, options)
    engine = _server_engine(url, options, connect_args=arguments)
    event.listen(engine, "do_connect", postgres_bounds.bounded_connect(options))
    return engine


def _mssql_engine(url: URL, options: EngineOptions, credentials: CredentialFactory) -> Engine:
    query = dict(url.query)
    query.setdefault("driver", "ODBC Driver 18 for SQL Server")
    # ODBC Driver 18's keepalive: idle seconds before the first probe, seconds between probes.
    query.setdefault("KeepAlive", str(options.keepalive))
    query.setdefault("KeepAliveInterval", str(max(1, options.keepalive // 3)))
    url = url.set(query=query)
    # As SQLAlchemy's documentation for mssql+pyodbc advises: otherwise a connection SQLAlchemy
    # closes goes back to the driver manager's pool. Read when pyodbc allocates its environment.
    import pyodbc

    pyodbc.pooling = False
    engine = _server_engine(url, options, connect_args={"timeout": options.connect_timeout})
    if not url.password:
        _use_entra_token(engine, credentials())
    # Retried inside the dialect's own connect, after every do_connect hook (the Entra token's).
    connect = engine.dialect.connect
    engine.dialect.connect = lambda *cargs, **cparams: connect_with_retry(  # type: ignore[method-assign]
        lambda: connect(*cargs, **cparams)
    )

    @event.listens_for(engine, "connect")
    def _bound_session(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.timeout = options.statement_timeout  # pyodbc's query timeout
        with closing(dbapi_connection.cursor()) as cursor:
            cursor.execute(lock_timeout_statement(options.lock_timeout))

    return engine


_BUILDERS: dict[DialectName, Callable[[URL, EngineOptions, CredentialFactory], Engine]] = {
    "sqlite": _sqlite_engine,
    "postgresql": _postgresql_engine,
    "mssql": _mssql_engine,
}


def lock_timeout_statement(seconds: int) -> str:
    """T-SQL: the session's lock wait, in milliseconds (SET takes no parameter)."""
    return f"SET LOCK_TIMEOUT {int(seconds) * 1000}"


def connect_with_retry(
    connect: Callable[[], T], *, sleep: Callable[[float], None] = time.sleep
) -> T:
    """`connect()`, tried again after a transient refusal (shared.db.faults), CONNECT_ATTEMPTS
    times in all; any other error, and the last transient one, is raised as it came."""
    for attempt, pause in enumerate(CONNECT_BACKOFF_SECONDS, start=1):
        try:
            return connect()
        except Exception as exc:
            if not is_mssql_transient(exc):
                raise
            # By type only: the driver's text names the server.
            log.warning(_RETRYING, type(exc).__name__, attempt, CONNECT_ATTEMPTS)
            sleep(pause)
    return connect()


def _default_credential() -> TokenCredential:
    # Imported here: azure-identity is needed only by a SQL Server URL without a password.
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def _use_entra_token(engine: Engine, credential: TokenCredential) -> None:
    """Sign in each connection with a fresh Entra access token from `credential`."""

    @event.listens_for(engine, "do_connect")
    def _provide_token(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        token = credential.get_token(_AZURE_SQL_SCOPE).token.encode("utf-16-le")
        packed = struct.pack(f"<I{len(token)}s", len(token), token)
        cparams.setdefault("attrs_before", {})[_SQL_COPT_SS_ACCESS_TOKEN] = packed
        # The token replaces the Trusted_Connection=Yes SQLAlchemy adds to a URL without a user,
        # and whatever UID or Authentication the URL carries.
        if cargs:
            cargs[0] = ";".join(
                f"{key}={value}"
                for key, value in _ODBC_ATTRIBUTE.findall(cargs[0])
                if key.strip().lower() not in _SIGN_IN_KEYWORDS
            )
