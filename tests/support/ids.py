"""Test ids every pytest command line can select: printable ASCII only.

pytest escapes any other character of a parameter's id (`'4821\\x00'`), and an escaped id is not
always selectable again by its node id (`pytest 'file.py::test[postgres-...]'` finds nothing);
mutmut runs each mutant's tests by node id (scripts/mutation.py). So a character outside
printable ASCII, and the backslash, is spelled by its code point instead: `'4821<U+0000>'`.
"""

from __future__ import annotations

PRINTABLE = frozenset(chr(c) for c in range(0x20, 0x7F)) - {"\\"}


def readable(value: object) -> str:
    """`repr(value)` for a str, `value` shown as text for bytes, each character outside
    printable ASCII (and the backslash) written `<U+XXXX>` (a byte: `<0xXX>`)."""
    if isinstance(value, bytes):
        return "b'" + "".join(_byte(b) for b in value) + "'"
    if isinstance(value, str):
        return "'" + "".join(c if c in PRINTABLE else f"<U+{ord(c):04X}>" for c in value) + "'"
    return repr(value)


def _byte(b: int) -> str:
    return chr(b) if chr(b) in PRINTABLE else f"<0x{b:02X}>"


def needs_spelling(value: object) -> bool:
    """A str or bytes value pytest would escape in an id."""
    if isinstance(value, bytes):
        return any(chr(b) not in PRINTABLE for b in value)
    return isinstance(value, str) and any(c not in PRINTABLE for c in value)
