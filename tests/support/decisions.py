"""docs/decisions.md read as data: which ADRs and decisions it defines, and for each decision the
modules that implement it and the tests it lists."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.checkout import REPO

DOC = REPO / "docs" / "decisions.md"

# A decision (as in ADR-0050 D4.2) or one of a record's probes (ADR-0050 A3.4).
DECISION_ID = r"[DA]\d+(?:\.\d+)?"
_ADR_HEADING = re.compile(r"^## ADR-(\d{4})$")
_DECISION_HEADING = re.compile(rf"^### ADR-(\d{{4}}) ({DECISION_ID})$")
_PROBE_ROW = re.compile(rf"^\| ({DECISION_ID}) \|")
_CODE = re.compile(r"`([^`]+)`")


@dataclass
class Decision:
    """One defined id: an ADR (`decision` None), one of its decisions, or one of its probes."""

    adr: str
    decision: str | None
    modules: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    lists_tests: bool = False

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.adr, self.decision)


def read(text: str | None = None) -> dict[tuple[str, str | None], Decision]:
    """Every ADR, decision and probe the page defines, by (ADR number, decision id or None)."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    defined: dict[tuple[str, str | None], Decision] = {}
    adr: str | None = None
    current: Decision | None = None
    in_tests = False
    for line in text.splitlines():
        if line.startswith("#"):
            in_tests = False
            if heading := _ADR_HEADING.match(line):
                adr = heading.group(1)
                current = defined.setdefault((adr, None), Decision(adr, None))
            elif heading := _DECISION_HEADING.match(line):
                adr = heading.group(1)
                current = Decision(adr, heading.group(2))
                defined[current.key] = current
            elif line.startswith("## "):
                adr, current = None, None
            else:
                current = None  # a section of the ADR that is not one decision (probes, rejected)
            continue
        if adr is not None and (row := _PROBE_ROW.match(line)):
            defined.setdefault((adr, row.group(1)), Decision(adr, row.group(1)))
            continue
        if current is None:
            continue
        if line.startswith("- Module:"):
            current.modules = [c for c in _CODE.findall(line) if "/" in c]
        elif line.startswith("- Tests:"):
            current.lists_tests, in_tests = True, True
        elif in_tests and line.startswith("  - "):
            current.tests.extend(_CODE.findall(line))
        else:
            in_tests = False
    return defined


def test_functions(path: Path) -> set[str]:
    """The names of the test functions a module defines."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }
