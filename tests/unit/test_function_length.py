"""Readable units: no function of the app runs over LIMIT lines of code (its docstring
included, blank and comment-only lines not) unless its docstring gives the reason on a line
that starts "Longer than". A function that grows past the limit is split by step or says why."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "api_funcs", "relay_func", "azurebank_cli")
LIMIT = 45
MARKER = "Longer than"

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def code_lines(function: _Function, lines: list[str]) -> int:
    """Lines of `function`'s body, docstring included, that are neither blank nor comments."""
    body = lines[function.body[0].lineno - 1 : function.end_lineno]
    return sum(1 for line in body if line.strip() and not line.strip().startswith("#"))


def gives_a_reason(function: _Function) -> bool:
    docstring = ast.get_docstring(function) or ""
    return any(line.startswith(MARKER) for line in docstring.splitlines())


def long_functions(source: str) -> Iterator[tuple[int, str, int]]:
    """(line, name, code lines) of each function over LIMIT lines that gives no reason."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, _Function):
            length = code_lines(node, lines)
            if length > LIMIT and not gives_a_reason(node):
                yield node.lineno, node.name, length


def test_no_function_runs_over_the_limit_without_a_reason_in_its_docstring() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line} {name}: {length} lines"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for line, name, length in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert found == [], (
        f"split by step, or start a docstring line with {MARKER!r} and the reason:\n"
        + "\n".join(found)
    )


def test_the_check_counts_code_and_reads_the_reason() -> None:
    statements = "\n".join(f"    x{i} = {i}  # a comment\n" for i in range(LIMIT))
    plain = f"def long():\n    '''One line.'''\n{statements}"
    reasoned = f"def long():\n    '''One line.\n    {MARKER} the rest: one list.'''\n{statements}"
    commented = "def short():\n" + "    # only a comment\n" * 100 + "    return 1\n"
    assert [(name, length) for _, name, length in long_functions(plain)] == [("long", LIMIT + 1)]
    assert list(long_functions(reasoned)) == []
    assert list(long_functions(commented)) == []
