"""azure.yaml's shape, offline: check-jsonschema ships no azd schema, and the published one is
not packaged, so this test holds the part of azd's v1.0 schema the file uses (the project's
name, infra, services, the command hooks) and what azd would find on disk: the service's Functions
project, the infra module, the hook's script. A broken copy fails it, so the check bites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.checkout import REPO

AZURE_YAML = REPO / "azure.yaml"
_HOOK: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run"],
    "properties": {
        "shell": {"enum": ["sh", "pwsh"]},
        "run": {"type": "string", "minLength": 1},
        "continueOnError": {"type": "boolean"},
        "interactive": {"type": "boolean"},
    },
}
# azd's command-level hook names (pre/post of provision, deploy, up, down, package, restore).
_HOOK_NAMES = [
    f"{when}{command}"
    for when in ("pre", "post")
    for command in ("provision", "deploy", "up", "down", "package", "restore")
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "services"],
    "properties": {
        "name": {"type": "string", "minLength": 2, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "metadata": {"type": "object", "properties": {"template": {"type": "string"}}},
        "infra": {
            "type": "object",
            "properties": {
                "provider": {"enum": ["bicep", "terraform"]},
                "path": {"type": "string"},
                "module": {"type": "string"},
            },
        },
        "services": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["host"],
                "properties": {
                    "project": {"type": "string"},
                    "language": {"enum": ["py", "python"]},
                    "host": {"const": "function"},
                    "remoteBuild": {"type": "boolean"},
                },
            },
        },
        "hooks": {
            "type": "object",
            "additionalProperties": False,
            "properties": {name: _HOOK for name in _HOOK_NAMES},
        },
    },
}


def _problems(document: Any, root: Path = REPO) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    problems = [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(document)
    ]
    if problems:
        return problems
    infra = document.get("infra", {})
    module = root / infra.get("path", "infra") / f"{infra.get('module', 'main')}.bicep"
    if not module.is_file():
        problems.append(f"infra: no {module.relative_to(root)}")
    for name, service in document["services"].items():
        project = root / service.get("project", ".")
        for needed in ("function_app.py", "host.json", "requirements.txt"):
            if not (project / needed).is_file():
                problems.append(f"services/{name}: no {needed} in its project")
    for name, hook in document.get("hooks", {}).items():
        script = root / hook["run"]
        if not script.is_file() or not script.stat().st_mode & 0o111:
            problems.append(f"hooks/{name}: {hook['run']} is not an executable script")
    return problems


def _document() -> Any:
    return yaml.safe_load(AZURE_YAML.read_text(encoding="utf-8"))


def test_azure_yaml_has_azds_shape_and_names_what_is_on_disk() -> None:
    document = _document()
    assert _problems(document) == []
    assert document["services"]["api"] == {
        "project": ".",
        "language": "python",
        "host": "function",
        "remoteBuild": True,
    }
    assert document["hooks"]["postprovision"]["run"] == "./infra/hooks/postprovision.sh"


@pytest.mark.parametrize(
    ("defect", "expected"),
    [
        ({"name": "AzureBank"}, "name: 'AzureBank' does not match"),
        ({"services": {"api": {"project": "."}}}, "services/api: 'host' is a required property"),
        (
            {"hooks": {"postprovison": {"run": "./infra/hooks/postprovision.sh"}}},
            "hooks: Additional properties are not allowed ('postprovison' was unexpected)",
        ),
        (
            {"hooks": {"postprovision": {"run": "./infra/hooks/missing.sh"}}},
            "hooks/postprovision: ./infra/hooks/missing.sh is not an executable script",
        ),
        ({"infra": {"path": "infrastructure"}}, "infra: no infrastructure/main.bicep"),
    ],
)
def test_control_a_broken_azure_yaml_fails_naming_what_is_wrong(
    defect: dict[str, Any], expected: str
) -> None:
    document = {**_document(), **defect}
    assert any(p.startswith(expected) for p in _problems(document)), _problems(document)
