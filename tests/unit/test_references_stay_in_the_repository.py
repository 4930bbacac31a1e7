"""A reader who clones the repository can follow every reference in it: no code, doc or test
cites a document the repository does not hold (a design handout, a facts or style sheet, an
issue tracker's number, a bare `§N`), every relative markdown link and every path to a file of
the checkout names one that exists (and, for a page's `#anchor`, a heading it has), and every
decision id cited anywhere (`ADR-0050 D4.2`, a bare `D5` beside it) is one docs/decisions.md
defines."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from tests.support import decisions
from tests.support.checkout import REPO

# What is read: every file of the checkout that git would track (the ignored trees are skipped).
ROOTS = (
    "api_funcs",
    "azurebank_cli",
    "bench",
    "docs",
    "relay_func",
    "scripts",
    "shared",
    "tests",
    ".ci",
    ".github",
)
SKIPPED_DIRS = {"__pycache__"}
TEXT = {".py", ".md", ".sh", ".yaml", ".yml", ".json", ".toml", ".ini", ".txt", ".mako", ""}
# This module names the documents it refuses.
SELF = Path(__file__).resolve()

OUTSIDE = re.compile(
    r"\bthe handout\b|\bdesign card\b|\b(?:issues?|acceptance)[\s_#-]*\d+"
    r"|\b(?:DESIGN|FACTS|STYLE|HELPERS)\b",
    re.IGNORECASE,
)
_CAPS_ONLY = ("DESIGN", "FACTS", "STYLE", "HELPERS")
SECTION = re.compile(r"§\s*\d")
# A section sign is the repository's own only when it cites a published standard.
STANDARD_BEFORE = re.compile(r"(?:RFC \d{3,4}|800-63B-4|Art\. \d+(?:\(\d+\))?) $")

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(
    r"(?<![\w/.-])((?:shared|api_funcs|relay_func|azurebank_cli|tests|bench|docs|scripts"
    r"|\.github|\.ci)/[\w/.-]*?\.(?:py|md|sh|toml|json|yaml|yml|txt|ini))(?!\.?\w)(?:#([\w-]+))?"
)
# Files whose paths are examples, not references: the .funcignore matcher's test tries its rules
# on paths that need not exist.
PATHS_AS_DATA = {"tests/unit/test_funcignore_rules.py"}

_ONE = decisions.DECISION_ID
CITATION = re.compile(
    rf"ADR-(\d{{4}})(?:'s)?(?:[ (]+({_ONE}(?:\s*(?:,|/|–|-|and)\s*{_ONE})*))?(?![\w.])"
)
BARE = re.compile(rf"(?<![\w.-])({_ONE})(?![\w])")
RANGE = re.compile(rf"({_ONE})\s*[–-]\s*({_ONE})")


def repository_files() -> Iterator[Path]:
    for path in sorted(REPO.iterdir()):
        if path.is_file() and not path.is_symlink():
            yield path
    for root in ROOTS:
        for folder, dirs, names in os.walk(REPO / root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(names):
                path = Path(folder) / name
                if path.suffix in TEXT and not path.is_symlink() and path.resolve() != SELF:
                    yield path


def _texts() -> Iterator[tuple[str, str]]:
    for path in repository_files():
        yield str(path.relative_to(REPO)), path.read_text(encoding="utf-8")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def outside_references(text: str) -> list[tuple[int, str]]:
    """(line, what) of each reference to a document the repository does not hold."""
    found = [
        (_line(text, m.start()), m.group(0))
        for m in OUTSIDE.finditer(text)
        if not (m.group(0).upper() in _CAPS_ONLY and m.group(0) not in _CAPS_ONLY)
    ]
    found += [
        (_line(text, m.start()), text[max(0, m.start() - 12) : m.end()].strip())
        for m in SECTION.finditer(text)
        if not STANDARD_BEFORE.search(text[max(0, m.start() - 30) : m.start()])
    ]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    lines = page.read_text(encoding="utf-8").splitlines()
    return {slug(line.lstrip("#")) for line in lines if re.match(r"#{1,6} ", line)}


def broken_target(base: Path, target: str) -> str | None:
    """Why `target` (a path, maybe with `#anchor`, relative to `base`) does not resolve."""
    path, _, anchor = target.partition("#")
    resolved = (base / path).resolve() if path else None
    if resolved is None or not resolved.exists():
        return "no such file" if path else None
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"no heading #{anchor}"
    return None


def broken_links(where: str, text: str) -> list[tuple[int, str, str]]:
    found = []
    if where.endswith(".md"):
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if why := broken_target((REPO / where).parent, target):
                found.append((_line(text, m.start()), target, why))
    for m in PATH.finditer(text) if where not in PATHS_AS_DATA else ():
        target = m.group(1) + (f"#{m.group(2)}" if m.group(2) else "")
        if why := broken_target(REPO, target):
            found.append((_line(text, m.start()), target, why))
    return found


def _expand(ids: str) -> list[str]:
    """`D1–D3, D7` → D1, D2, D3, D7."""
    out = []
    for part in re.split(r"\s*(?:,|/|and)\s*", ids):
        if bounds := RANGE.fullmatch(part):
            low, high = bounds.groups()
            if low[0] == high[0] and "." not in low + high:
                out += [f"{low[0]}{n}" for n in range(int(low[1:]), int(high[1:]) + 1)]
                continue
            out += [low, high]
        else:
            out.append(part)
    return out


def undefined_decisions(text: str, defined: set[tuple[str, str | None]]) -> list[tuple[int, str]]:
    """(line, id) of each cited ADR or decision that `defined` lacks. A decision attached to its
    ADR (`ADR-0050 D4.2`, `ADR-0048 D2–D5, D7`) must be that ADR's; a bare one (`D5`, beside an
    ADR cited elsewhere in the text) must be a decision of an ADR the text cites."""
    found = []
    cited: set[str] = set()
    attached: set[int] = set()
    for m in CITATION.finditer(text):
        adr, ids = m.group(1), m.group(2)
        cited.add(adr)
        if (adr, None) not in defined:
            found.append((_line(text, m.start()), f"ADR-{adr}"))
        if ids:
            attached.update(range(m.start(2), m.end(2)))
            found += [
                (_line(text, m.start()), f"ADR-{adr} {d}")
                for d in _expand(ids)
                if (adr, d) not in defined
            ]
    for marker in re.finditer(r"mark\.adr\(\s*\"(\d{4})\"((?:\s*,\s*\"[^\"]+\")*)", text):
        adr = marker.group(1)
        cited.add(adr)
        for d in re.findall(r"\"([^\"]+)\"", marker.group(2)):
            if (adr, d) not in defined:
                found.append((_line(text, marker.start()), f"adr({adr}, {d})"))
    for m in BARE.finditer(text):
        if m.start() in attached:
            continue
        if not any((adr, m.group(1)) in defined for adr in cited):
            found.append((_line(text, m.start()), m.group(1)))
    return found


def test_nothing_cites_a_document_outside_the_repository() -> None:
    found = [
        f"{where}:{line}: {what}"
        for where, text in _texts()
        for line, what in outside_references(text)
    ]
    assert found == [], "write the reason, or point at a file of the repository:\n" + "\n".join(
        found
    )


def test_every_link_and_path_names_a_file_and_heading_that_exist() -> None:
    found = [
        f"{where}:{line}: {target} ({why})"
        for where, text in _texts()
        for line, target, why in broken_links(where, text)
    ]
    assert found == [], "\n".join(found)


def test_every_decision_cited_anywhere_is_defined_in_docs_decisions_md() -> None:
    defined = set(decisions.read())
    found = [
        f"{where}:{line}: {what}"
        for where, text in _texts()
        if where != "docs/decisions.md"
        for line, what in undefined_decisions(text, defined)
    ]
    assert found == [], "define it in docs/decisions.md, or cite what is meant:\n" + "\n".join(
        found
    )
