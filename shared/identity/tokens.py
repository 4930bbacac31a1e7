"""Issuing local bearer tokens (`azurebank token`): HS256 under `Auth__SigningKey` only.
Production tokens come from the identity provider and are verified against `Auth__JwksUrl`."""

from __future__ import annotations

from datetime import timedelta

import jwt

from shared.clock import Clock
from shared.settings import Settings

# Used when Auth__Issuer / Auth__Audience are unset; the verifier applies the same defaults.
LOCAL_ISSUER = "azurebank-local"
LOCAL_AUDIENCE = "azurebank"


class TokenSigningUnavailable(Exception):
    """No Auth__SigningKey, or Auth__JwksUrl is set: this host cannot mint tokens."""


def issue_token(settings: Settings, clock: Clock, user_id: str, *, minutes: int = 60) -> str:
    auth = settings.Auth
    if not auth.SigningKey or auth.JwksUrl:
        raise TokenSigningUnavailable(
            "Auth__SigningKey: not set (or Auth__JwksUrl is set). Fix: set Auth__SigningKey to a "
            "random string of at least 32 characters for local use."
        )
    now = clock.now()
    claims = {
        "sub": user_id,
        "iss": auth.Issuer or LOCAL_ISSUER,
        "aud": auth.Audience or LOCAL_AUDIENCE,
        "iat": int(now.timestamp()),
        "nbf": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=minutes)).timestamp()),
    }
    return jwt.encode(claims, auth.SigningKey, algorithm="HS256")
