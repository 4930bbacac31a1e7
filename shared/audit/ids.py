"""Time-ordered ids for audit rows, minted by the writer before the save (ADR-0052 D5)."""

from __future__ import annotations

import os
import uuid
from datetime import datetime


def uuid7(instant: datetime) -> uuid.UUID:
    """A version-7 UUID (RFC 9562), as .NET's Guid.CreateVersion7(): 48 bits of Unix
    milliseconds from `instant`, then 74 random bits."""
    millis = int(instant.timestamp() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 74 are kept
    rand_a = rand >> 68 & 0xFFF  # 12 bits
    rand_b = rand & ((1 << 62) - 1)  # 62 bits
    value = millis << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return uuid.UUID(int=value)
