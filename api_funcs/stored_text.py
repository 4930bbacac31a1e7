"""The request layer's one text rule for values that reach SQL (shared.db.storable_text): a body
field declares its column with `stored_text`, and a header checks itself with `unstorable_reason`
before anything reads the database, so a value no database can hold is 400 VALIDATION_FAILED
naming its field on every dialect, never a driver's error.

PINs and passwords never reach SQL (they are hashed); what cannot be the secret is answered as a
wrong secret by shared.identity (docs/security.md#pins-and-passwords), and their lengths are body
rules (pin_schema)."""

from __future__ import annotations

from pydantic import AfterValidator

from shared.db.storable_text import StringColumn, column_length, unstorable_reason


def stored_text(column: StringColumn) -> AfterValidator:
    """A pydantic validator: the string is storable in and comparable with `column`."""
    length = column_length(column)

    def storable(value: str) -> str:
        reason = unstorable_reason(value, length)
        if reason is not None:
            raise ValueError(reason)
        return value

    return AfterValidator(storable)
