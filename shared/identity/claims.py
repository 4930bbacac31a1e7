"""The values a verified token's claims may hold (docs/security.md#claims), decided before any
clock comparison and any SQL: a signature says who wrote a claim, not that its value is usable."""

from __future__ import annotations

import math

from shared.db.schema import AspNetUser
from shared.db.storable_text import column_length, unstorable_reason

# The largest NumericDate a datetime can hold (9999-12-31T23:59:59Z). Beyond it a "time" is a
# token that never expires or never starts, not an instant.
NUMERIC_DATE_MAX = 253_402_300_799

# AspNetUsers.Id, the column `sub` is compared with: nvarchar(450) on SQL Server counts UTF-16
# code units, so that is the unit here (PostgreSQL's varchar counts characters, never more).
USER_ID_MAX_UTF16_UNITS = column_length(AspNetUser.Id)


def numeric_date(value: object) -> int | None:
    """A time claim as whole seconds since the epoch, or None when it is not one."""
    if isinstance(value, bool):  # Python's `True == 1`
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= NUMERIC_DATE_MAX:
        return None
    return value


def user_id(value: object) -> str | None:
    """`sub` as a key every database stores and compares alike, or None when it is not one."""
    if not isinstance(value, str) or not value or value.endswith(" "):
        return None
    return value if unstorable_reason(value, USER_ID_MAX_UTF16_UNITS) is None else None
