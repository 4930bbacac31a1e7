"""Whether a user's `Email` can stand as a notice's `To`: an unusable one is an outcome at Warning,
never a crash (docs/decisions.md#adr-0048-d7), and the address goes into no outcome or log line."""

from __future__ import annotations

import enum
from email import policy
from email.headerregistry import BaseHeader, HeaderRegistry
from typing import Any


class _HeaderClassCache(HeaderRegistry):
    """The standard registry, building each header's class once (by lower-cased name) rather than
    with `type()` for every header it parses, a large share of a notice's rendering
    (bench/README.md, Relay); tests/unit/test_notice_render.py pins the same bytes."""

    def __init__(self) -> None:
        super().__init__()
        self._classes: dict[str, type[BaseHeader]] = {}

    def __getitem__(self, name: str) -> type[BaseHeader]:
        key = name.lower()
        built = self._classes.get(key)
        if built is None:
            # setdefault: two threads that race here both get the first class stored.
            built = self._classes.setdefault(key, super().__getitem__(name))
        return built

    def map_to_type(self, name: str, cls: type[BaseHeader]) -> None:
        super().map_to_type(name, cls)
        self._classes.pop(name.lower(), None)  # a remapped name builds its new class next time


# The policy the renderer writes with, so "usable" means "this renderer can write it":
# SMTPUTF8, with nothing changed but where header classes come from.
MESSAGE_POLICY = policy.SMTPUTF8.clone(header_factory=_HeaderClassCache())

# RFC 5321 §4.5.3.1.3: a path is at most 256 octets including the angle brackets.
_MAX_ADDRESS = 254


class AddressProblem(enum.StrEnum):
    """Why an address is unusable; safe to log, since it names no part of the address."""

    MISSING = "missing"  # no Email on the user's row
    BLANK = "blank"  # an Email of whitespace only
    INVALID = "invalid"  # not one bare addr-spec this renderer can write


def address_problem(raw: str | None) -> AddressProblem | None:
    """None when `raw` (stripped) is one plain addr-spec; otherwise why it is not."""
    if raw is None:
        return AddressProblem.MISSING
    value = raw.strip()
    if not value:
        return AddressProblem.BLANK
    if len(value) > _MAX_ADDRESS or any(ord(c) < 0x20 or c == "\x7f" for c in value):
        return AddressProblem.INVALID
    local, at, domain = value.rpartition("@")
    if not at or not local or not domain:
        return AddressProblem.INVALID
    try:
        header = MESSAGE_POLICY.header_factory("To", value)
    except Exception:  # the parser raises IndexError and friends on some malformed input
        return AddressProblem.INVALID
    addresses: tuple[Any, ...] = tuple(getattr(header, "addresses", ()))
    # One address, no defect, and the addr-spec as given: a display name, a list or a repaired
    # form would mean the renderer writes something other than the row holds.
    if header.defects or len(addresses) != 1 or addresses[0].addr_spec != value:
        return AddressProblem.INVALID
    return None
