"""shared.db.types: what a caller's string must be before SQL sees it, the same rule on
SQL Server, PostgreSQL and SQLite (no NUL, no lone surrogate, at most the column's length in
UTF-16 code units)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.db.schema import AspNetUser, IdempotencyRecord
from shared.db.types import column_length, unstorable_reason
from shared.money.idempotency import MAX_KEY_LENGTH
from tests.support.ids import readable


def test_each_bound_is_its_columns_declared_length() -> None:
    assert column_length(AspNetUser.AzureTag) == 64
    assert column_length(IdempotencyRecord.Key) == MAX_KEY_LENGTH == 255


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("a\x00", "must not contain NUL"),
        ("\ud800", "must be valid Unicode text (no lone surrogates)"),
        ("tag\udfff", "must be valid Unicode text (no lone surrogates)"),
        ("x" * 65, "at most 64 characters"),
        # 33 characters beyond the BMP: 66 UTF-16 code units, past nvarchar(64).
        ("\U0001f600" * 33, "at most 64 characters"),
    ],
    ids=readable,
)
def test_what_no_database_can_hold_is_refused_with_a_reason_that_never_echoes_it(
    value: str, reason: str
) -> None:
    assert unstorable_reason(value, 64) == reason


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=32))
def test_valid_text_within_the_column_is_storable(value: str) -> None:
    # 32 characters are at most 64 UTF-16 code units, whatever they are.
    assert unstorable_reason(value, 64) is None
