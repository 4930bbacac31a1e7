"""Engines for the three dialects (DESIGN §3), built lazily and cached per URL.

Nothing here runs at import time: the Functions host unloads every function when importing
`function_app.py` raises, so connecting belongs to the first request, not to the import.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import NoSuchModuleError
from sqlalchemy.pool import NullPool

from shared.settings import SettingsError, fix_for

# SQL_COPT_SS_ACCESS_TOKEN: the ODBC driver's pre-connect attribute for an Entra access token.
_SQL_COPT_SS_ACCESS_TOKEN = 1256
_AZURE_SQL_SCOPE = "https://database.windows.net/.default"
# Seconds SQLite waits on a locked database before `database is locked` (the busy timeout).
SQLITE_BUSY_TIMEOUT_SECONDS = 30

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def get_engine(url: str) -> Engine:
    """The engine for `url`, built on first use and cached for the life of the process."""
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = build_engine(url)
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    """Close every cached engine (tests, shutdown)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


def build_engine(url: str | URL) -> Engine:
    """A new engine for one of the three dialects, at READ COMMITTED (never SNAPSHOT: ADR-0050's
    lock does not hold under it).

    Every engine hides bound parameters from its log and from its errors' text: a parameter can
    be an address, a password or PIN hash or a stored response body, and a driver error's text
    reaches tracebacks and log lines (ADR-0017: no address in any log line)."""
    parsed = make_url(url)
    try:
        return _engine_for(parsed)
    except (ImportError, NoSuchModuleError) as exc:
        # A URL naming a driver this install lacks is a setting to fix, not a crash (exit 78).
        raise SettingsError(
            [
                f"Database__Url: the {parsed.drivername} driver cannot be loaded "
                f"({type(exc).__name__}). Fix: {fix_for('Database__Url')}, with a driver this "
                "install has (psycopg for PostgreSQL, pyodbc with ODBC Driver 18 for SQL Server)."
            ]
        ) from None


def _engine_for(parsed: URL) -> Engine:
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    if backend == "postgresql":
        return create_engine(
            parsed,
            isolation_level="READ COMMITTED",
            hide_parameters=True,  # see build_engine
            pool_pre_ping=True,
            pool_size=10,
            max_overflow=20,
        )
    if backend == "mssql":
        return _mssql_engine(parsed)
    raise ValueError(f"unsupported database backend {backend!r}")


def _sqlite_engine(url: URL) -> Engine:
    # One connection per checkout: SQLite serialises writers through the file lock, and a
    # pooled connection left mid-transaction in another thread would hold it.
    engine = create_engine(
        url,
        hide_parameters=True,  # see build_engine
        poolclass=NullPool,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy issue BEGIN itself (below), so a unit of work can ask for IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_SECONDS * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.info.pop("sqlite_begin", "BEGIN")
        connection.exec_driver_sql(mode)

    return engine


def _mssql_engine(url: URL) -> Engine:
    query = dict(url.query)
    query.setdefault("driver", "ODBC Driver 18 for SQL Server")
    url = url.set(query=query)
    engine = create_engine(
        url,
        isolation_level="READ COMMITTED",
        hide_parameters=True,  # see build_engine
        pool_pre_ping=True,
    )
    if not url.password:
        _use_entra_token(engine)
    return engine


def _use_entra_token(engine: Engine) -> None:
    """With no password in the URL, sign in with an Entra access token from azure-identity
    (managed identity on Azure, the developer's login locally), fresh for each connection."""
    from azure.identity import DefaultAzureCredential

    credential = DefaultAzureCredential()

    @event.listens_for(engine, "do_connect")
    def _provide_token(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        token = credential.get_token(_AZURE_SQL_SCOPE).token.encode("utf-16-le")
        packed = struct.pack(f"<I{len(token)}s", len(token), token)
        cparams.setdefault("attrs_before", {})[_SQL_COPT_SS_ACCESS_TOKEN] = packed
        # The token replaces any Authentication= keyword the connection string might carry.
        if cargs:
            cargs[0] = cargs[0].replace("Trusted_Connection=Yes;", "")
