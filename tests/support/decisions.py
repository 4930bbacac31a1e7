"""docs/decisions.md read as data: which ADRs and decisions it defines, and for each decision the
modules that implement it and the tests it lists."""

from __future__ import annotations

import ast
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
            adr, current = _heading(line, adr, defined)
            in_tests = False
        elif adr is not None and (row := _PROBE_ROW.match(line)):
            defined.setdefault((adr, row.group(1)), Decision(adr, row.group(1)))
        elif current is not None:
            in_tests = _section_line(line, current, in_tests)
    return defined


def _heading(
    line: str, adr: str | None, defined: dict[tuple[str, str | None], Decision]
) -> tuple[str | None, Decision | None]:
    """The ADR and the decision a heading opens (a section that is no decision opens none)."""
    if heading := _ADR_HEADING.match(line):
        adr = heading.group(1)
        return adr, defined.setdefault((adr, None), Decision(adr, None))
    if heading := _DECISION_HEADING.match(line):
        decision = Decision(heading.group(1), heading.group(2))
        defined[decision.key] = decision
        return decision.adr, decision
    return (None if line.startswith("## ") else adr), None


def _section_line(line: str, current: Decision, in_tests: bool) -> bool:
    """Read one line of a decision's section into it; whether its test list goes on."""
    if line.startswith("- Module:"):
        current.modules = [c for c in _CODE.findall(line) if "/" in c]
    elif line.startswith("- Tests:"):
        current.lists_tests = True
        return True
    elif in_tests and line.startswith("  - "):
        current.tests.extend(_CODE.findall(line))
        return True
    return False


def test_functions(path: Path) -> set[str]:
    """The names of the test functions a module defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def _mark_args(node: ast.expr) -> list[tuple[str, str | None]]:
    """The (ADR, decision) pairs of one `pytest.mark.adr("0050", "D5", ...)` expression."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "adr"
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
        and node.args
    ):
        return []
    adr, *ids = (a.value for a in node.args)  # type: ignore[attr-defined]
    return [(adr, None)] if not ids else [(adr, d) for d in ids]


def _module_marks(tree: ast.Module) -> list[tuple[str, str | None]]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            values = (
                node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            )
            return [pair for value in values for pair in _mark_args(value)]
    return []


def marked_tests(root: Path = REPO / "tests") -> dict[tuple[str, str | None], set[str]]:
    """Every test marked `adr(...)`, by the (ADR, decision) it names, as `path::name`."""
    marked: dict[tuple[str, str | None], set[str]] = {}
    for path in sorted(root.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = _module_marks(tree)
        where = str(path.relative_to(REPO))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test"
            ):
                pairs = module + [p for d in node.decorator_list for p in _mark_args(d)]
                for pair in pairs:
                    marked.setdefault(pair, set()).add(f"{where}::{node.name}")
    return marked


def marker_name(adr: str, decision: str | None = None) -> str:
    """The marker `pytest -m` selects by: adr_0050, adr_0050_d5, adr_0050_d4_2."""
    if decision is None:
        return f"adr_{adr}"
    return f"adr_{adr}_{decision.lower().replace('.', '_')}"


def rewritten(text: str, marked: dict[tuple[str, str | None], set[str]]) -> str:
    """The page with each section's test list replaced by the tests marked with it."""
    out: list[str] = []
    adr: str | None = None
    key: tuple[str, str | None] | None = None
    skipping = False
    for line in text.splitlines():
        if skipping and line.startswith("  - "):
            continue
        skipping = False
        if heading := _ADR_HEADING.match(line):
            adr = heading.group(1)
            key = (adr, None)
        elif heading := _DECISION_HEADING.match(line):
            key = (heading.group(1), heading.group(2))
        elif line.startswith("#"):
            key = None
        if key is not None and line.startswith("- Tests:"):
            tests = sorted(marked.get(key, set()))
            if tests:
                out.append("- Tests:")
                out += [f"  - `{t}`" for t in tests]
            else:
                out.append(line if line.startswith("- Tests: none") else "- Tests: none marked")
            skipping = True
            continue
        out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    page = rewritten(DOC.read_text(encoding="utf-8"), marked_tests())
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
