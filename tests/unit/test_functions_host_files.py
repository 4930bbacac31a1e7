"""The Functions host's files: host.json and local.settings.sample.json as shipped."""

from __future__ import annotations

import base64
import json
from typing import Any

from api_funcs.functions import OPERATIONS
from shared.settings import check_host, load_settings
from tests.support.checkout import REPO
from tests.support.hosts import setting_keys


def _json(name: str) -> Any:
    return json.loads((REPO / name).read_text(encoding="utf-8"))


def test_host_json_is_version_2_with_the_v4_extension_bundle_and_the_api_route_prefix() -> None:
    host = _json("host.json")
    assert host["version"] == "2.0"
    assert host["extensionBundle"] == {
        "id": "Microsoft.Azure.Functions.ExtensionBundle",
        "version": "[4.*, 5.0.0)",
    }
    # The FastAPI routes carry /api because the ASGI path is the full URL path.
    assert host["extensions"]["http"]["routePrefix"] == "api"
    levels = host["logging"]["logLevel"]
    assert levels["default"] == "Information"
    assert levels["Host.Results"] == "Error"
    assert levels["Azure.Core"] == "Warning"
    sampling = host["logging"]["applicationInsights"]["samplingSettings"]
    assert "Request" in sampling["excludedTypes"]


def test_the_sample_settings_pass_load_settings_and_the_function_hosts_own_checks() -> None:
    sample = _json("local.settings.sample.json")
    assert sample["IsEncrypted"] is False
    values: dict[str, str] = sample["Values"]
    assert all(isinstance(v, str) for v in values.values())
    assert values["FUNCTIONS_WORKER_RUNTIME"] == "python"
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    assert values["Notices__Runner"] == "None"
    settings = load_settings(values)
    assert check_host(settings, "function") == []
    assert check_host(settings, "api") == []
    # Valid for validation, and plainly not a secret.
    assert len(base64.b64decode(values["Audit__ChainKey"])) >= 32
    assert b"local-only" in base64.b64decode(values["Audit__ChainKey"])
    assert "NOT-A-SECRET" in values["Auth__SigningKey"]


def test_the_sample_settings_name_every_key_the_settings_model_reads() -> None:
    values = set(_json("local.settings.sample.json")["Values"])
    # The storage connection string is the bare section name.
    expected = {
        "NoticesStorage" if key == "NoticesStorage__ConnectionString" else key
        for key in setting_keys()
    }
    assert expected - values == set()
    assert {k for k in values if "__" in k} - expected == set(), "a sample key the model ignores"


def test_every_http_operation_sits_under_the_route_prefix_of_host_json() -> None:
    prefix = _json("host.json")["extensions"]["http"]["routePrefix"]
    assert all(not op.route.startswith(("/", prefix + "/")) for op in OPERATIONS)
