"""docs/architecture.md: every decision of ADR-0048 (D1–D7), ADR-0050 (D1–D8) and ADR-0052
(D1–D6) has a row naming a module and a test that exist, and the one arrow holds: `shared`
imports no edge (api_funcs, relay_func, azurebank_cli), and no edge imports another."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.checkout import REPO

DOC = REPO / "docs" / "architecture.md"
DECISIONS = {"0048": 7, "0050": 8, "0052": 6}
ROW = re.compile(r"^\| ADR-(\d{4}) D(\d) [^|]*\| ([^|]+?) \| ([^|]+?) \|$")


def _rows() -> dict[tuple[str, int], tuple[str, str]]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line.strip())
        if match:
            adr, number, module, test = match.groups()
            rows[(adr, int(number))] = (module.strip(), test.strip())
    return rows


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_every_decision_has_a_row_naming_a_module_and_a_test_that_exist() -> None:
    rows = _rows()
    expected = {(adr, d) for adr, count in DECISIONS.items() for d in range(1, count + 1)}
    assert set(rows) == expected
    for (adr, number), (module, test) in sorted(rows.items()):
        assert (REPO / module).is_file(), f"ADR-{adr} D{number}: no module {module}"
        path, _, name = test.partition("::")
        assert (REPO / path).is_file(), f"ADR-{adr} D{number}: no test file {path}"
        assert name in _test_names(REPO / path), f"ADR-{adr} D{number}: no test {test}"


EDGES = ("api_funcs", "relay_func", "azurebank_cli", "function_app")


def _imported(package: str) -> Iterator[tuple[str, str]]:
    """(module file, imported name) for every import in `package`, TYPE_CHECKING ones too."""
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                yield str(path.relative_to(REPO)), name


def test_shared_imports_no_edge() -> None:
    for path, name in _imported("shared"):
        assert name.split(".")[0] not in EDGES, f"{path} imports {name}"


@pytest.mark.parametrize("edge", ["api_funcs", "relay_func", "azurebank_cli"])
def test_an_edge_imports_no_other_edge_but_serve_its_app(edge: str) -> None:
    """Only function_app.py composes edges; `azurebank serve` runs the HTTP side's own glue."""
    allowed = {"api_funcs.served"} if edge == "azurebank_cli" else set()
    for path, name in _imported(edge):
        other = name.split(".")[0]
        assert other == edge or other not in EDGES or name in allowed, f"{path} imports {name}"
