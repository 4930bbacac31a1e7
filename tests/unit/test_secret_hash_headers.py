"""What verify_secret refuses in a V3 hash's header, as a mismatch and never an exception: a
salt under 128 bits, no iterations, an unknown PRF, another format's marker and a hash with a
stray character, each otherwise a hash of the very secret it is checked against."""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest

from shared.identity import passwords
from shared.identity.passwords import hash_secret, verify_secret

SECRET = "correct horse battery staple"


def _v3(*, marker: int = 1, prf: int = 2, iterations: int = 3, salt: bytes = bytes(16)) -> str:
    """A hash in the V3 layout of SECRET under the header's fields (SHA-512 whatever `prf`)."""
    subkey = hashlib.pbkdf2_hmac("sha512", SECRET.encode(), salt, max(iterations, 1), 32)
    header = struct.pack(">BIII", marker, prf, iterations, len(salt))
    return base64.b64encode(header + salt + subkey).decode()


def test_the_layout_these_tests_write_is_a_hash_that_verifies() -> None:
    assert verify_secret(_v3(), SECRET)
    assert verify_secret(_v3(salt=bytes(range(32))), SECRET)


@pytest.mark.parametrize(
    "hashed",
    [
        _v3(salt=bytes(8)),
        _v3(iterations=0),
        _v3(prf=7),
        _v3(marker=0),
    ],
    ids=["salt-under-128-bits", "no-iterations", "unknown-prf", "another-format-marker"],
)
def test_a_header_outside_the_v3_rules_is_a_mismatch(hashed: str) -> None:
    assert verify_secret(hashed, SECRET) is False


def test_a_hash_with_a_stray_character_is_a_mismatch_not_read_around() -> None:
    hashed = hash_secret(SECRET, iterations=1)
    assert verify_secret(hashed, SECRET)
    assert verify_secret(hashed[:10] + "!" + hashed[10:], SECRET) is False


def test_the_iteration_bound_is_the_most_work_a_stored_hash_may_ask_for_inclusive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real bound (10,000,000) costs seconds of PBKDF2 to verify at; the rule is the same at 5.
    monkeypatch.setattr(passwords, "MAX_ITERATIONS", 5)
    assert verify_secret(_v3(iterations=5), SECRET)
    assert verify_secret(_v3(iterations=6), SECRET) is False
