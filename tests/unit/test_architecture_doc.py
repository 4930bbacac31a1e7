"""docs/architecture.md's one arrow holds: `shared` imports no edge (api_funcs, relay_func,
azurebank_cli). The decisions' modules and tests: tests/unit/test_decisions_doc.py."""

from __future__ import annotations

import ast

from tests.support.checkout import REPO


def test_shared_imports_no_edge() -> None:
    edges = ("api_funcs", "relay_func", "azurebank_cli", "function_app")
    for path in (REPO / "shared").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert name.split(".")[0] not in edges, f"{path.relative_to(REPO)} imports {name}"
