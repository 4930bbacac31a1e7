"""`azurebank token`'s token: HS256 under Auth__SigningKey, naming the user, the local issuer and
audience, valid from now (iat, nbf) for an hour unless told otherwise; refused, naming the key
and the fix, where this host cannot sign."""

from __future__ import annotations

import jwt
import pytest

from shared.identity.tokens import TokenSigningUnavailable, issue_token
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import SIGNING_KEY

REFUSAL = (
    "Auth__SigningKey: not set (or Auth__JwksUrl is set). Fix: set Auth__SigningKey to a random "
    "string of at least 32 characters for local use."
)


def test_a_local_token_names_the_user_and_is_valid_from_now_for_an_hour() -> None:
    clock = FakeClock()
    token = issue_token(load_settings({"Auth__SigningKey": SIGNING_KEY}), clock, "user-1")
    now = int(clock.now().timestamp())
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    claims = jwt.decode(
        token, SIGNING_KEY, algorithms=["HS256"], audience="azurebank", options={"verify_exp": 0}
    )
    assert claims == {
        "sub": "user-1",
        "iss": "azurebank-local",
        "aud": "azurebank",
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
    }


def test_a_host_without_a_signing_key_refuses_naming_the_key_and_the_fix() -> None:
    with pytest.raises(TokenSigningUnavailable) as refused:
        issue_token(load_settings({}), FakeClock(), "user-1")
    assert str(refused.value) == REFUSAL
