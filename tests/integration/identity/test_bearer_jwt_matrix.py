"""The bearer matrix on `GET /api/accounts` gives 200 only for the valid
token, on a local host (HS256 under Auth__SigningKey) and on a production-shaped host (RS256
keys from a JWKS document served by a real HTTP server on 127.0.0.1). Every refusal is the same
401 UNAUTHENTICATED body, saying nothing about why."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.identity.tokens import LOCAL_AUDIENCE, LOCAL_ISSUER
from tests.support.clock import FakeClock
from tests.support.hosts import SIGNING_KEY, api_client, host_environ
from tests.support.jwks import jwks_server
from tests.support.leak_watch import LeakWatch
from tests.support.users import make_user

ISSUER = "https://login.azurebank.test/tenant/v2.0"
AUDIENCE = "api://azurebank-functions"
KID = "test-key-1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def jwks_url(rsa_key: rsa.RSAPrivateKey) -> Iterator[str]:
    """A JWKS document on a real local HTTP server (the production fetch path)."""
    with jwks_server({KID: rsa_key.public_key()}) as server:
        yield server.url


def _claims(
    clock: FakeClock, sub: str, issuer: str, audience: str, **overrides: Any
) -> dict[str, Any]:
    now = int(clock.now().timestamp())
    claims = {"sub": sub, "iss": issuer, "aud": audience, "iat": now, "nbf": now, "exp": now + 600}
    claims.update(overrides)
    return claims


# Each case: (name, builds a token from (sign, claims-for, clock, user_id, extras)).
Signer = Callable[[dict[str, Any]], str]


def _cases(
    sign: Signer, claims_for: Callable[..., dict[str, Any]], clock: FakeClock, user_id: str
) -> dict[str, str]:
    now = int(clock.now().timestamp())
    return {
        "valid": sign(claims_for(user_id)),
        "expired": sign(claims_for(user_id, iat=now - 3600, nbf=now - 3600, exp=now - 120)),
        "not-yet-valid": sign(claims_for(user_id, nbf=now + 120, exp=now + 3600)),
        "wrong-audience": sign(claims_for(user_id, aud="api://someone-else")),
        "wrong-issuer": sign(claims_for(user_id, iss="https://evil.example/")),
        "alg-none": _unsigned({"alg": "none", "typ": "JWT"}, claims_for(user_id)) + ".",
        "unknown-user": sign(claims_for(str(uuid.uuid4()))),
        "no-sub": sign({k: v for k, v in claims_for(user_id).items() if k != "sub"}),
        "malformed": "not.a.jwt",
    }


def _assert_matrix(client: Any, tokens: dict[str, str], watch: LeakWatch) -> None:
    outcomes = {}
    bodies = set()
    for name, token in tokens.items():
        watch.secret("token", token)
        response = watch.saw(
            client.get("/api/accounts", headers={"Authorization": f"Bearer {token}"})
        )
        outcomes[name] = response.status_code
        if response.status_code == 401:
            body = response.json()
            assert body["errorCode"] == "UNAUTHENTICATED"
            assert response.headers["content-type"] == "application/problem+json"
            bodies.add((body["title"], body["type"]))
    missing = watch.saw(client.get("/api/accounts"))
    assert outcomes == {name: 200 if name == "valid" else 401 for name in tokens}
    assert missing.status_code == 401
    assert len(bodies) == 1  # one answer for every reason: nothing about why


def test_the_local_hs256_matrix_gives_200_only_for_the_valid_token(
    sqlite_url: str, leak_watch: LeakWatch
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock)
    leak_watch.secret("signing key", SIGNING_KEY)
    leak_watch.start()

    def sign(claims: dict[str, Any]) -> str:
        return jwt.encode(claims, SIGNING_KEY, algorithm="HS256")

    def claims_for(sub: str, **overrides: Any) -> dict[str, Any]:
        return _claims(clock, sub, LOCAL_ISSUER, LOCAL_AUDIENCE, **overrides)

    tokens = _cases(sign, claims_for, clock, user.user_id)
    tokens["other-key"] = jwt.encode(claims_for(user.user_id), "x" * 48, algorithm="HS256")
    with api_client(sqlite_url, clock) as client:
        _assert_matrix(client, tokens, leak_watch)
    leak_watch.assert_clean()


def test_the_jwks_matrix_gives_200_only_for_the_valid_rs256_token_and_refuses_hs256(
    sqlite_url: str, jwks_url: str, rsa_key: rsa.RSAPrivateKey, leak_watch: LeakWatch
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock)
    environ = host_environ(sqlite_url, Auth__JwksUrl=jwks_url, Auth__Issuer=ISSUER)
    environ["Auth__Audience"] = AUDIENCE
    del environ["Auth__SigningKey"]  # refused beside a JWKS URL (docs/settings.md)
    leak_watch.start()

    def sign(claims: dict[str, Any]) -> str:
        return jwt.encode(claims, rsa_key, algorithm="RS256", headers={"kid": KID})

    def claims_for(sub: str, **overrides: Any) -> dict[str, Any]:
        return _claims(clock, sub, ISSUER, AUDIENCE, **overrides)

    tokens = _cases(sign, claims_for, clock, user.user_id)
    # The algorithm-confusion attack: HS256 "signed" with the public key's PEM as the secret,
    # naming the JWKS key, so a verifier that trusted the header's alg would accept it.
    pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = _unsigned({"alg": "HS256", "typ": "JWT", "kid": KID}, claims_for(user.user_id))
    tokens["hs256-on-a-jwks-host"] = (
        signing_input + "." + _b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())
    )
    tokens["hs256-under-the-local-key"] = jwt.encode(
        claims_for(user.user_id), SIGNING_KEY, algorithm="HS256", headers={"kid": KID}
    )
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tokens["another-rsa-key"] = jwt.encode(
        claims_for(user.user_id), other, algorithm="RS256", headers={"kid": KID}
    )
    with api_client(sqlite_url, clock, environ) as client:
        _assert_matrix(client, tokens, leak_watch)
    leak_watch.assert_clean()


def test_time_claims_are_judged_by_the_injected_clock_with_thirty_seconds_leeway(
    sqlite_url: str,
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock)
    token = jwt.encode(
        _claims(clock, user.user_id, LOCAL_ISSUER, LOCAL_AUDIENCE), SIGNING_KEY, algorithm="HS256"
    )
    headers = {"Authorization": f"Bearer {token}"}
    with api_client(sqlite_url, clock) as client:
        assert client.get("/api/accounts", headers=headers).status_code == 200
        clock.advance(timedelta(seconds=600 + 29))
        assert client.get("/api/accounts", headers=headers).status_code == 200
        clock.advance(timedelta(seconds=2))
        assert client.get("/api/accounts", headers=headers).status_code == 401
