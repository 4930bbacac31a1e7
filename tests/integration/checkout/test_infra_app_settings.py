"""infra/app.bicep's app settings agree with the settings model and docs/settings.md, read with
pycep (checkov's own Bicep parser): nothing required missing, no key nobody reads, every secret a
Key Vault reference, nothing Flex Consumption retires; each planted defect fails the check. The
rest of infra/ holds no secret: no parameter, output or hook carries a key, and the hook's SQL is
the CLI's. scripts/test.sh runs checkov over the same files."""

from __future__ import annotations

import ctypes.util
import json
import re
from collections.abc import Callable

import pytest

from tests.support.checkout import REPO, run_python
from tests.support.infra_settings import (
    APP_BICEP,
    SETTINGS_DOC,
    app_settings_problems,
    parse_bicep,
    real_problems,
    resolved_settings,
)
from tests.support.services import service_missing

INFRA = REPO / "infra"
MAIN = INFRA / "main.bicep"
HOOK = INFRA / "hooks" / "postprovision.sh"
# Flex Consumption's bounds on maximumInstanceCount.
FLEX_MIN_INSTANCES, FLEX_MAX_INSTANCES = 40, 1000


def _planted(change: Callable[[str], str]) -> list[str]:
    text = APP_BICEP.read_text(encoding="utf-8")
    changed = change(text)
    assert changed != text, "the defect was planted"
    return app_settings_problems(changed, SETTINGS_DOC.read_text(encoding="utf-8"))


def _replace(old: str, new: str) -> Callable[[str], str]:
    return lambda text: text.replace(old, new, 1)


def test_the_function_apps_settings_agree_with_the_settings_model_and_docs() -> None:
    assert real_problems() == []


STORAGE_KEY = "Zm9v" * 22 + "YmE="  # the shape of an account key, not one


@pytest.mark.parametrize(
    ("defect", "change", "expected"),
    [
        (
            "a storage account key in a setting",
            _replace(
                "    AzureWebJobsStorage__credential: 'managedidentity'\n",
                "    AzureWebJobsStorage: 'DefaultEndpointsProtocol=https;AccountName=st;"
                f"AccountKey={STORAGE_KEY}'\n"
                "    AzureWebJobsStorage__credential: 'managedidentity'\n",
            ),
            "AzureWebJobsStorage: holds a storage key or signature",
        ),
        (
            "Audit__ChainKey as a plain value",
            lambda t: re.sub(
                r"(?m)^    Audit__ChainKey: .*$",
                "    Audit__ChainKey: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='",
                t,
            ),
            "Audit__ChainKey: a secret, so a @Microsoft.KeyVault(SecretUri=…) reference",
        ),
        (
            "a required setting removed",
            _replace("    AzureFunctionsWebHost__hostid: hostId\n", ""),
            "AzureFunctionsWebHost__hostid: missing",
        ),
        (
            "the app's required setting removed",
            lambda t: re.sub(r"\n    Database__Url: [^\n]+", "", t),
            "Database__Url: missing",
        ),
        (
            "a setting Flex retires",
            _replace(
                "    Notices__Runner: noticesRunner\n",
                "    Notices__Runner: noticesRunner\n    FUNCTIONS_WORKER_RUNTIME: 'python'\n",
            ),
            "FUNCTIONS_WORKER_RUNTIME: Flex Consumption retires this setting",
        ),
        (
            "alwaysOn in the site's configuration",
            _replace(
                "      http20Enabled: true\n", "      http20Enabled: true\n      alwaysOn: true\n"
            ),
            "siteConfig.alwaysOn: Flex Consumption retires it (or it bypasses this check)",
        ),
        (
            "a key the app does not know (a typo)",
            _replace("    Notices__Runner: noticesRunner", "    Notices__Runnr: noticesRunner"),
            "Notices__Runnr: a key the app does not know (docs/settings.md)",
        ),
        (
            "a server certificate the URL does not verify",
            _replace("&Encrypt=yes'", "&Encrypt=yes&TrustServerCertificate=yes'"),
            "Database__Url: TrustServerCertificate, so the server's certificate is unverified",
        ),
        (
            "a password in the database URL",
            _replace("mssql+pyodbc://@", "mssql+pyodbc://app:hunter2@"),
            "Database__Url: holds a password (the identity's Entra token signs in)",
        ),
        (
            "a runner named by default",
            _replace("param noticesRunner string = 'None'", "param noticesRunner string = 'Api'"),
            "Notices__Runner: None by default, until an operator names a runner",
        ),
        (
            "a value the settings model refuses",
            _replace("    Notices__Runner: noticesRunner", "    Notices__Runner: 'Nobody'"),
            "Notices__Runner: Input should be 'None', 'Api' or 'Function' (got 'Nobody'). Fix: "
            "set Notices__Runner to one of None, Api, Function.",
        ),
    ],
)
def test_a_planted_defect_fails_the_check_naming_it(
    defect: str, change: Callable[[str], str], expected: str
) -> None:
    assert expected in _planted(change), defect


def _parsed(path_name: str) -> dict[str, object]:
    return parse_bicep((INFRA / path_name).read_text(encoding="utf-8"))


def _default(parameters: dict[str, dict[str, object]], name: str) -> object:
    return parameters[name]["default"]


def test_the_instance_limit_keeps_every_connection_within_the_databases_workers() -> None:
    """docs/deploy.md's formula, on main.bicep's own defaults: instances x (PoolSize +
    MaxOverflow) <= workers - reserved, within Flex Consumption's 40 to 1000."""
    tree = _parsed("main.bicep")
    parameters = tree["parameters"]
    assert isinstance(parameters, dict)
    variables = tree["variables"]
    assert isinstance(variables, dict)
    workers = variables["databaseWorkers"]["value"]
    assert workers == {"GP_S_Gen5_1": 75, "GP_S_Gen5_2": 150, "GP_S_Gen5_4": 300}
    pool = _default(parameters, "databasePoolSize")
    overflow = _default(parameters, "databaseMaxOverflow")
    reserved = _default(parameters, "databaseReservedWorkers")
    sku = _default(parameters, "databaseSku")
    assert isinstance(pool, int) and isinstance(overflow, int) and isinstance(reserved, int)
    instances = min(FLEX_MAX_INSTANCES, (workers[sku] - reserved) // (pool + overflow))
    assert FLEX_MIN_INSTANCES <= instances <= FLEX_MAX_INSTANCES
    assert instances * (pool + overflow) <= workers[sku] - reserved
    formula = (
        "var maximumInstanceCount = min(1000, (databaseWorkers[databaseSku] - "
        "databaseReservedWorkers) / connectionsPerInstance)"
    )
    assert formula in MAIN.read_text(encoding="utf-8")
    assert "instances × (PoolSize + MaxOverflow) ≤ workers − reserved" in (
        REPO / "docs" / "deploy.md"
    ).read_text(encoding="utf-8")
    app = _parsed("app.bicep")["parameters"]
    assert isinstance(app, dict)
    limits = {d["type"]: d["argument"] for d in app["maximumInstanceCount"]["decorators"]}
    assert limits == {"min_value": FLEX_MIN_INSTANCES, "max_value": FLEX_MAX_INSTANCES}


def test_main_bicep_names_no_runner_by_default() -> None:
    parameters = _parsed("main.bicep")["parameters"]
    assert isinstance(parameters, dict)
    assert _default(parameters, "noticesRunner") == "None"


def test_symbolic_names_are_unique_across_the_bicep_files() -> None:
    """checkov's Bicep graph keys its elements by name across all files of a scan: a resource
    named like a module of main.bicep lost its child resources' edges to it, and the SQL audit
    checks failed or passed by hash order."""
    seen: dict[str, str] = {}
    for path in sorted(INFRA.glob("*.bicep")):
        tree = _parsed(path.name)
        for kind in ("resources", "modules"):
            block = tree.get(kind, {})
            assert isinstance(block, dict)
            for name in block:
                assert name not in seen, f"{name} in {path.name} and {seen[name]}"
                seen[name] = path.name


def test_the_parameters_file_holds_no_secret_only_azd_variables() -> None:
    document = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))
    for name, parameter in document["parameters"].items():
        assert not re.search(r"key|secret|password|token", name, re.I), name
        assert re.fullmatch(r"\$\{[A-Z_]+(=[A-Za-z0-9_]*)?\}", parameter["value"]), name


def test_no_output_or_parameter_carries_a_secret() -> None:
    for path in sorted(INFRA.glob("*.bicep")):
        text = path.read_text(encoding="utf-8")
        assert "listKeys(" not in text and "@secure()" not in text, path.name
        assert not re.search(r"(?im)^output \S*(key|secret|password) ", text), path.name


def test_the_hook_runs_the_cli_and_holds_no_sql() -> None:
    text = HOOK.read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|GRANT|DROP)\b", code), (
        "SQL belongs in the CLI (azurebank db upgrade, db grant), not in the hook"
    )
    for command in ('keys generate "$2"', "db upgrade", "db grant --principal"):
        assert f'"$AZUREBANK" {command}' in code
    # No key on a command line or in the terminal: from the generator to a file, then the vault.
    assert '--file "$file"' in code and "--value" not in code
    assert HOOK.stat().st_mode & 0o111, "the hook is executable"


# Run in a fresh interpreter: building a SQL Server engine imports pyodbc, and the unit ring
# checks that nothing it runs has imported it (tests/unit/test_applock_sql.py).
_DRIVER_ARGUMENTS = """
import json, os, sys, time
from azure.core.credentials import AccessToken
from sqlalchemy import event
from shared.db.engine import build_engine

class Token:
    def get_token(self, *scopes, **kwargs):
        return AccessToken("eyJ0eXAiOiJKV1QifQ.deployed.sig", int(time.time()) + 3600)

class Stop(Exception):
    pass

engine = build_engine(os.environ["DEPLOYED_DATABASE_URL"], credential_factory=Token)
seen = []

@event.listens_for(engine, "do_connect")
def record(_d, _r, cargs, cparams):
    seen.append({"odbc": cargs[0], "attrs": sorted(cparams.get("attrs_before", {}))})
    raise Stop

try:
    engine.connect()
except Stop:
    pass
print(json.dumps(seen))
"""


def test_the_deployed_database_url_signs_in_with_a_token_over_verified_tls() -> None:
    """infra/app.bicep's Database__Url, as the engine turns it into the driver's arguments:
    an Entra token and no other way of signing in, Encrypt=yes, the certificate not trusted
    blindly. The engine is built and asked for a connection, stopped before pyodbc is called."""
    if ctypes.util.find_library("odbc") is None:
        service_missing("unixODBC (libodbc.so.2, for pyodbc)")
    url = resolved_settings(APP_BICEP.read_text(encoding="utf-8"))["Database__Url"]
    done = run_python("-c", _DRIVER_ARGUMENTS, settings={"DEPLOYED_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    [seen] = json.loads(done.stdout)
    keywords = {k.strip().lower(): v for k, v in (p.split("=", 1) for p in seen["odbc"].split(";"))}
    assert keywords["encrypt"] == "yes"
    assert keywords["driver"] == "{ODBC Driver 18 for SQL Server}"
    assert {"trustservercertificate", "trusted_connection", "uid", "pwd"}.isdisjoint(keywords)
    assert seen["attrs"] == [1256]  # SQL_COPT_SS_ACCESS_TOKEN
