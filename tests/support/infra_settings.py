"""The Function App's app settings as infra/app.bicep declares them, read with pycep (the parser
checkov itself uses), and what is wrong with them beside the project's settings model:

- a setting the app or the platform requires is missing (the app's: what the Functions host's
  own check asks, shared.settings.check_host; the platform's: the table of docs/settings.md);
- a key neither the settings model nor that table knows (a typo is a setting nobody reads);
- a secret that is not a Key Vault reference, a storage key or SAS in any value, a password in
  Database__Url or a server certificate it does not verify;
- a setting, or a site property, that Flex Consumption retires;
- values the settings model refuses (each reference resolved to its parameter's default, or to
  a placeholder of its type), or a host check that fails with them.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pycep import BicepParser
from sqlalchemy.engine import make_url

from shared.settings import SettingsError, check_host, load_settings
from tests.support.checkout import REPO
from tests.support.hosts import setting_keys

APP_BICEP = REPO / "infra" / "app.bicep"
SETTINGS_DOC = REPO / "docs" / "settings.md"
# The heading of docs/settings.md's table of the platform's settings the deployment sets.
PLATFORM_HEADING = "## On Azure: the platform's settings"

# Held by Key Vault, referenced from the setting: never a value in the template.
SECRET_KEYS = (
    "Audit__ChainKey",
    "Auth__SigningKey",
    "NoticesStorage",
    "NoticesStorage__ConnectionString",
)
# What the app itself needs on Azure beyond the host's own check: its pool sized by the
# deployment (docs/deploy.md), nobody delivering until an operator says so, and the pickup
# named so that the flip to Function needs only the contact (docs/operations.md).
APP_REQUIRED = (
    "Database__Url",
    "Database__PoolSize",
    "Database__MaxOverflow",
    "Audit__ChainKey",
    "Auth__SigningKey",
    "Notices__Runner",
    "Notices__PickupContainer",
    "NoticesStorage__blobServiceUri",
)
# Flex Consumption retires these: the runtime, the package and the build are functionAppConfig's
# and azd's, and there is no content share.
RETIRED_SETTINGS = frozenset(
    {
        "FUNCTIONS_WORKER_RUNTIME",
        "FUNCTIONS_WORKER_RUNTIME_VERSION",
        "FUNCTIONS_EXTENSION_VERSION",
        "FUNCTIONS_MAX_HTTP_CONCURRENCY",
        "FUNCTIONS_WORKER_PROCESS_COUNT",
        "WEBSITE_RUN_FROM_PACKAGE",
        "SCM_DO_BUILD_DURING_DEPLOYMENT",
        "ENABLE_ORYX_BUILD",
        "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
        "WEBSITE_CONTENTSHARE",
        "WEBSITE_CONTENTOVERVNET",
        "WEBSITE_SKIP_CONTENTSHARE_VALIDATION",
        "WEBSITE_NODE_DEFAULT_VERSION",
        "WEBSITE_VNET_ROUTE_ALL",
        "PYTHON_ISOLATE_WORKER_DEPENDENCIES",
    }
)
RETIRED_SITE_CONFIG = frozenset({"alwaysOn", "linuxFxVersion", "appSettings"})
_KEY_VAULT_REFERENCE = re.compile(
    r"@Microsoft\.KeyVault\((SecretUri=https?://\S+/secrets/[A-Za-z0-9-]+/?"
    r"|SecretUri=\$\{\w+\}secrets/[A-Za-z0-9-]+/?|VaultName=[^;]+;SecretName=[A-Za-z0-9-]+)\)"
)
_SECRET_SHAPES = re.compile(r"AccountKey=|SharedAccessSignature=|[?&]sig=|listKeys\(", re.I)
_INTERPOLATION = re.compile(r"\$\{(\w+)\}")
# What the settings model is given for a Key Vault reference when it checks the rest.
_RESOLVED_SECRETS = {
    "Audit__ChainKey": base64.b64encode(bytes(32)).decode(),
    "Auth__SigningKey": "k" * 32,
}


@dataclass(frozen=True)
class AppSettings:
    """The appsettings resource's keys and raw values, and the site's siteConfig."""

    values: dict[str, Any]
    site_config: dict[str, Any]
    parameters: dict[str, Any]


@functools.cache
def bicep_parser() -> BicepParser:
    """One parser per process: building its grammar costs a second even from lark's cache."""
    return BicepParser(cache=True)


def parse_bicep(text: str) -> dict[str, Any]:
    tree: dict[str, Any] = bicep_parser().parse(text=text)
    return tree


def read_app_settings(text: str) -> AppSettings:
    """The one `Microsoft.Web/sites/config` named appsettings, and the site's siteConfig."""
    tree = parse_bicep(text)
    resources = tree.get("resources", {})
    found = [
        r["config"]
        for r in resources.values()
        if r["type"] == "Microsoft.Web/sites/config" and r["config"].get("name") == "appsettings"
    ]
    assert len(found) == 1, "infra/app.bicep declares one appsettings resource"
    sites = [r["config"] for r in resources.values() if r["type"] == "Microsoft.Web/sites"]
    site_config = sites[0].get("properties", {}).get("siteConfig", {}) if sites else {}
    return AppSettings(found[0]["properties"], site_config, tree.get("parameters", {}))


def platform_keys(doc: str) -> set[str]:
    """The keys of docs/settings.md's table of the platform's settings (first column)."""
    section = doc.split(PLATFORM_HEADING, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Za-z0-9_]+)` \|", section, flags=re.M))


def model_keys() -> set[str]:
    """Every key the settings model reads, spelled `Section__Key` (and `NoticesStorage` alone)."""
    return {"NoticesStorage", *setting_keys()}


def _placeholder(name: str, parameter: Mapping[str, Any]) -> Any:
    default = parameter.get("default")
    if default is not None:
        return default
    kind = parameter.get("type")
    if kind == "int":
        return 1
    if kind == "bool":
        return True
    return f"x-{name.lower()}"


def _resolve(value: Any, parameters: Mapping[str, Any]) -> str:
    """A setting's value as it would be set, each reference to a parameter replaced by its default
    or a placeholder of its type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict) and "function" in value:
        arguments = list(value["function"].get("parameters", {}).values())
        return _resolve(arguments[0], parameters) if arguments else ""
    if isinstance(value, dict) and "operator" in value:
        operands = value["operator"].get("operands", {})
        return _resolve(operands.get("true_value"), parameters)
    text = str(value)
    if text in parameters:
        return str(_resolve(_placeholder(text, parameters[text]), parameters))
    return _INTERPOLATION.sub(lambda m: str(_placeholder(m[1], parameters.get(m[1], {}))), text)


def resolved_settings(text: str) -> dict[str, str]:
    """The app settings of `text` as they would be set, references resolved (see _resolve)."""
    app = read_app_settings(text)
    return {key: _resolve(value, app.parameters) for key, value in app.values.items()}


def app_settings_problems(text: str, doc: str) -> list[str]:
    """Everything wrong with the app settings of `text` (infra/app.bicep's), beside `doc`
    (docs/settings.md); empty when they agree."""
    app = read_app_settings(text)
    known = model_keys() | platform_keys(doc)
    problems: list[str] = []
    raw = app.values
    resolved = {key: _resolve(value, app.parameters) for key, value in raw.items()}

    for key in sorted(raw):
        shown = str(raw[key])
        if key in RETIRED_SETTINGS:
            problems.append(f"{key}: Flex Consumption retires this setting")
        elif key == "AzureWebJobsStorage":
            problems.append(
                f"{key}: a connection string; the host's storage is reached by identity only "
                "(AzureWebJobsStorage__credential, __clientId, __blobServiceUri)"
            )
        elif key not in known:
            problems.append(f"{key}: a key the app does not know (docs/settings.md)")
        if _SECRET_SHAPES.search(shown) or _SECRET_SHAPES.search(resolved[key]):
            problems.append(f"{key}: holds a storage key or signature")
        if key in SECRET_KEYS and not _KEY_VAULT_REFERENCE.fullmatch(shown):
            problems.append(f"{key}: a secret, so a @Microsoft.KeyVault(SecretUri=…) reference")
    for key in sorted(RETIRED_SITE_CONFIG & set(app.site_config)):
        problems.append(
            f"siteConfig.{key}: Flex Consumption retires it (or it bypasses this check)"
        )

    required = {*APP_REQUIRED, *platform_keys(doc)}
    problems += [f"{key}: missing" for key in sorted(required - set(raw))]
    problems += _platform_value_problems(raw, resolved)
    problems += _database_url_problems(resolved.get("Database__Url"))
    problems += _model_problems(resolved)
    return problems


def _platform_value_problems(raw: Mapping[str, Any], resolved: Mapping[str, str]) -> list[str]:
    problems = []
    if raw.get("AzureWebJobsStorage__credential", "managedidentity") != "managedidentity":
        problems.append("AzureWebJobsStorage__credential: must be managedidentity")
    auth = str(raw.get("APPLICATIONINSIGHTS_AUTHENTICATION_STRING", "ClientId=x;Authorization=AAD"))
    if not re.fullmatch(
        r"ClientId=\$\{\w+\};Authorization=AAD|ClientId=[^;]+;Authorization=AAD", auth
    ):
        problems.append(
            "APPLICATIONINSIGHTS_AUTHENTICATION_STRING: must be "
            "ClientId=<identity>;Authorization=AAD"
        )
    if resolved.get("Notices__Runner", "None") != "None":
        problems.append("Notices__Runner: None by default, until an operator names a runner")
    return problems


def _database_url_problems(url: str | None) -> list[str]:
    if url is None:
        return []
    parsed = make_url(url)
    problems = []
    if parsed.password:
        problems.append("Database__Url: holds a password (the identity's Entra token signs in)")
    query = {k.lower(): str(v).lower() for k, v in parsed.query.items()}
    if parsed.get_backend_name() == "mssql" and query.get("encrypt") != "yes":
        problems.append("Database__Url: Encrypt=yes, so the connection is encrypted")
    if query.get("trustservercertificate", "no") != "no":
        problems.append(
            "Database__Url: TrustServerCertificate, so the server's certificate is unverified"
        )
    return problems


def _model_problems(resolved: Mapping[str, str]) -> list[str]:
    environ = {k: v for k, v in resolved.items() if k in model_keys()}
    environ.update({k: v for k, v in _RESOLVED_SECRETS.items() if k in environ})
    try:
        settings = load_settings(environ)
    except SettingsError as exc:
        return exc.problems
    return check_host(settings, "function")


def real_problems() -> list[str]:
    """The problems of the repository's own infra/app.bicep and docs/settings.md."""
    return app_settings_problems(
        APP_BICEP.read_text(encoding="utf-8"), SETTINGS_DOC.read_text(encoding="utf-8")
    )
