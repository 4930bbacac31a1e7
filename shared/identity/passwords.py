"""Password and PIN hashes in the ASP.NET Core Identity V3 format
(docs/security.md#pins-and-passwords), so this app and the .NET API verify each other's hashes.

Layout (then base64): 0x01 | PRF (uint32 BE: 0 SHA1, 1 SHA256, 2 SHA512) | iterations (uint32 BE)
| salt length (uint32 BE) | salt | subkey (PBKDF2 output, 32 bytes)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct

_FORMAT_V3 = 0x01
_PRFS = {0: "sha1", 1: "sha256", 2: "sha512"}
# .NET 7+ PasswordHasher defaults: HMACSHA512, 100,000 iterations, 128-bit salt, 256-bit subkey.
DEFAULT_PRF = 2
DEFAULT_ITERATIONS = 100_000
# The most work a stored hash may ask for: 100 times the default, above any work factor a hasher
# is configured with, and ~10 s of PBKDF2; beyond it (PBKDF2 refuses 2**31 and up) the header is
# malformed, not a reason to spend a request's minutes.
MAX_ITERATIONS = 10_000_000
_SALT_BYTES = 16
_SUBKEY_BYTES = 32


def hash_secret(
    secret: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> str:
    """A V3 hash of `secret` (a password or a PIN) with a fresh random salt."""
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    subkey = hashlib.pbkdf2_hmac(
        _PRFS[DEFAULT_PRF], secret.encode("utf-8"), salt, iterations, _SUBKEY_BYTES
    )
    header = struct.pack(">BIII", _FORMAT_V3, DEFAULT_PRF, iterations, len(salt))
    return base64.b64encode(header + salt + subkey).decode("ascii")


def verify_secret(hashed: str | None, secret: str) -> bool:
    """True when `secret` matches the V3 hash; compares in constant time. A malformed or
    foreign-format hash is a mismatch, never an exception."""
    if not hashed:
        return False
    try:
        raw = base64.b64decode(hashed, validate=True)
        marker, prf, iterations, salt_len = struct.unpack(">BIII", raw[:13])
    except (ValueError, struct.error):
        return False
    if marker != _FORMAT_V3 or prf not in _PRFS or salt_len < 16:
        return False
    if not 1 <= iterations <= MAX_ITERATIONS:
        return False
    salt = raw[13 : 13 + salt_len]
    expected = raw[13 + salt_len :]
    if len(salt) != salt_len or len(expected) < 16:
        return False
    actual = hashlib.pbkdf2_hmac(
        _PRFS[prf], secret.encode("utf-8"), salt, iterations, len(expected)
    )
    return hmac.compare_digest(actual, expected)
