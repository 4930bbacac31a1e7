"""What a string must be before SQL sees it, so that every database gives the same answer
(docs/money.md#request-bodies): no NUL, no lone surrogate, and no longer than its column counted
in UTF-16 code units, as SQL Server's nvarchar(n) counts. Refused, a value is the caller's 400
naming its field, never a driver's error (a 500)."""

from __future__ import annotations

from sqlalchemy.orm import InstrumentedAttribute

StringColumn = InstrumentedAttribute[str] | InstrumentedAttribute[str | None]


def column_length(column: StringColumn) -> int:
    """The declared length of a string column (`Str(n)` in shared.db.schema)."""
    length = getattr(column.type, "length", None)
    if not isinstance(length, int):
        raise TypeError(f"{column} has no declared length")
    return length


def unstorable_reason(value: str, max_length: int) -> str | None:
    """Why `value` cannot be stored in or compared with a column of `max_length`; None when it
    can. The reason names a rule, never the value."""
    if "\x00" in value:
        return "must not contain NUL"
    try:
        units = len(value.encode("utf-16-le")) // 2
    except UnicodeEncodeError:
        return "must be valid Unicode text (no lone surrogates)"
    if units > max_length:
        return f"at most {max_length} characters"
    return None
