"""docs/decisions.md: every decision of the three ADRs this project implements in full (ADR-0048
D1–D7, ADR-0050 D1–D8, ADR-0052 D1–D6) has its section, every module the page names exists, and
each section's test list is exactly the tests marked `@pytest.mark.adr` with that decision."""

from __future__ import annotations

from tests.support import decisions
from tests.support.checkout import REPO

IMPLEMENTED = {"0048": 7, "0050": 8, "0052": 6}


def test_every_decision_of_the_implemented_adrs_has_its_section() -> None:
    defined = decisions.read()
    expected = {
        (adr, f"D{number}") for adr, count in IMPLEMENTED.items() for number in range(1, count + 1)
    }
    assert expected - set(defined) == set()


def test_every_module_and_test_the_page_names_exists() -> None:
    missing = []
    for decision in decisions.read().values():
        where = f"ADR-{decision.adr} {decision.decision or ''}".strip()
        missing += [f"{where}: no {m}" for m in decision.modules if not (REPO / m).exists()]
        for test in decision.tests:
            path, _, name = test.partition("::")
            if not (REPO / path).is_file() or name not in decisions.test_functions(REPO / path):
                missing.append(f"{where}: no test {test}")
    assert missing == []


def test_each_decision_section_names_its_module_and_says_which_tests_pin_it() -> None:
    bare = [
        f"ADR-{d.adr} {d.decision}"
        for d in decisions.read().values()
        if d.decision and d.decision.startswith("D") and not (d.modules and d.lists_tests)
    ]
    assert bare == []


def test_each_sections_tests_are_exactly_the_tests_marked_with_its_decision() -> None:
    defined = decisions.read()
    marked = decisions.marked_tests()
    disagreeing = {
        f"ADR-{d.adr} {d.decision or ''}".strip(): {
            "listed, not marked": sorted(set(d.tests) - marked.get(d.key, set())),
            "marked, not listed": sorted(marked.get(d.key, set()) - set(d.tests)),
        }
        for d in defined.values()
        if d.lists_tests and set(d.tests) != marked.get(d.key, set())
    }
    # A mark on a probe (ADR-0050 A3) needs only the probe's row; any other needs a listing section.
    unlisted = [
        f"adr({adr!r}, {decision!r})"
        for adr, decision in marked
        if not (decision or "").startswith("A")
        and not defined.get((adr, decision), decisions.Decision(adr, decision)).lists_tests
    ]
    assert (disagreeing, unlisted) == ({}, []), "python -m tests.support.decisions --write"
