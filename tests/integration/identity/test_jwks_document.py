"""What this host takes from the identity provider's JWKS document, served by a real local
endpoint: every usable signing key whatever else the document holds (entries that are not keys,
encryption keys, key types it cannot verify with, a `kid` that is not text), a key without `use`
as a signing key, and nothing from a document that is not a JWKS document or an endpoint that
never answers — each failure a warning naming its type, the keys already held kept; and a
verifier is built with a key set exactly when Auth__JwksUrl is set."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.identity.jwks import JwksKeys
from shared.identity.tokens import InvalidToken, TokenVerifier
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import host_environ
from tests.support.jwks import JwksServer, jwks_server, public_jwk

ISSUER = "https://login.azurebank.test/tenant/v2.0"
AUDIENCE = "api://azurebank-functions"


@pytest.fixture(scope="module")
def keys() -> dict[str, rsa.RSAPrivateKey]:
    return {
        name: rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for name in ("signing", "encryption")
    }


@pytest.fixture
def server() -> Iterator[JwksServer]:
    with jwks_server({}) as state:
        yield state


def _verifier(url: str, clock: FakeClock) -> TokenVerifier:
    environ = host_environ("sqlite://", Auth__JwksUrl=url, Auth__Issuer=ISSUER)
    environ["Auth__Audience"] = AUDIENCE
    del environ["Auth__SigningKey"]
    return TokenVerifier(load_settings(environ), clock, jwks=JwksKeys(url, clock))


def _token(clock: FakeClock, key: rsa.RSAPrivateKey, kid: str) -> str:
    now = int(clock.now().timestamp())
    claims = {"sub": "some-user", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def _accepted(verifier: TokenVerifier, token: str) -> bool:
    try:
        return verifier.verify(token) == "some-user"
    except InvalidToken:
        return False


def _jwk(key: rsa.RSAPrivateKey, kid: str, **fields: Any) -> dict[str, Any]:
    entry = {**public_jwk(key.public_key(), kid), **fields}
    return {name: value for name, value in entry.items() if value is not None}


def test_every_signing_key_is_taken_whatever_precedes_it_and_nothing_else(
    server: JwksServer, keys: dict[str, rsa.RSAPrivateKey]
) -> None:
    server.document = {
        "keys": [
            "not a key",
            _jwk(keys["encryption"], "enc-1", use="enc"),
            {"kty": "NOPE", "kid": "odd-1"},
            _jwk(keys["signing"], "sig-1"),
        ]
    }
    clock = FakeClock()
    verifier = _verifier(server.url, clock)
    assert _accepted(verifier, _token(clock, keys["signing"], "sig-1"))
    assert not _accepted(verifier, _token(clock, keys["encryption"], "enc-1"))


def test_a_key_whose_kid_is_not_a_string_is_skipped_and_the_others_are_taken(
    server: JwksServer, keys: dict[str, rsa.RSAPrivateKey]
) -> None:
    server.document = {
        "keys": [
            {**_jwk(keys["encryption"], "enc-1"), "kid": ["enc-1"]},
            _jwk(keys["signing"], "sig-1"),
        ]
    }
    clock = FakeClock()
    verifier = _verifier(server.url, clock)
    assert _accepted(verifier, _token(clock, keys["signing"], "sig-1"))
    assert not _accepted(verifier, _token(clock, keys["encryption"], "['enc-1']"))


def test_a_key_without_use_is_a_signing_key(
    server: JwksServer, keys: dict[str, rsa.RSAPrivateKey]
) -> None:
    server.document = {"keys": [_jwk(keys["signing"], "sig-1", use=None)]}
    clock = FakeClock()
    assert _accepted(_verifier(server.url, clock), _token(clock, keys["signing"], "sig-1"))


@pytest.mark.parametrize(
    ("document", "failure"),
    [({"keys": "sig-1"}, "ValueError"), ([], "PyJWKClientError")],
    ids=["keys-not-a-list", "not-an-object"],
)
def test_a_document_that_is_not_a_jwks_document_is_a_failed_fetch(
    server: JwksServer,
    keys: dict[str, rsa.RSAPrivateKey],
    caplog: pytest.LogCaptureFixture,
    document: object,
    failure: str,
) -> None:
    server.document = document
    clock = FakeClock()
    with caplog.at_level(logging.WARNING, logger="azurebank.auth"):
        assert not _accepted(_verifier(server.url, clock), _token(clock, keys["signing"], "sig-1"))
    assert [r.getMessage() for r in caplog.records if r.name == "azurebank.auth"] == [
        f"JWKS fetch failed ({failure}); keeping 0 known keys; next try in 60 s at the earliest"
    ]


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A port that takes the connection and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/.well-known/jwks.json"


def test_an_endpoint_that_never_answers_costs_one_timeout_then_the_token_is_refused(
    silent_endpoint: str,
    keys: dict[str, rsa.RSAPrivateKey],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(JwksKeys, "TIMEOUT_SECONDS", 1)
    clock = FakeClock()
    verifier = _verifier(silent_endpoint, clock)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="azurebank.auth"):
        assert not _accepted(verifier, _token(clock, keys["signing"], "sig-1"))
    assert time.monotonic() - started < 8
    assert [r.getMessage() for r in caplog.records if r.name == "azurebank.auth"] == [
        "JWKS fetch failed (PyJWKClientConnectionError); keeping 0 known keys;"
        " next try in 60 s at the earliest"
    ]


@pytest.mark.parametrize("jwks_url", [True, False], ids=["url-no-key-set", "key-set-no-url"])
def test_a_verifier_takes_a_key_set_exactly_when_auth_jwks_url_is_set_and_says_so(
    server: JwksServer, jwks_url: bool
) -> None:
    clock = FakeClock()
    environ = host_environ("sqlite://", Auth__JwksUrl=server.url, Auth__Issuer=ISSUER)
    del environ["Auth__SigningKey" if jwks_url else "Auth__JwksUrl"]
    jwks = None if jwks_url else JwksKeys(server.url, clock)
    with pytest.raises(ValueError) as refused:
        TokenVerifier(load_settings(environ), clock, jwks=jwks)
    assert str(refused.value) == "a key set is handed in exactly when Auth__JwksUrl is set"
