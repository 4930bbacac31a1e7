"""A pytest plugin for scripts/mutation.py's runs only (`-p tests.support.mutation_plugin`):
every cache of a mutated package is emptied before each test.

The money path builds its statements once (`functools.cache`), so the builders under a cache run
in the first test that needs them and never again in that process. mutmut records which test
ran which function to choose the tests each mutant meets: without this, a builder would be
credited to one test only, and its mutants met by that one test alone.
"""

from __future__ import annotations

import sys

import pytest

PACKAGES = ("shared.money", "shared.notices", "shared.audit", "shared.identity")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(PACKAGES):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and hasattr(value, "cache_info"):
                value.cache_clear()
