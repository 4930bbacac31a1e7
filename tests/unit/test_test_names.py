"""The suite is read by behaviour and by ADR decision, never by issue: no test's name or
docstring, nor a test module's docstring, names an issue number; test names are lower case, and
a test named for a decision opens with it as `test_d<N>_` in the ADR's words (the ADR itself is
named in the docstring, never as `test_adr_…`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tests.support.checkout import REPO

TESTS = REPO / "tests"
ISSUE = re.compile(r"(?<![a-z])(issues?|acceptance)[\s_#-]*\d+", re.IGNORECASE)
DECISION_FIRST = re.compile(r"^test_d\d+_[a-z0-9]")


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


def _misnamed(name: str) -> bool:
    """Upper case anywhere, the ADR in the name, or a decision not written `test_d<N>_`."""
    return (
        name != name.lower()
        or name.startswith("test_adr")
        or bool(re.match(r"^test_d\d", name) and not DECISION_FIRST.match(name))
    )


def test_test_names_are_lower_case_and_decision_tests_open_with_test_d_n() -> None:
    assert [f"{where}::{node.name}" for where, node in _tests() if _misnamed(node.name)] == []


def test_control_the_checks_catch_each_style_they_refuse() -> None:
    assert ISSUE.search(f"Issue {11}, acceptance {3}: the sweep")
    assert ISSUE.search(f"test_issue_{7}_regression")
    assert not ISSUE.search("ADR-0048 D2: the claim re-reads by name")
    for refused in ("test_D2_lease", "test_adr_0051_d3_host", "test_d2lease", "test_SweepRuns"):
        assert _misnamed(refused), refused
    for kept in ("test_d2_a_live_lease_is_not_taken_over", "test_the_sweep_runs_off_the_loop"):
        assert not _misnamed(kept), kept
