"""DESIGN §3: a SQL Server URL without a password signs in with an Entra access token, handed to
ODBC Driver 18 before connecting as SQL_COPT_SS_ACCESS_TOKEN.

No network and no SQL Server: the engine is built (building never connects), then asked for a
connection; its own connect path runs the do_connect hooks with the arguments the dialect made,
and a hook this test appends after the engine's records what the driver would receive and stops
there, before pyodbc is called. The credential is an honest TokenCredential, not a mock."""

from __future__ import annotations

import ctypes.util
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.credentials import AccessToken, TokenCredential
from sqlalchemy import Engine, event

from shared.db.engine import build_engine
from tests.support.services import service_missing

# msodbcsql.h: #define SQL_COPT_SS_ACCESS_TOKEN 1256
SQL_COPT_SS_ACCESS_TOKEN = 1256
AZURE_SQL_SCOPE = "https://database.windows.net/.default"
SERVER = "azurebank-test.database.windows.net"
NO_PASSWORD_URL = f"mssql+pyodbc://@{SERVER}/azurebank"
# The keywords the driver refuses beside an access token (Microsoft's ODBC Driver 18 docs).
SIGN_IN_KEYWORDS = {"trusted_connection", "authentication", "uid", "pwd"}


@pytest.fixture
def _pyodbc_importable() -> None:
    # SQLAlchemy's mssql+pyodbc dialect imports pyodbc when the engine is built, and pyodbc
    # needs unixODBC's libodbc.so.2 (scripts/test.sh installs it as root when missing).
    if ctypes.util.find_library("odbc") is None:
        service_missing("unixODBC (libodbc.so.2, for pyodbc)")


class CountingCredential:
    """azure-identity's TokenCredential protocol: a new token on every call, the scopes asked
    for recorded."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def get_token(
        self,
        *scopes: str,
        claims: str | None = None,
        tenant_id: str | None = None,
        enable_cae: bool = False,
        **kwargs: Any,
    ) -> AccessToken:
        self.asked.append(scopes)
        return AccessToken(
            f"eyJ0eXAiOiJKV1QifQ.entra-{len(self.asked)}.sig", int(time.time()) + 3600
        )


class CredentialFactory:
    """Builds CountingCredentials and counts how often the engine asked for one."""

    def __init__(self) -> None:
        self.built: list[CountingCredential] = []

    def __call__(self) -> CountingCredential:
        self.built.append(CountingCredential())
        return self.built[-1]


class _StopBeforeTheDriver(Exception):
    pass


def _record_driver_arguments(engine: Engine) -> list[tuple[list[Any], dict[str, Any]]]:
    """A do_connect hook after the engine's: keeps what pyodbc.connect would get, then stops."""
    seen: list[tuple[list[Any], dict[str, Any]]] = []

    @event.listens_for(engine, "do_connect")
    def _record(_dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
        seen.append((list(cargs), dict(cparams)))
        raise _StopBeforeTheDriver

    return seen


def _connect(engine: Engine) -> None:
    with pytest.raises(_StopBeforeTheDriver):
        engine.connect()


def _one_connection(url: str, factory: CredentialFactory) -> tuple[str, dict[str, Any]]:
    """The connection string and keyword arguments a new engine's first connection would pass."""
    engine = build_engine(url, credential_factory=factory)
    seen = _record_driver_arguments(engine)
    _connect(engine)
    engine.dispose()
    [(cargs, cparams)] = seen
    return cargs[0], cparams


def _keywords(connection_string: str) -> dict[str, str]:
    pairs = [part.split("=", 1) for part in connection_string.split(";") if part]
    return {key.strip().lower(): value for key, value in pairs}


@pytest.fixture
def factory(_pyodbc_importable: None) -> CredentialFactory:
    """Every test that builds a SQL Server engine takes this, so it needs pyodbc's libodbc."""
    return CredentialFactory()


@pytest.fixture
def no_password_engine(factory: CredentialFactory) -> Iterator[Engine]:
    engine = build_engine(NO_PASSWORD_URL, credential_factory=factory)
    yield engine
    engine.dispose()


def test_the_credential_honours_azure_identitys_protocol() -> None:
    assert isinstance(CountingCredential(), TokenCredential)


def test_the_token_is_utf16le_prefixed_with_its_byte_length_as_the_driver_reads_it(
    no_password_engine: Engine, factory: CredentialFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    seen = _record_driver_arguments(no_password_engine)
    _connect(no_password_engine)

    [(_cargs, cparams)] = seen
    packed = cparams["attrs_before"][SQL_COPT_SS_ACCESS_TOKEN]
    token = "eyJ0eXAiOiJKV1QifQ.entra-1.sig"
    tb = token.encode("utf-16-le")
    # Microsoft's documented example for pyodbc and SQL_COPT_SS_ACCESS_TOKEN.
    assert packed == struct.pack(f"<I{len(tb)}s", len(tb), tb)
    # The same, read the way the driver reads it: a 4-byte little-endian length, then the bytes.
    (length,) = struct.unpack_from("<I", packed)
    assert length == len(packed) - 4 == 2 * len(token)
    assert packed[4:].decode("utf-16-le") == token
    assert factory.built[0].asked == [(AZURE_SQL_SCOPE,)]
    assert token not in caplog.text


def test_each_new_connection_asks_for_a_fresh_token(
    no_password_engine: Engine, factory: CredentialFactory
) -> None:
    seen = _record_driver_arguments(no_password_engine)
    for _ in range(3):
        _connect(no_password_engine)

    tokens = [cparams["attrs_before"][SQL_COPT_SS_ACCESS_TOKEN][4:] for _c, cparams in seen]
    assert [t.decode("utf-16-le") for t in tokens] == [
        f"eyJ0eXAiOiJKV1QifQ.entra-{n}.sig" for n in (1, 2, 3)
    ]
    assert factory.built[0].asked == [(AZURE_SQL_SCOPE,)] * 3


def test_the_credential_is_built_once_per_engine_when_the_engine_is(
    factory: CredentialFactory,
) -> None:
    assert factory.built == []
    first = build_engine(NO_PASSWORD_URL, credential_factory=factory)
    assert len(factory.built) == 1
    _record_driver_arguments(first)
    _connect(first)
    _connect(first)
    assert len(factory.built) == 1
    second = build_engine(NO_PASSWORD_URL, credential_factory=factory)
    assert len(factory.built) == 2
    first.dispose()
    second.dispose()


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("", id="plain-url"),
        pytest.param("?Authentication=ActiveDirectoryMsi", id="Authentication"),
        pytest.param("?trusted_connection=yes&Encrypt=yes", id="trusted_connection-lowercase"),
    ],
)
@pytest.mark.parametrize("user", ["", "azurebank-func@"], ids=["no-user", "UID"])
def test_no_sign_in_keyword_is_left_beside_the_token(
    factory: CredentialFactory, user: str, query: str
) -> None:
    connection_string, cparams = _one_connection(
        f"mssql+pyodbc://{user}{SERVER}/azurebank{query}", factory
    )
    keywords = _keywords(connection_string)
    assert SIGN_IN_KEYWORDS.isdisjoint(keywords), connection_string
    assert keywords["server"] == SERVER and keywords["database"] == "azurebank"
    assert keywords["driver"] == "{ODBC Driver 18 for SQL Server}"
    assert SQL_COPT_SS_ACCESS_TOKEN in cparams["attrs_before"]
    if "Encrypt" in query:
        assert keywords["encrypt"] == "yes"


def test_a_url_with_a_password_signs_in_with_it_and_builds_no_credential(
    factory: CredentialFactory,
) -> None:
    connection_string, cparams = _one_connection(
        f"mssql+pyodbc://sa:dev-only@{SERVER}/azurebank", factory
    )
    assert factory.built == []
    assert "attrs_before" not in cparams
    assert {"uid": "sa", "pwd": "dev-only"}.items() <= _keywords(connection_string).items()


def test_a_braced_value_holding_a_keyword_is_kept_whole(factory: CredentialFactory) -> None:
    # SQLAlchemy braces a value holding `;` (and doubles its `}`): the UID inside is the
    # application name's text, not an attribute.
    connection_string, _cparams = _one_connection(
        f"{NO_PASSWORD_URL}?APP=azure%3Bbank%3BUID%3Dx%7D", factory
    )
    assert connection_string == (
        f"DRIVER={{ODBC Driver 18 for SQL Server}};Server={SERVER};Database=azurebank;"
        "APP={azure;bank;UID=x}}};KeepAlive=10;KeepAliveInterval=3"
    )
