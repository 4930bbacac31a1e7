"""The unit ring does no I/O beyond reading this checkout's files: no test under tests/unit
imports a way to start a process or names the interpreter. A test that needs a fresh interpreter
lives in the integration ring, by behaviour (tests/integration/<behaviour>/); the root conftest
also refuses, at run time, any interpreter a unit test starts by another road."""

from __future__ import annotations

import ast

from tests.support.checkout import REPO

UNIT = REPO / "tests" / "unit"
# Modules that start processes, and the helpers of this suite that do.
SPAWNING_MODULES = {"subprocess", "multiprocessing", "pty", "tests.support.checkout.run_python"}
SPAWNING_CALLS = {
    ("sys", "executable"),
    ("os", "system"),
    ("os", "popen"),
    ("os", "fork"),
    ("os", "execv"),
    ("os", "execvp"),
    ("os", "spawnv"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
}


def spawning_in(source: str) -> list[str]:
    """Each import of a spawning module or helper, and each use of the interpreter's path or a
    process-starting call, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in SPAWNING_CALLS:
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
            continue
        else:
            continue
        spawning = [
            n for n in names if n in SPAWNING_MODULES or n.split(".")[0] in SPAWNING_MODULES
        ]
        if spawning:
            found.append(f"line {node.lineno}: imports {spawning[-1]}")
    return found


def test_no_unit_test_imports_a_way_to_start_a_process_or_names_the_interpreter() -> None:
    found = {
        str(path.relative_to(REPO)): hits
        for path in sorted(UNIT.rglob("*.py"))
        if (hits := spawning_in(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_control_the_check_finds_each_road_to_a_process() -> None:
    source = (
        "import subprocess\n"
        "from multiprocessing import Process\n"
        "from tests.support.checkout import run_python\n"
        "import sys, os, asyncio\n"
        "sys.executable; os.system; asyncio.create_subprocess_exec\n"
    )
    assert len(spawning_in(source)) == 6
    assert spawning_in("import sys\nfrom tests.support.checkout import REPO\nsys.path\n") == []
