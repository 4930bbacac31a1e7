"""Bearer tokens: local ones issued (`azurebank token`, HS256 under `Auth__SigningKey` only), and
verified by docs/security.md's rules, production ones against `Auth__JwksUrl`. A claim's value is
checked before any clock comparison and any SQL (docs/security.md#claims)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from shared.clock import Clock
from shared.db.schema import AspNetUser
from shared.db.types import column_length, unstorable_reason
from shared.settings import Settings

if TYPE_CHECKING:
    # PyJWT and its cryptography load with the first token, the JWKS machinery only under
    # Auth__JwksUrl: a request without one (health) needs neither (bench/cold_start.py).
    import jwt

    from shared.identity.jwks import JwksKeys

# The largest NumericDate a datetime can hold (9999-12-31T23:59:59Z). Beyond it a "time" is a
# token that never expires or never starts, not an instant.
NUMERIC_DATE_MAX = 253_402_300_799

# AspNetUsers.Id, the column `sub` is compared with: nvarchar(450) on SQL Server counts UTF-16
# code units, so that is the unit here (PostgreSQL's varchar counts characters, never more).
USER_ID_MAX_UTF16_UNITS = column_length(AspNetUser.Id)

# Used when Auth__Issuer / Auth__Audience are unset; the verifier applies the same defaults.
LOCAL_ISSUER = "azurebank-local"
LOCAL_AUDIENCE = "azurebank"


def numeric_date(value: object) -> int | None:
    """A time claim as whole seconds since the epoch, or None when it is not one."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    # A bool is an int in Python (`True == 1`), and no time.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= NUMERIC_DATE_MAX:
        return None
    return value


def user_id(value: object) -> str | None:
    """`sub` as a key every database stores and compares alike, or None when it is not one."""
    if not isinstance(value, str) or not value or value.endswith(" "):
        return None
    return value if unstorable_reason(value, USER_ID_MAX_UTF16_UNITS) is None else None


class TokenSigningUnavailable(Exception):
    """No Auth__SigningKey, or Auth__JwksUrl is set: this host cannot mint tokens."""


def issue_token(settings: Settings, clock: Clock, user_id: str, *, minutes: int = 60) -> str:
    auth = settings.Auth
    if not auth.SigningKey or auth.JwksUrl:
        raise TokenSigningUnavailable(
            "Auth__SigningKey: not set (or Auth__JwksUrl is set). Fix: set Auth__SigningKey to a "
            "random string of at least 32 characters for local use."
        )
    import jwt

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
    """Verifies a bearer token by docs/security.md's rules and returns its `sub` (AspNetUsers.Id);
    any failure is one answer, `InvalidToken`, carrying nothing about why."""

    LEEWAY_SECONDS = 30  # clock skew tolerated between the token's issuer and this host
    JWKS_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256")
    LOCAL_ALGORITHMS: tuple[str, ...] = ("HS256",)

    def __init__(self, settings: Settings, clock: Clock, *, jwks: JwksKeys | None) -> None:
        auth = settings.Auth
        if bool(auth.JwksUrl) != (jwks is not None):
            raise ValueError("a key set is handed in exactly when Auth__JwksUrl is set")
        self._clock = clock
        self._issuer = auth.Issuer or (None if auth.JwksUrl else LOCAL_ISSUER)
        self._audience = auth.Audience or (None if auth.JwksUrl else LOCAL_AUDIENCE)
        self._signing_key = None if auth.JwksUrl else auth.SigningKey
        self._jwks = jwks

    def verify(self, token: str) -> str:
        if not token or (self._jwks is None and not self._signing_key):
            raise InvalidToken
        import jwt

        try:
            claims = self._decode(token)
        except jwt.PyJWTError:
            raise InvalidToken from None
        self._check_times(claims)
        # Validated here, once, so no value a database cannot store or compare reaches SQL.
        sub = user_id(claims.get("sub"))
        if sub is None:
            raise InvalidToken
        return sub

    def _decode(self, token: str) -> dict[str, Any]:
        import jwt

        key: jwt.PyJWK | str
        algorithms: tuple[str, ...]
        if self._jwks is not None:
            if not self._issuer or not self._audience:
                raise InvalidToken
            kid = jwt.get_unverified_header(token).get("kid")
            found = self._jwks.key(kid) if isinstance(kid, str) and kid else None
            if found is None:
                raise InvalidToken
            # A PyJWK verifies with its own algorithm only, so a header naming HS256 over the
            # RSA public key (algorithm confusion) is refused.
            key, algorithms = found, self.JWKS_ALGORITHMS
        elif self._signing_key:
            key, algorithms = self._signing_key, self.LOCAL_ALGORITHMS
        else:
            raise InvalidToken
        # Times are _check_times's, on the ledger's injected clock rather than PyJWT's wall clock,
        # and as whole numbers: PyJWT's int() would take "123", true and 1.9.
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=list(algorithms),
            audience=self._audience,
            issuer=self._issuer,
            options={
                "require": ["exp", "sub", "iss", "aud"],
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
            },
        )
        return claims

    def _check_times(self, claims: dict[str, Any]) -> None:
        """`exp` required, `nbf` and `iat` optional, with LEEWAY_SECONDS either way."""
        now = self._clock.now().timestamp()
        exp = numeric_date(claims.get("exp"))
        if exp is None or now >= exp + self.LEEWAY_SECONDS:
            raise InvalidToken
        for name in claims.keys() & {"nbf", "iat"}:
            value = numeric_date(claims[name])
            if value is None or now < value - self.LEEWAY_SECONDS:
                raise InvalidToken


class InvalidToken(Exception):
    """The bearer token was not accepted (deliberately without a reason)."""
