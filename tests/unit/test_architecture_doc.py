"""docs/architecture.md's one arrow holds: `shared` imports no edge (api_funcs, relay_func,
azurebank_cli), and no edge imports another. The decisions' modules and tests:
tests/unit/test_decisions_doc.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.support.checkout import REPO

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
