"""`@pytest.mark.adr("0050", "D5")` made selectable: each test marked with an ADR's decision also
carries `adr_0050` and `adr_0050_d5` (`adr_0050_d4_2` for D4.2), so `pytest -m adr_0050_d5` runs
the tests of one decision and `pytest -m adr_0050` those of the whole record. docs/decisions.md
lists the same tests (tests/unit/test_decisions_doc.py keeps the two in step)."""

from __future__ import annotations

import pytest

from tests.support.decisions import marker_name, read


def pytest_configure(config: pytest.Config) -> None:
    # Registered, so --strict-markers accepts them; one per ADR and decision the page defines.
    for adr, decision in read():
        config.addinivalue_line(
            "markers", f"{marker_name(adr, decision)}: selects adr({adr!r}, {decision!r})"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before -m deselects: the derived markers must be on the items when it reads them.
    for item in items:
        for mark in item.iter_markers("adr"):
            adr, *decisions = mark.args
            names = {marker_name(adr)} | {marker_name(adr, d) for d in decisions}
            for name in sorted(names):
                item.add_marker(name)
