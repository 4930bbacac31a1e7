"""compose.yaml and .github/workflows/ci.yml: nothing here runs Docker or GitHub Actions, so
their schemas (checked by scripts/test.sh with check-jsonschema's built-in copies) and the few
values the README promises, read here, are what keep them from rotting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.engine import make_url

from tests.support.checkout import COMPOSE, REPO, WORKFLOW


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_compose_runs_sql_server_2022_with_a_sqlcmd_health_check_and_azurite_3_35() -> None:
    services = _yaml(COMPOSE)["services"]
    sqlserver, azurite = services["sqlserver"], services["azurite"]
    assert sqlserver["image"] == "mcr.microsoft.com/mssql/server:2022-latest"
    assert sqlserver["environment"]["ACCEPT_EULA"] == "Y"
    assert "/opt/mssql-tools18/bin/sqlcmd -C " in " ".join(sqlserver["healthcheck"]["test"])
    assert azurite["image"] == "mcr.microsoft.com/azure-storage/azurite:3.35.0"
    assert "--skipApiVersionCheck" in azurite["command"]
    assert "127.0.0.1:10000:10000" in azurite["ports"]


def test_the_readme_ci_and_compose_name_one_sql_server_url() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    [exported] = [
        line.split("=", 1)[1].strip("'")
        for line in readme.splitlines()
        if line.startswith("export AZUREBANK_TEST_SQLSERVER=")
    ]
    jobs = _yaml(WORKFLOW)["jobs"]
    assert jobs["sqlserver"]["env"]["AZUREBANK_TEST_SQLSERVER"] == exported
    url = make_url(exported)
    assert (url.drivername, url.host, url.port, url.database) == (
        "mssql+pyodbc",
        "127.0.0.1",
        1433,
        "master",
    )
    assert url.query == {
        "driver": "ODBC Driver 18 for SQL Server",
        "TrustServerCertificate": "yes",
    }
    # The compose file's development default and the CI service's password are the URL's.
    compose_password = _yaml(COMPOSE)["services"]["sqlserver"]["environment"]["MSSQL_SA_PASSWORD"]
    assert compose_password == f"${{MSSQL_SA_PASSWORD:-{url.password}}}"
    ci_service = jobs["sqlserver"]["services"]["sqlserver"]
    assert ci_service["image"] == "mcr.microsoft.com/mssql/server:2022-latest"
    assert ci_service["env"]["MSSQL_SA_PASSWORD"] == url.password


def test_both_ci_jobs_run_the_readme_test_command_under_ci_true() -> None:
    workflow = _yaml(WORKFLOW)
    assert workflow["env"]["CI"] == "true"
    for name, job in workflow["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest", name
        uses = {
            step["uses"].split("@")[0]: step.get("with", {})
            for step in job["steps"]
            if "uses" in step
        }
        assert uses["actions/setup-python"]["python-version"] == "3.11", name
        assert uses["actions/setup-node"]["node-version"] == "20", name
        assert job["services"]["postgres"]["env"]["POSTGRES_HOST_AUTH_METHOD"] == "trust", name
        assert [s["run"] for s in job["steps"] if s.get("name") == "./scripts/test.sh"] == [
            "./scripts/test.sh"
        ], name
    installs = " ".join(s.get("run", "") for s in workflow["jobs"]["sqlserver"]["steps"])
    assert "ACCEPT_EULA=Y apt-get install -y -q msodbcsql18" in installs
