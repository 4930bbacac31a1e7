"""The JWKS key set is fetched at most once a minute on the injected clock, whatever asks for it
(docs/security.md): a token's `kid` is the caller's to choose, so requests must not be able to
make this host fetch at will. Against a real local JWKS endpoint that counts its hits."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shared.bootstrap import bootstrap
from shared.identity.jwks import JwksKeys
from shared.identity.tokens import LOCAL_AUDIENCE, LOCAL_ISSUER, InvalidToken, TokenVerifier
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_environ
from tests.support.jwks import JwksServer, jwks_server
from tests.support.users import make_user

ISSUER = "https://login.azurebank.test/tenant/v2.0"
AUDIENCE = "api://azurebank-functions"
WINDOW = JwksKeys.REFETCH_SECONDS
MAX_AGE = JwksKeys.MAX_AGE_SECONDS


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def server(rsa_key: rsa.RSAPrivateKey) -> Iterator[JwksServer]:
    with jwks_server({"key-1": rsa_key.public_key()}) as state:
        yield state


class Host:
    """A JWKS-mode verifier on the fake clock, and the two outcomes of a token."""

    def __init__(self, url: str, signing_key: rsa.RSAPrivateKey) -> None:
        self.clock = FakeClock()
        self.verifier = _verifier(url, self.clock)
        self.signing_key = signing_key

    def token(self, kid: str = "key-1", key: Any = None, alg: str = "RS256") -> str:
        return _token(self.clock, key or self.signing_key, kid, alg)

    def accepts(self, token: str) -> bool:
        return self.verifier.verify(token) == "some-user"

    def refuses(self, token: str) -> bool:
        return _refused(self.verifier, token)


@pytest.fixture
def host(server: JwksServer, rsa_key: rsa.RSAPrivateKey) -> Host:
    return Host(server.url, rsa_key)


def _environ(url: str, **overrides: str) -> dict[str, str]:
    environ = host_environ("sqlite://", Auth__JwksUrl=url, Auth__Issuer=ISSUER)
    environ["Auth__Audience"] = AUDIENCE
    del environ["Auth__SigningKey"]  # refused beside a JWKS URL (docs/settings.md)
    environ.update(overrides)
    return environ


def _verifier(url: str, clock: FakeClock) -> TokenVerifier:
    return bootstrap(load_settings(_environ(url)), clock=clock).tokens


def _token(clock: FakeClock, key: Any, kid: str, alg: str = "RS256", **overrides: Any) -> str:
    now = int(clock.now().timestamp())
    claims = {"sub": "some-user", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600}
    claims.update(overrides)
    present = {name: value for name, value in claims.items() if value is not None}
    return jwt.encode(present, key, algorithm=alg, headers={"kid": kid})


def _with_header(header: dict[str, Any], claims: dict[str, Any], key: rsa.RSAPrivateKey) -> str:
    """An RS256 token with a header PyJWT would refuse to write (a kid that is not a string)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = jwt.algorithms.RSAAlgorithm(jwt.algorithms.RSAAlgorithm.SHA256).sign(
        signing_input.encode(), key
    )
    return f"{signing_input}.{_b64(signature)}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _refused(verifier: TokenVerifier, token: str) -> bool:
    try:
        verifier.verify(token)
    except InvalidToken:
        return True
    return False


def test_tokens_with_unknown_kids_fetch_the_key_set_at_most_once_a_minute(
    server: JwksServer, host: Host
) -> None:
    assert host.accepts(host.token())
    assert server.hits == 1
    # 600 tokens naming a fresh kid each, over five minutes: one refetch per window at most.
    for i in range(600):
        assert host.refuses(host.token(f"unknown-{uuid.uuid4()}"))
        if i % 2:
            host.clock.advance(1)
    assert server.hits <= 1 + 300 // WINDOW
    # The known key still verifies without a fetch of its own.
    before = server.hits
    assert host.accepts(host.token())
    assert server.hits == before


def test_a_rotated_key_is_picked_up_once_the_window_has_passed(
    server: JwksServer, host: Host
) -> None:
    assert host.accepts(host.token())
    new_key = ec.generate_private_key(ec.SECP256R1())
    server.keys["key-2"] = new_key.public_key()
    rotated = host.token("key-2", new_key, "ES256")
    host.clock.advance(WINDOW - 1)
    assert host.refuses(rotated)  # inside the window: no refetch
    assert server.hits == 1
    host.clock.advance(1)
    assert host.accepts(rotated)  # ES256 from the JWKS, after one refetch
    assert server.hits == 2


def test_a_failing_endpoint_is_asked_at_most_once_a_minute_and_known_keys_keep_working(
    server: JwksServer, host: Host
) -> None:
    assert host.accepts(host.token())
    server.status = 503
    host.clock.advance(MAX_AGE)  # the set is old: the next request refreshes it, and that fails
    for _ in range(100):
        assert host.accepts(host.token())
        assert host.refuses(host.token(f"unknown-{uuid.uuid4()}"))
    assert server.hits == 2
    host.clock.advance(WINDOW)
    for _ in range(100):
        assert host.refuses(host.token(f"unknown-{uuid.uuid4()}"))
    assert server.hits == 3


def test_an_endpoint_failing_from_the_start_is_asked_at_most_once_a_minute(
    server: JwksServer, host: Host
) -> None:
    server.status = 500
    for _ in range(100):
        assert host.refuses(host.token())
    assert server.hits == 1
    server.status = 200
    host.clock.advance(WINDOW)
    assert host.accepts(host.token())
    assert server.hits == 2


def test_a_key_removed_from_the_set_is_refused_once_the_set_is_refreshed(
    server: JwksServer, host: Host
) -> None:
    assert host.accepts(host.token())
    del server.keys["key-1"]  # withdrawn by the identity provider
    host.clock.advance(MAX_AGE)
    assert host.refuses(host.token())


def test_the_jwks_host_refuses_none_confusion_and_missing_issuer_or_audience(
    server: JwksServer, rsa_key: rsa.RSAPrivateKey
) -> None:
    clock = FakeClock()
    verifier = _verifier(server.url, clock)
    assert verifier.verify(_token(clock, rsa_key, "key-1")) == "some-user"
    now = int(clock.now().timestamp())
    full = {"sub": "some-user", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 3600}
    refused = {
        "alg-none": jwt.encode(full, None, algorithm="none", headers={"kid": "key-1"}),
        "no-iss": _token(clock, rsa_key, "key-1", iss=None),
        "no-aud": _token(clock, rsa_key, "key-1", aud=None),
        "wrong-aud-in-a-list": _token(clock, rsa_key, "key-1", aud=["api://other"]),
        "no-kid": jwt.encode(full, rsa_key, algorithm="RS256"),
        "kid-not-a-string": _with_header({"alg": "RS256", "kid": 7}, full, rsa_key),
        "es256-naming-the-rsa-key": _token(
            clock, ec.generate_private_key(ec.SECP256R1()), "key-1", alg="ES256"
        ),
        "ps256": _token(clock, rsa_key, "key-1", alg="PS256"),
    }
    assert {name: _refused(verifier, t) for name, t in refused.items()} == dict.fromkeys(
        refused, True
    )


def test_a_jwks_host_without_issuer_and_audience_refuses_every_token(
    server: JwksServer, rsa_key: rsa.RSAPrivateKey
) -> None:
    clock = FakeClock()
    environ = _environ(server.url)
    del environ["Auth__Issuer"], environ["Auth__Audience"]
    verifier = bootstrap(load_settings(environ), clock=clock).tokens
    assert _refused(verifier, _token(clock, rsa_key, "key-1"))
    assert server.hits == 0


def test_a_token_naming_no_usable_kid_is_refused_without_asking_for_the_key_set(
    server: JwksServer, rsa_key: rsa.RSAPrivateKey
) -> None:
    clock = FakeClock()
    verifier = _verifier(server.url, clock)
    now = int(clock.now().timestamp())
    full = {"sub": "some-user", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 3600}
    tokens = {
        "no-kid": jwt.encode(full, rsa_key, algorithm="RS256"),
        "empty-kid": _token(clock, rsa_key, ""),
        "kid-a-number": _with_header({"alg": "RS256", "kid": 7}, full, rsa_key),
        "kid-a-list": _with_header({"alg": "RS256", "kid": ["key-1"]}, full, rsa_key),
    }
    assert {name: _refused(verifier, t) for name, t in tokens.items()} == dict.fromkeys(
        tokens, True
    )
    assert server.hits == 0


@pytest.mark.parametrize(
    ("unset", "claims"),
    [
        ("Auth__Issuer", {"iss": LOCAL_ISSUER}),
        ("Auth__Audience", {"aud": LOCAL_AUDIENCE}),
    ],
    ids=["no-issuer", "no-audience"],
)
def test_a_jwks_host_missing_issuer_or_audience_refuses_even_the_local_defaults(
    server: JwksServer, rsa_key: rsa.RSAPrivateKey, unset: str, claims: dict[str, str]
) -> None:
    """The local defaults (`azurebank-local`, `azurebank`) are a local host's only: a production
    host missing one refuses every token, one naming the local default too."""
    clock = FakeClock()
    environ = _environ(server.url)
    del environ[unset]
    verifier = bootstrap(load_settings(environ), clock=clock).tokens
    assert _refused(verifier, _token(clock, rsa_key, "key-1", **claims))
    assert server.hits == 0


def test_unknown_kids_through_the_api_answer_401_with_one_fetch_a_minute(
    sqlite_url: str, server: JwksServer, rsa_key: rsa.RSAPrivateKey
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock)
    environ = _environ(server.url, Database__Url=sqlite_url)
    with api_client(sqlite_url, clock, environ) as client:
        for _ in range(50):
            token = _token(clock, rsa_key, f"unknown-{uuid.uuid4()}", sub=user.user_id)
            r = client.get("/api/accounts", headers={"Authorization": f"Bearer {token}"})
            assert (r.status_code, r.json()["errorCode"]) == (401, "UNAUTHENTICATED")
        # ES256 naming the RSA key: refused like any other bad token, not a 500.
        confused = _token(
            clock, ec.generate_private_key(ec.SECP256R1()), "key-1", "ES256", sub=user.user_id
        )
        r = client.get("/api/accounts", headers={"Authorization": f"Bearer {confused}"})
        assert (r.status_code, r.json()["errorCode"]) == (401, "UNAUTHENTICATED")
        assert server.hits == 1
        valid = _token(clock, rsa_key, "key-1", sub=user.user_id)
        r = client.get("/api/accounts", headers={"Authorization": f"Bearer {valid}"})
        assert r.status_code == 200
        assert server.hits == 1
