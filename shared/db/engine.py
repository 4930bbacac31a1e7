"""Engines for the three dialects (docs/database.md), built lazily and cached per URL.

Nothing here runs at import time: the Functions host unloads every function when importing
`function_app.py` raises, so connecting belongs to the first request, not to the import.
"""

from __future__ import annotations

import re
import struct
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import NoSuchModuleError
from sqlalchemy.pool import NullPool

from shared.db.dialects import DialectName, for_dialect
from shared.db.faults import translate_driver_errors
from shared.settings import DatabaseSettings, SettingsError, fix_for

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

# Builds the Entra credential of a SQL Server engine whose URL has no password.
CredentialFactory = Callable[[], "TokenCredential"]

# SQL_COPT_SS_ACCESS_TOKEN: the ODBC driver's pre-connect attribute for an Entra access token.
_SQL_COPT_SS_ACCESS_TOKEN = 1256
_AZURE_SQL_SCOPE = "https://database.windows.net/.default"
# ODBC Driver 18 refuses an access token beside any other way of signing in.
_SIGN_IN_KEYWORDS = frozenset({"trusted_connection", "authentication", "uid", "pwd"})
# One `key=value` attribute of an ODBC connection string: a braced value may hold `;` and `}}`.
_ODBC_ATTRIBUTE = re.compile(r"([^=;]+)=(\{(?:[^}]|\}\})*\}|[^;]*)")


@dataclass(frozen=True)
class EngineOptions:
    """How an engine pools its connections and bounds every wait, from the `Database__` settings
    (shared/settings.py, docs/settings.md; the defaults are theirs), in seconds.

    At most `pool_size + max_overflow` connections per process, so the connections of a
    scaled-out app are that sum times its instances; a checkout waits at most `pool_timeout`.
    `connect_timeout` bounds opening a connection, `statement_timeout` each statement,
    `lock_timeout` each lock wait (SQLite: the busy wait for its one write lock), and
    `keepalive` how long an idle connection stays silent before it is probed."""

    pool_size: int = 10
    max_overflow: int = 20
    pool_timeout: int = 5
    connect_timeout: int = 5
    statement_timeout: int = 15
    lock_timeout: int = 5
    keepalive: int = 10

    @classmethod
    def of(cls, database: DatabaseSettings) -> EngineOptions:
        return cls(
            pool_size=database.PoolSize,
            max_overflow=database.MaxOverflow,
            pool_timeout=database.PoolTimeoutSeconds,
            connect_timeout=database.ConnectTimeoutSeconds,
            statement_timeout=database.StatementTimeoutSeconds,
            lock_timeout=database.LockTimeoutSeconds,
            keepalive=database.KeepaliveSeconds,
        )


# `azurebank db upgrade`: an operator's run, not a request. A migration's DDL may rewrite a large
# table (its statements bounded at an hour, not at a request's seconds) and waits at most a
# minute for the locks live traffic holds, then fails and can be run again.
MIGRATION_WAITS = EngineOptions(statement_timeout=3600, lock_timeout=60)

_engines: dict[tuple[str, EngineOptions], Engine] = {}
_default_lock_waits: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def get_engine(url: str, options: EngineOptions | None = None) -> Engine:
    """The engine for `url` and `options`, built on first use and cached for the life of the
    process."""
    key = (url, options or EngineOptions())
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = build_engine(url, options=key[1])
            _engines[key] = engine
        return engine


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
    """A new engine for one of the three dialects, at READ COMMITTED (never SNAPSHOT: ADR-0050's
    lock does not hold under it).

    Every engine hides bound parameters from its log and from its errors' text: a parameter can
    be an address, a password or PIN hash or a stored response body, and a driver error's text
    reaches tracebacks and log lines (ADR-0017: no address in any log line).

    `options` sizes the pool of a server's engine (SQLite opens one connection per checkout) and
    bounds every wait on the database: connecting, each statement, each lock, the checkout.
    `credential_factory` builds the Entra credential of a SQL Server URL without a password, once
    per engine; by default azure-identity's `DefaultAzureCredential`."""
    parsed = make_url(url)
    try:
        return _engine_for(
            parsed, options or EngineOptions(), credential_factory or _default_credential
        )
    except (ImportError, NoSuchModuleError) as exc:
        # A URL naming a driver this install lacks is a setting to fix, not a crash (exit 78).
        raise SettingsError(
            [
                f"Database__Url: the {parsed.drivername} driver cannot be loaded "
                f"({type(exc).__name__}). Fix: {fix_for('Database__Url')}, with a driver this "
                "install has (psycopg for PostgreSQL, pyodbc with ODBC Driver 18 for SQL Server)."
            ]
        ) from None


def _engine_for(
    parsed: URL, options: EngineOptions, credential_factory: CredentialFactory
) -> Engine:
    build = for_dialect(parsed.get_backend_name(), _BUILDERS, what="engine")
    engine = build(parsed, options, credential_factory)
    translate_driver_errors(engine)
    # What a unit of work compares its own wait with (shared.db.uow).
    _default_lock_waits[engine] = options.lock_timeout
    return engine


def default_lock_wait(engine: Engine) -> int:
    """The seconds every lock wait of `engine`'s connections is bounded by, unless a unit of
    work asks for another."""
    return _default_lock_waits.get(engine, EngineOptions.lock_timeout)


def _sqlite_engine(url: URL, options: EngineOptions) -> Engine:
    # One connection per checkout: SQLite serialises writers through the file lock, and a
    # pooled connection left mid-transaction in another thread would hold it. The file is
    # local: its only wait is the busy wait on that lock, bounded by the lock timeout.
    busy_seconds = options.lock_timeout
    engine = create_engine(
        url,
        hide_parameters=True,  # see build_engine
        poolclass=NullPool,
        connect_args={"timeout": busy_seconds, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy issue BEGIN itself (below), so a unit of work can ask for IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_seconds * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.info.pop("sqlite_begin", "BEGIN")
        connection.exec_driver_sql(mode)

    return engine


def _pool_arguments(options: EngineOptions) -> dict[str, Any]:
    return {
        "pool_size": options.pool_size,
        "max_overflow": options.max_overflow,
        "pool_timeout": options.pool_timeout,
        # Each checkout asks the connection first, so one the server or the network dropped
        # while it sat in the pool is replaced instead of failing the request.
        "pool_pre_ping": True,
    }


def _postgresql_engine(url: URL, options: EngineOptions) -> Engine:
    from shared.db import postgres_bounds

    url_options = url.query.get("options")
    engine = create_engine(
        url,
        isolation_level="READ COMMITTED",
        hide_parameters=True,  # see build_engine
        connect_args=postgres_bounds.connect_arguments(
            connect_timeout=options.connect_timeout,
            statement_timeout=options.statement_timeout,
            lock_timeout=options.lock_timeout,
            keepalive=options.keepalive,
            url_options=url_options if isinstance(url_options, str) else None,
        ),
        **_pool_arguments(options),
    )
    answer_within = options.statement_timeout + postgres_bounds.CLIENT_GRACE_SECONDS
    event.listen(engine, "do_connect", postgres_bounds.bounded_connect(answer_within))
    return engine


def _mssql_engine(
    url: URL, options: EngineOptions, credential_factory: CredentialFactory
) -> Engine:
    from shared.db import mssql_bounds

    query = dict(url.query)
    query.setdefault("driver", "ODBC Driver 18 for SQL Server")
    for keyword, value in mssql_bounds.odbc_keywords(keepalive=options.keepalive).items():
        query.setdefault(keyword, value)
    url = url.set(query=query)
    mssql_bounds.turn_off_pyodbc_pooling()
    engine = create_engine(
        url,
        isolation_level="READ COMMITTED",
        hide_parameters=True,  # see build_engine
        connect_args={"timeout": options.connect_timeout},  # pyodbc's login timeout
        **_pool_arguments(options),
    )
    if not url.password:
        _use_entra_token(engine, credential_factory)
    # Retried inside the dialect's own connect, after every do_connect hook has set the
    # arguments (the Entra token among them).
    connect = engine.dialect.connect
    engine.dialect.connect = lambda *cargs, **cparams: mssql_bounds.connect_with_retry(  # type: ignore[method-assign]
        lambda: connect(*cargs, **cparams)
    )

    @event.listens_for(engine, "connect")
    def _bound_session(dbapi_connection: Any, _record: Any) -> None:
        mssql_bounds.bound_session(
            dbapi_connection,
            statement_timeout=options.statement_timeout,
            lock_timeout=options.lock_timeout,
        )

    return engine


_BUILDERS: dict[DialectName, Callable[[URL, EngineOptions, CredentialFactory], Engine]] = {
    "sqlite": lambda url, options, _credential: _sqlite_engine(url, options),
    "postgresql": lambda url, options, _credential: _postgresql_engine(url, options),
    "mssql": _mssql_engine,
}


def _default_credential() -> TokenCredential:
    # Imported here: azure-identity is needed only by a SQL Server URL without a password.
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def _use_entra_token(engine: Engine, credential_factory: CredentialFactory) -> None:
    """With no password in the URL, sign in with an Entra access token from the credential
    (managed identity on Azure, the developer's login locally), fresh for each connection."""
    credential = credential_factory()

    @event.listens_for(engine, "do_connect")
    def _provide_token(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        token = credential.get_token(_AZURE_SQL_SCOPE).token.encode("utf-16-le")
        packed = struct.pack(f"<I{len(token)}s", len(token), token)
        cparams.setdefault("attrs_before", {})[_SQL_COPT_SS_ACCESS_TOKEN] = packed
        # The token replaces the Trusted_Connection=Yes SQLAlchemy adds to a URL without a user,
        # and whatever UID or Authentication the URL carries.
        if cargs:
            cargs[0] = _without_sign_in_keywords(cargs[0])


def _without_sign_in_keywords(connection_string: str) -> str:
    """The ODBC connection string without the keywords that name another way of signing in."""
    return ";".join(
        f"{key}={value}"
        for key, value in _ODBC_ATTRIBUTE.findall(connection_string)
        if key.strip().lower() not in _SIGN_IN_KEYWORDS
    )
