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


class TokenVerifier:
    """Verifies a bearer token and returns its `sub` (the AspNetUsers.Id).

    Production: RS256/ES256 only, keys from `Auth__JwksUrl`, issuer and audience required.
    Local: HS256 under `Auth__SigningKey`. Any failure is one answer, `InvalidToken`, carrying
    nothing about why (the caller learns no more than that the token was not accepted).
    """

    # Seconds of clock skew tolerated between the token's issuer and this host.
    LEEWAY_SECONDS = 30

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self._clock = clock
        auth = settings.Auth
        self._issuer = auth.Issuer or (None if auth.JwksUrl else LOCAL_ISSUER)
        self._audience = auth.Audience or (None if auth.JwksUrl else LOCAL_AUDIENCE)
        self._signing_key = None if auth.JwksUrl else auth.SigningKey
        self._jwks: jwt.PyJWKClient | None = (
            jwt.PyJWKClient(auth.JwksUrl, cache_keys=True, lifespan=300) if auth.JwksUrl else None
        )

    @property
    def configured(self) -> bool:
        return self._jwks is not None or bool(self._signing_key)

    def verify(self, token: str) -> str:
        if not self.configured or not token:
            raise InvalidToken
        # Times are checked below against the injected clock, not PyJWT's wall clock, so the
        # one clock that runs the ledger also decides when a token has expired.
        options: dict[str, object] = {
            "require": ["exp", "sub", "iss", "aud"],
            "verify_exp": False,
            "verify_nbf": False,
            "verify_iat": False,
        }
        try:
            if self._jwks is not None:
                if not self._issuer or not self._audience:
                    raise InvalidToken
                key: object = self._jwks.get_signing_key_from_jwt(token).key
                algorithms = ["RS256", "ES256"]
            else:
                key = self._signing_key
                algorithms = ["HS256"]
            claims = jwt.decode(
                token,
                key,  # type: ignore[arg-type]
                algorithms=algorithms,
                audience=self._audience,
                issuer=self._issuer,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.PyJWTError:
            raise InvalidToken from None
        now = self._clock.now().timestamp()
        exp, nbf = claims.get("exp"), claims.get("nbf", 0)
        if not isinstance(exp, int | float) or not isinstance(nbf, int | float):
            raise InvalidToken
        if now >= exp + self.LEEWAY_SECONDS or now < nbf - self.LEEWAY_SECONDS:
            raise InvalidToken
        sub = claims.get("sub")
        # No AspNetUsers.Id holds a NUL, and PostgreSQL refuses to compare one (a 500).
        if not isinstance(sub, str) or not sub or "\x00" in sub:
            raise InvalidToken
        return sub


class InvalidToken(Exception):
    """The bearer token was not accepted (deliberately without a reason)."""
