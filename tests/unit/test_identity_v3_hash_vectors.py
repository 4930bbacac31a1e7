"""Passwords and PINs in the ASP.NET Core Identity V3 format (docs/security.md#pins-and-passwords),
pinned against the vectors .NET's own PasswordHasher produces and verifies: dotnet/aspnetcore,
src/Identity/test/Identity.Test/PasswordHasherTest.cs (password "my password"; the hasher's RNG
there is sequential, so the salt is bytes 00..0F)."""

from __future__ import annotations

import pytest

from shared.identity.passwords import hash_secret, verify_secret

PLAINTEXT = "my password"
# HashPassword_Version3 / HashPassword_DefaultsToVersion3 in .NET 7+: HMACSHA512, 100,000
# iterations, 128-bit salt 00..0F, 256-bit subkey.
V3_SHA512_100000ITER = (
    "AQAAAAIAAYagAAAAEAABAgMEBQYHCAkKCwwNDg/Q8A0WMKbtHQJQ2DHCdoEeeFBrgNlldq6vH4qX/CGqGQ=="
)
# VerifyHashedPassword_Version3CompatMode_SuccessCases: the header names PRF, iterations and
# salt length, and verification must honour each.
V3_VERIFIES = [
    pytest.param(
        "AQAAAAAAAAD6AAAAEAhftMyfTJylOlZT+eEotFXd1elee8ih5WsjXaR3PA9M",
        id="sha1-250-128salt-128subkey",
    ),
    pytest.param(
        "AQAAAAEAA9CQAAAAIESkQuj2Du8Y+kbc5lcN/W/3NiAZFEm11P27nrSN5/tId+bR1SwV8CO1Jd72r4C08OLvplNlCDc3oQZ8efcW+jQ=",
        id="sha256-250000-256salt-256subkey",
    ),
    pytest.param(
        "AQAAAAIAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHw",
        id="sha512-50-128salt-128subkey",
    ),
    pytest.param(
        "AQAAAAIAAAD6AAAAIJbVi5wbMR+htSfFp8fTw8N8GOS/Sje+S/4YZcgBfU7EQuqv4OkVYmc4VJl9AGZzmRTxSkP7LtVi9IWyUxX8IAAfZ8v+ZfhjCcudtC1YERSqE1OEdXLW9VukPuJWBBjLuw==",
        id="sha512-250-256salt-512subkey",
    ),
    pytest.param(
        "AQAAAAIAACcQAAAAEAABAgMEBQYHCAkKCwwNDg9B0Oxwty+PGIDSp95gcCfzeDvA4sGapUIUov8usXfD6A==",
        id="sha512-10000-128salt-256subkey",
    ),
    pytest.param(V3_SHA512_100000ITER, id="sha512-100000-128salt-256subkey"),
]
# VerifyHashedPassword_FailureCases, V3 payloads.
V3_FAILS = [
    pytest.param(
        "AQAAAAAAAAD6AAAAEAhftMyfTJyAAAAAAAAAAAAAAAAAAAih5WsjXaR3PA9M", id="incorrect-password"
    ),
    pytest.param("AQAAAAIAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4A=", id="too-short"),
    pytest.param(
        "AQAAAAIAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHwAAAAAAAAAAAA",
        id="extra-data-at-end",
    ),
]


def test_hashing_with_the_dotnet_salt_reproduces_dotnets_v3_hash_byte_for_byte() -> None:
    assert hash_secret(PLAINTEXT, salt=bytes(range(16))) == V3_SHA512_100000ITER


@pytest.mark.parametrize("hashed", V3_VERIFIES)
def test_a_hash_made_by_dotnet_verifies_here(hashed: str) -> None:
    assert verify_secret(hashed, PLAINTEXT) is True
    assert verify_secret(hashed, PLAINTEXT + "!") is False


@pytest.mark.parametrize("hashed", V3_FAILS)
def test_a_payload_dotnet_refuses_is_refused_here(hashed: str) -> None:
    assert verify_secret(hashed, PLAINTEXT) is False


@pytest.mark.parametrize(
    "hashed",
    ["", "not base64!", "AAABAgMEBQYHCAkKCwwNDg+ukCEMDf0yyQ29NYubggHIVY0sdEUfdyeM+E1LtH1uJg=="],
)
def test_a_malformed_or_foreign_format_hash_is_a_mismatch_never_an_exception(hashed: str) -> None:
    # The last is .NET's V2 format (marker 0x00): never written here, refused rather than guessed.
    assert verify_secret(hashed, PLAINTEXT) is False


def test_a_pin_hash_is_a_salted_v3_hash_that_never_contains_the_pin() -> None:
    first, second = hash_secret("482193", iterations=1), hash_secret("482193", iterations=1)
    assert first != second  # a fresh salt each time
    assert first.startswith("AQAAAAI")  # V3 marker, PRF 2 (HMACSHA512)
    assert "482193" not in first
    assert verify_secret(first, "482193") and not verify_secret(first, "482194")


@pytest.mark.parametrize("iterations", [2**31, 2**32 - 1, 10_000_001])
def test_a_stored_hash_asking_for_more_work_than_any_hasher_sets_is_a_mismatch(
    iterations: int,
) -> None:
    # A V3 header is read from the database: a count PBKDF2 cannot take (2**31 and up raise
    # OverflowError) or would take minutes over is a malformed hash, answered as a mismatch
    # rather than a 500 or a request that never ends.
    import base64
    import struct

    header = struct.pack(">BIII", 1, 2, iterations, 16)
    stored = base64.b64encode(header + bytes(16) + bytes(32)).decode()
    assert verify_secret(stored, PLAINTEXT) is False
