"""compose.yaml and .github/workflows/ci.yml pass their schemas (check-jsonschema's built-in
copies, no network), and a broken copy fails them, so the check is known to bite; nothing here
runs Docker or GitHub Actions. scripts/test.sh runs the same schema check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.checkout import COMPOSE, WORKFLOW

SCHEMAS = [
    pytest.param("vendor.compose-spec", COMPOSE, id="compose.yaml"),
    pytest.param("vendor.github-workflows", WORKFLOW, id="ci.yml"),
]


def _check(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("schema", "path"), SCHEMAS)
def test_the_file_passes_its_builtin_schema(schema: str, path: Path) -> None:
    checked = _check(schema, path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(("schema", "path"), SCHEMAS)
def test_control_the_file_broken_fails_its_schema(schema: str, path: Path, tmp_path: Path) -> None:
    broken = tmp_path / path.name
    if path == COMPOSE:
        broken.write_text("services: [1]\n", encoding="utf-8")
    else:  # the real workflow with one job's runs-on taken out
        text = path.read_text(encoding="utf-8")
        assert "    runs-on: ubuntu-latest\n" in text
        broken.write_text(text.replace("    runs-on: ubuntu-latest\n", "", 1), encoding="utf-8")
    checked = _check(schema, broken)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "Schema validation errors" in checked.stdout
