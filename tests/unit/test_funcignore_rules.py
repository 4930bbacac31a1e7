""".funcignore as Core Tools reads it (tests/support/remote_build.py's FuncIgnore): every pattern
anchored at the app's root and matched as a prefix. The worker ring runs the package these rules
build; this pins the rules themselves and what the project's own file keeps, without a worker."""

from __future__ import annotations

import pytest

from tests.support.checkout import REPO
from tests.support.remote_build import FuncIgnore


@pytest.mark.parametrize(
    ("pattern", "path", "accepted"),
    [
        ("__pycache__/", "__pycache__/x.pyc", False),
        ("__pycache__/", "shared/__pycache__/x.pyc", True),  # only the root's
        ("**/__pycache__/", "shared/db/__pycache__/x.pyc", False),
        ("**/__pycache__/", "__pycache__/x.pyc", True),
        ("*.db", "azurebank.db", False),
        ("*.db", "data/azurebank.db", True),  # `*` never crosses a `/`
        (".venv", ".venv-main/bin/python", False),  # a prefix: `.venv` also leaves `.venv-*`
        ("/docs/", "docs/cli.md", False),  # a leading `/` changes nothing
        ("# docs/", "docs/cli.md", True),
        ("tests/", "shared/tests/x.py", True),
    ],
)
def test_a_pattern_matches_from_the_root_as_a_prefix(
    pattern: str, path: str, accepted: bool
) -> None:
    assert FuncIgnore(pattern).accepts(path) is accepted


def test_a_negated_pattern_keeps_what_another_leaves_out() -> None:
    rules = FuncIgnore("docs/\n!docs/keep.md\n")
    assert not rules.accepts("docs/cli.md")
    assert rules.accepts("docs/keep.md")


@pytest.mark.parametrize(
    "path",
    [
        "azurebank_cli/main.py",
        "shared/db/__pycache__/engine.cpython-311.pyc",
        "api_funcs/__pycache__/app.cpython-311.pyc",
        "pyproject.toml",
        "compose.yaml",
        ".venv-main/bin/python",
        ".github/workflows/ci.yml",
        "azurebank_functions.egg-info/PKG-INFO",
        "shared/notices/notify.py",
        "shared/migrations/env.py",
        "tests/conftest.py",
        "bench/cold_start.py",
    ],
)
def test_the_projects_funcignore_leaves_out_the_cli_the_caches_and_the_dev_files(
    path: str,
) -> None:
    assert not FuncIgnore((REPO / ".funcignore").read_text(encoding="utf-8")).accepts(path)


@pytest.mark.parametrize(
    "path",
    [
        "function_app.py",
        "host.json",
        "requirements.txt",
        "relay_func/__init__.py",
        "api_funcs/functions.py",
        "shared/settings.py",
        "shared/migrations/versions/0001_initial_schema.py",
    ],
)
def test_the_projects_funcignore_keeps_the_app(path: str) -> None:
    assert FuncIgnore((REPO / ".funcignore").read_text(encoding="utf-8")).accepts(path)
