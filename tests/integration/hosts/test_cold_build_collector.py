"""A cold Functions instance builds what lives for the process without the cyclic collector
walking it: its settings check and Functions at indexing, the FastAPI app on the first request,
the host's services on the first request that reads one (api_funcs/long_lived.py). Not timed
(bench/cold_start.py measures); this pins that no full collection runs during those builds, that
the collector is on again after each, and that what they built is frozen, so a later collection
walks only what requests allocate."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from tests.support.checkout import run_python
from tests.support.connections import unused_port
from tests.support.hosts import CHAIN_KEY

_CODE = textwrap.dedent(
    """
    import asyncio, gc, json
    import azure.functions as func
    # What the worker holds before it imports the app: frozen apart, so the counts below are
    # the app's own.
    gc.collect()
    gc.freeze()
    collections = []
    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    seen = {}

    def record(step):
        seen[step] = {"collections": len(collections), "full": collections.count(2),
                      "enabled": gc.isenabled(),
                      "frozen": gc.get_freeze_count()}
        collections.clear()

    record("worker")
    import function_app
    record("indexing")
    functions = {f.get_function_name(): f for f in function_app.app.get_functions()}

    def call(name, headers):
        request = func.HttpRequest(method="GET", url="http://localhost/api/" + name,
                                   headers=headers, body=b"", route_params={})
        return asyncio.run(functions[name].get_user_function()(request, None)).status_code

    seen["health_status"] = call("health", {})
    record("first_health")
    # A refused token still composes the host's services (the verifier is one of them).
    seen["accounts_status"] = call("accounts", {"Authorization": "Bearer not-a-token"})
    record("first_accounts")
    garbage = [[] for _ in range(5000)]
    for pair in zip(garbage, garbage[1:]):
        pair[0].append(pair[1])
        pair[1].append(pair[0])
    del garbage, pair
    record("requests_after")
    print(json.dumps(seen))
    """
)


@pytest.fixture(scope="module")
def builds() -> dict[str, Any]:
    """The collector's runs and state after indexing and after the first health request, in a
    fresh interpreter with what the Functions host requires."""
    settings = {
        "Database__Url": f"postgresql+psycopg://nobody@127.0.0.1:{unused_port()}/nothing",
        "Audit__ChainKey": CHAIN_KEY,
    }
    out = run_python("-c", _CODE, settings=settings, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_indexing_builds_the_settings_and_functions_without_a_collection_and_freezes_them(
    builds: dict[str, Any],
) -> None:
    indexing = builds["indexing"]
    assert indexing["collections"] == 0
    assert indexing["enabled"] is True
    assert indexing["frozen"] > builds["worker"]["frozen"]


def test_the_first_request_builds_the_app_without_a_collection_and_freezes_it(
    builds: dict[str, Any],
) -> None:
    assert builds["health_status"] == 200
    first = builds["first_health"]
    # The build alone ran ~160 collections, one of them full, before it was paused; what is left
    # are the request's own young collections after the build.
    assert first["full"] == 0
    assert first["collections"] < 10
    assert first["enabled"] is True
    assert first["frozen"] > builds["indexing"]["frozen"]


def test_the_first_request_that_reads_the_services_composes_them_paused_and_freezes_them(
    builds: dict[str, Any],
) -> None:
    assert builds["accounts_status"] == 401
    first = builds["first_accounts"]
    assert first["full"] == 0
    assert first["enabled"] is True
    assert first["frozen"] > builds["first_health"]["frozen"]


def test_the_collector_runs_again_for_what_requests_allocate(builds: dict[str, Any]) -> None:
    # The control: the same process collects as usual once the build is done.
    assert builds["requests_after"]["collections"] > 0
    assert builds["requests_after"]["enabled"] is True
