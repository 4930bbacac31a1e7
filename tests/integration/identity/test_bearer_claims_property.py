"""Property: a token signed with the configured key, whose registered claims (sub, exp, nbf, iat,
iss, aud) hold arbitrary JSON values, is either accepted (only when every claim follows
docs/security.md) or refused with InvalidToken; never any other exception. Through the API on
SQLite and PostgreSQL, where `sub` reaches SQL: 200 only for the valid token, otherwise the one
401 UNAUTHENTICATED answer, never a 5xx."""

from __future__ import annotations

import json
import math
from typing import Any

import jwt
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shared.bootstrap import bootstrap
from shared.identity.tokens import LOCAL_AUDIENCE, LOCAL_ISSUER, InvalidToken, TokenVerifier
from tests.support.clock import FakeClock
from tests.support.hosts import SIGNING_KEY, api_client, host_settings
from tests.support.users import make_user

CLOCK = FakeClock()
NOW = int(CLOCK.now().timestamp())
LEEWAY = TokenVerifier.LEEWAY_SECONDS
# The documented rules, restated here as the oracle (docs/security.md).
LATEST_INSTANT = 253_402_300_799  # 9999-12-31T23:59:59Z
USER_ID_UTF16_UNITS = 450  # AspNetUsers.Id nvarchar(450)
ABSENT = object()

# Any character, surrogates and NUL included (hypothesis leaves out surrogates by default).
ANY_CHAR = st.characters(exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=12)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=6,
)


def _times() -> st.SearchStrategy[object]:
    near = st.integers(NOW - 2 * 3600, NOW + 2 * 3600)
    return st.one_of(
        st.just(ABSENT),
        near,
        near.map(float),
        near.map(lambda t: t + 0.5),
        near.map(str),
        st.integers(LATEST_INSTANT - 2, LATEST_INSTANT + 2),
        st.integers(min_value=10**18) | st.integers(max_value=0),
        st.sampled_from([math.nan, math.inf, -math.inf, True, False]),
        JSON,
    )


def _subs(user_id: str) -> st.SearchStrategy[object]:
    long_ids = st.builds(
        lambda n, c: c * n, st.integers(440, 460), st.sampled_from(["a", "é", "\U0001f600"])
    )
    return st.one_of(
        st.just(ABSENT),
        ANY_TEXT.map(lambda tail: user_id + tail),
        ANY_TEXT.map(lambda head: head + user_id),
        ANY_TEXT,
        long_ids,
        JSON,
    )


def _mostly(valid: object, other: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """The valid value three times in four, so whole tokens are often valid but for one claim
    (the case that shows what exactly is refused) and sometimes valid throughout."""
    return st.tuples(st.integers(0, 3), other).map(lambda t: valid if t[0] else t[1])


def _claims(user_id: str) -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries(
        {
            "sub": _mostly(user_id, _subs(user_id)),
            "exp": _mostly(NOW + 600, _times()),
            "nbf": _mostly(NOW, _times()),
            "iat": _mostly(NOW, _times()),
            "iss": _mostly(LOCAL_ISSUER, st.one_of(st.just(ABSENT), ANY_TEXT, JSON)),
            "aud": _mostly(
                LOCAL_AUDIENCE,
                st.one_of(
                    st.just([LOCAL_AUDIENCE]),
                    st.just(ABSENT),
                    st.lists(st.just(LOCAL_AUDIENCE) | ANY_TEXT | JSON, max_size=3),
                    JSON,
                ),
            ),
        }
    ).map(lambda claims: {k: v for k, v in claims.items() if v is not ABSENT})


def _whole_seconds(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer() and 0 <= value <= LATEST_INSTANT
    return isinstance(value, int) and 0 <= value <= LATEST_INSTANT


def _storable_id(value: object) -> bool:
    if not isinstance(value, str) or not value or "\x00" in value or value.endswith(" "):
        return False
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        return False
    return sum(2 if ord(c) > 0xFFFF else 1 for c in value) <= USER_ID_UTF16_UNITS


def _valid(claims: dict[str, Any]) -> bool:
    exp = claims.get("exp")
    if not _whole_seconds(exp) or exp + LEEWAY <= NOW:  # type: ignore[operator]
        return False
    for name in ("nbf", "iat"):
        if name in claims and (not _whole_seconds(claims[name]) or claims[name] - LEEWAY > NOW):
            return False
    aud = claims.get("aud")
    audience_ok = aud == LOCAL_AUDIENCE or (
        isinstance(aud, list) and all(isinstance(a, str) for a in aud) and LOCAL_AUDIENCE in aud
    )
    return audience_ok and claims.get("iss") == LOCAL_ISSUER and _storable_id(claims.get("sub"))


def _sign(claims: dict[str, Any]) -> str:
    # The payload written by json.dumps (NaN/Infinity literals, \udxxx escapes), not by
    # jwt.encode, which refuses to write some of these values itself.
    return jwt.api_jws.encode(json.dumps(claims).encode(), SIGNING_KEY, algorithm="HS256")


USER_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
VERIFIER = bootstrap(host_settings("sqlite://"), clock=CLOCK).tokens


@settings(max_examples=300, deadline=None)
@given(claims=_claims(USER_ID))
def test_the_verifier_accepts_only_valid_claims_and_refuses_the_rest_with_invalid_token(
    claims: dict[str, Any],
) -> None:
    try:
        accepted: str | None = VERIFIER.verify(_sign(claims))
    except InvalidToken:
        accepted = None
    event("accepted" if accepted is not None else "refused")
    assert (accepted is not None) == _valid(claims), claims
    if accepted is not None:
        assert accepted == claims["sub"]


def test_the_api_answers_200_only_for_valid_claims_and_401_otherwise_never_5xx(
    db_url: str,
) -> None:
    user = make_user(db_url, CLOCK)

    with api_client(db_url, CLOCK) as client:

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(claims=_claims(user.user_id))
        def check(claims: dict[str, Any]) -> None:
            response = client.get(
                "/api/accounts", headers={"Authorization": f"Bearer {_sign(claims)}"}
            )
            if _valid(claims) and claims["sub"] == user.user_id:
                assert response.status_code == 200, claims
            else:
                assert response.status_code == 401, (response.status_code, claims)
                assert response.json()["errorCode"] == "UNAUTHENTICATED"

        check()
