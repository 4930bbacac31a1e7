"""What another writer of the chain must reproduce bit for bit: the RowHash of a row as stored
(the pinned vector, through the same mapping `audit verify` recomputes), the Details text of
values JSON cannot hold, and the layout of a minted Id (48 bits of milliseconds, the version and
variant, 74 random bits)."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from shared.audit.chain import AuditChain, render_details, uuid7
from shared.db.schema import AuditEvent

KEY = b"k" * 32
# tests/unit/test_audit_chain_hash.py pins this digest for the same fields, given one by one.
PINNED = "d328699250f21f95de14480d5502e61ff81215c6b11d340ddc78b62327394b8b"
STORED = AuditEvent(
    Id=uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"),
    Sequence=1,
    PayloadVersion=1,
    ActorUserId="user-1",
    Event="PinEnrolled",
    OccurredAt=datetime(2026, 9, 7, 12, 0, 0, 123456, tzinfo=UTC),
    Details=None,
    PreviousHash=bytes(32),
)


def test_the_hash_of_a_stored_row_is_the_pinned_vector() -> None:
    assert AuditChain(KEY).hash_of(STORED).hex() == PINNED


@pytest.mark.parametrize(
    ("column", "other"),
    [("Sequence", 2), ("PreviousHash", b"\x01" * 32), ("Details", "{}"), ("Event", "PinChanged")],
)
def test_the_hash_of_a_stored_row_covers_each_column(column: str, other: object) -> None:
    assert AuditChain(KEY).hash_of(_stored(**{column: other})).hex() != PINNED


def _columns() -> list[str]:
    return [c.key for c in AuditEvent.__table__.columns if c.key != "RowHash"]


def test_details_render_values_json_cannot_hold_as_their_text() -> None:
    transaction = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100")
    assert render_details({"amount": Decimal("10.50"), "transactionId": transaction, "n": 1}) == (
        '{"amount":"10.50","n":1,"transactionId":"0f0e0d0c-0b0a-4908-8706-050403020100"}'
    )


def test_a_key_shorter_than_32_bytes_is_refused_saying_so() -> None:
    with pytest.raises(ValueError, match=r"^the audit chain key must be at least 32 bytes$"):
        AuditChain(b"k" * 31)
    AuditChain(b"k" * 32)  # the shortest key it takes


def test_a_minted_id_holds_the_instants_milliseconds_the_version_and_74_random_bits() -> None:
    instant = datetime(2026, 9, 7, 12, 0, 0, 123456, tzinfo=UTC)
    millis = int(instant.timestamp() * 1000)
    ids = [uuid7(instant).int for _ in range(200)]
    random_bits = (0xFFF << 64) | ((1 << 62) - 1)
    for value in ids:
        assert value >> 80 == millis
        assert (value >> 76) & 0xF == 7  # version
        assert (value >> 62) & 0b11 == 0b10  # variant (RFC 9562)
    # Every random bit is 1 in some id and 0 in another (a chance of 2**-199 each to fail).
    ones = zero_somewhere = 0
    for value in ids:
        ones |= value
        zero_somewhere |= ~value
    assert ones & random_bits == random_bits
    assert zero_somewhere & random_bits == random_bits


def test_a_naive_instant_is_refused_saying_it_must_carry_its_zone() -> None:
    with pytest.raises(ValueError, match=r"^OccurredAt must be timezone-aware$"):
        AuditChain(KEY).hash_of(_stored(OccurredAt=datetime(2026, 9, 7, 12, 0)))


def test_the_instant_is_hashed_as_utc_whatever_the_hosts_time_zone() -> None:
    # The same instant written from another zone, on a host whose local zone is not UTC either.
    india = timezone(timedelta(hours=5, minutes=30))
    row = _stored(OccurredAt=datetime(2026, 9, 7, 17, 30, 0, 123456, tzinfo=india))
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        assert AuditChain(KEY).hash_of(row).hex() == PINNED
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def _stored(**columns: object) -> AuditEvent:
    return AuditEvent(**{**{c: getattr(STORED, c) for c in _columns()}, **columns})
