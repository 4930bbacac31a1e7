"""The suite is read by behaviour, never by issue or decision number: no test's name or
docstring, nor a test module's docstring, names an issue number, and no test's name carries a
decision id (`test_d2_…`, `test_a8_…`, `test_adr_…`), which meant different ADRs in different
files — a test that pins a decision says so with `@pytest.mark.adr("0048", "D2")`
(docs/decisions.md) and its name says the behaviour. That names are lower case is ruff's N802
(pyproject.toml)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tests.support.checkout import REPO

TESTS = REPO / "tests"
ISSUE = re.compile(r"(?<![a-z])(issues?|acceptance)[\s_#-]*\d+", re.IGNORECASE)
DECISION_IN_NAME = re.compile(r"^test_(?:adr|[da]\d+)(?:_|$)", re.IGNORECASE)


def _tests() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test"
            ):
                yield str(path.relative_to(REPO)), node


def test_no_test_name_or_docstring_names_an_issue_number() -> None:
    found = [
        f"{where}::{node.name}"
        for where, node in _tests()
        if ISSUE.search(node.name) or ISSUE.search(ast.get_docstring(node) or "")
    ]
    found += [
        str(path.relative_to(REPO))
        for path in sorted(TESTS.rglob("*.py"))
        if ISSUE.search(ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")
    ]
    assert found == []


def test_no_test_name_carries_a_decision_id() -> None:
    misnamed = [
        f"{where}::{node.name}" for where, node in _tests() if DECISION_IN_NAME.match(node.name)
    ]
    assert misnamed == [], "name the behaviour; mark the decision with @pytest.mark.adr(...)"
