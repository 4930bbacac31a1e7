"""A cold instance imports only what indexing its Functions needs. FastAPI, the routes
and the ORM come with the first request, PyJWT with the first token, a database driver with the
first query; the blob and identity SDKs, Alembic, the JWKS machinery and a telemetry SDK only
where the settings or the command ask for them. Not timed (bench/cold_start.py measures); this
pins what is imported, so a module-level import that drags one back in fails here."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from tests.support.checkout import run_python
from tests.support.connections import unused_port
from tests.support.hosts import CHAIN_KEY, SIGNING_KEY

# Never needed with default settings, on any path this file drives.
NEVER = (
    "alembic",
    "azure.storage.blob",
    "azure.identity",
    "azure.core.pipeline",
    "shared.identity.jwks",
    "pyodbc",
    "uvicorn",
    "shared.notices.sweep",
    "shared.notices.render",
    # The backlog gauges' queries: read only by a telemetry exporter's collection.
    "shared.notices.status",
    "opentelemetry.sdk",
    "azure.monitor.opentelemetry",
    # The settings are one pydantic model read from the environment by shared.settings itself.
    "pydantic_settings",
)
# Needed by the first request, not by indexing (the host's settings check at start included).
FIRST_REQUEST = (
    "fastapi",
    "sqlalchemy",
    "sqlalchemy.orm",
    "shared.db.schema",
    "api_funcs.app",
    "shared.money",
)
# Needed by the first bearer token or the first query, not by health.
FIRST_TOKEN_OR_QUERY = ("jwt", "cryptography", "psycopg")

_CODE = textwrap.dedent(
    """
    import asyncio, json, sys
    import function_app
    seen = {"import": sorted(sys.modules)}
    import azure.functions as func
    functions = {f.get_function_name(): f for f in function_app.app.get_functions()}

    def call(name, headers):
        request = func.HttpRequest(method="GET", url="http://localhost/api/" + name,
                                   headers=headers, body=b"", route_params={})
        response = asyncio.run(functions[name].get_user_function()(request, None))
        return response.status_code

    seen["health_status"] = call("health", {})
    seen["health"] = sorted(sys.modules)
    seen["accounts_status"] = call("accounts", {"Authorization": "Bearer not-a-token"})
    seen["accounts"] = sorted(sys.modules)
    from shared.db.schema import Base
    seen["mapped"] = sorted(mapper.class_.__name__ for mapper in Base.registry.mappers)
    print(json.dumps(seen))
    """
)


@pytest.fixture(scope="module")
def imported() -> dict[str, Any]:
    """sys.modules after the import, after the first health, after a refused token; default
    settings plus what the Functions host requires, and a local signing key."""
    settings = {
        "Database__Url": f"postgresql+psycopg://nobody@127.0.0.1:{unused_port()}/nothing",
        "Audit__ChainKey": CHAIN_KEY,
        "Auth__SigningKey": SIGNING_KEY,
    }
    out = run_python("-c", _CODE, settings=settings, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in modules]


def test_importing_function_app_imports_neither_the_app_nor_a_driver_nor_an_optional_sdk(
    imported: dict[str, Any],
) -> None:
    assert _loaded(imported["import"], NEVER + FIRST_REQUEST + FIRST_TOKEN_OR_QUERY) == []


def test_the_first_health_answer_imports_no_token_library_no_driver_and_no_optional_sdk(
    imported: dict[str, Any],
) -> None:
    assert imported["health_status"] == 200
    assert _loaded(imported["health"], FIRST_REQUEST) == list(FIRST_REQUEST)
    assert _loaded(imported["health"], NEVER + FIRST_TOKEN_OR_QUERY) == []


def test_a_token_under_a_local_key_loads_no_jwks_machinery_and_no_optional_sdk(
    imported: dict[str, Any],
) -> None:
    assert imported["accounts_status"] == 401
    assert "jwt" in imported["accounts"]
    assert _loaded(imported["accounts"], NEVER) == []


def test_the_first_requests_map_only_the_tables_their_routes_read(
    imported: dict[str, Any],
) -> None:
    # The accounts route reads its caller's user and accounts; the other six tables' classes are
    # mapped when a route that reads them first runs.
    assert imported["mapped"] == ["Account", "AspNetUser"]
