"""The values a signed token's claims may hold (docs/security.md): time claims are whole numbers
judged by the injected clock, `exp` is required, and a `sub` is refused before any SQL unless
every database can store and compare it. A token signed with the configured key but holding any
other value gets the one 401 UNAUTHENTICATED answer, on SQLite and on PostgreSQL, never a 500."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest

from shared.bootstrap import bootstrap
from shared.identity.tokens import LOCAL_AUDIENCE, LOCAL_ISSUER, InvalidToken, TokenVerifier
from tests.support.clock import FakeClock
from tests.support.hosts import SIGNING_KEY, api_client, host_settings
from tests.support.users import make_user

LEEWAY = TokenVerifier.LEEWAY_SECONDS


def _sign(claims: dict[str, Any]) -> str:
    # json.dumps writes NaN/Infinity literals and \udxxx escapes as a hostile client would.
    return jwt.encode(claims, SIGNING_KEY, algorithm="HS256")


def _claims(clock: FakeClock, sub: str, **overrides: Any) -> dict[str, Any]:
    now = int(clock.now().timestamp())
    claims: dict[str, Any] = {
        "sub": sub,
        "iss": LOCAL_ISSUER,
        "aud": LOCAL_AUDIENCE,
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not _ABSENT}


_ABSENT = object()


def _time_cases(now: int) -> dict[str, dict[str, Any]]:
    """Each refused time value, by name: the overrides of an otherwise valid token."""
    cases: dict[str, dict[str, Any]] = {"missing-exp": {"exp": _ABSENT}}
    bad_values: dict[str, Any] = {
        "nan": math.nan,
        "infinity": math.inf,
        "minus-infinity": -math.inf,
        "true": True,
        "false": False,
        "string": str(now + 600),
        "huge-int": 10**30,
        "very-huge-int": 10**400,
        "fraction": now + 600.5,
        "null": None,
        "list": [now + 600],
    }
    for claim in ("exp", "nbf", "iat"):
        for name, value in bad_values.items():
            cases[f"{claim}-{name}"] = {claim: value}
    # 1e400 is +Infinity once a JSON parser reads it: written into the payload by hand below.
    cases["exp-1e400"] = {"exp": _Literal("1e400")}
    cases["nbf-1e400"] = {"nbf": _Literal("1e400")}
    cases["iat-1e400"] = {"iat": _Literal("1e400")}
    cases["nbf-in-the-future-beyond-leeway"] = {"nbf": now + LEEWAY + 1, "exp": now + 3600}
    cases["iat-in-the-future-beyond-leeway"] = {"iat": now + LEEWAY + 1, "exp": now + 3600}
    cases["expired-beyond-leeway"] = {"iat": now - 3600, "nbf": now - 3600, "exp": now - LEEWAY}
    return cases


class _Literal:
    """A JSON number written as its text (a value Python's json.dumps cannot produce)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _sign_with_literals(claims: dict[str, Any]) -> str:
    literals = {k: v.text for k, v in claims.items() if isinstance(v, _Literal)}
    if not literals:
        return _sign(claims)
    plain = {k: v for k, v in claims.items() if not isinstance(v, _Literal)}
    text = json.dumps(plain)[:-1] + "".join(f', "{k}": {v}' for k, v in literals.items()) + "}"
    return jwt.api_jws.encode(text.encode(), SIGNING_KEY, algorithm="HS256")


# The sub values no database can hold or compare the same way: lone surrogates (no UTF-8
# encoding), NUL (PostgreSQL refuses it), longer than AspNetUsers.Id (nvarchar(450)), empty.
def _sub_cases(user_id: str) -> dict[str, str]:
    return {
        "lone-high-surrogate": "\ud800",
        "real-id-then-lone-low-surrogate": user_id + "\udfff",
        "surrogate-in-the-middle": user_id[:4] + "\udc80" + user_id[4:],
        "nul": user_id + "\x00",
        "longer-than-the-column": "a" * 451,
        "astral-characters-beyond-450-utf16-units": "\U0001f600" * 226,
        "empty": "",
        "trailing-space": user_id + " ",
    }


@pytest.mark.parametrize("case", sorted(_time_cases(0)))
def test_a_time_claim_that_is_not_a_whole_number_in_range_is_refused(case: str) -> None:
    clock = FakeClock()
    verifier = bootstrap(host_settings("sqlite://"), clock=clock).tokens
    overrides = _time_cases(int(clock.now().timestamp()))[case]
    token = _sign_with_literals(_claims(clock, "some-user", **overrides))
    with pytest.raises(InvalidToken):
        verifier.verify(token)


# Every case, SQL Server's among them: a trailing space it ignores when it compares ("id " finds
# the user "id"), which SQLite and PostgreSQL would only fail to find.
@pytest.mark.parametrize("case", sorted(_sub_cases("")))
def test_a_sub_no_database_can_compare_is_refused_by_the_verifier(case: str) -> None:
    clock = FakeClock()
    verifier = bootstrap(host_settings("sqlite://"), clock=clock).tokens
    token = _sign(_claims(clock, _sub_cases("0f8fad5b-d9cb-469f-a165-70867728950e")[case]))
    with pytest.raises(InvalidToken):
        verifier.verify(token)


def test_whole_numbers_near_now_are_accepted_as_time_claims() -> None:
    """The edges: a float with no fraction is a whole number; iat/nbf within the leeway pass."""
    clock = FakeClock()
    verifier = bootstrap(host_settings("sqlite://"), clock=clock).tokens
    now = int(clock.now().timestamp())
    for overrides in (
        {},
        {"exp": float(now + 600)},
        {"nbf": now + LEEWAY, "iat": now + LEEWAY},
        {"nbf": _ABSENT, "iat": _ABSENT},
        {"exp": now - LEEWAY + 1},
    ):
        assert verifier.verify(_sign(_claims(clock, "some-user", **overrides))) == "some-user"


@pytest.mark.parametrize(
    "start",
    [datetime(2001, 1, 1, tzinfo=UTC), datetime(2101, 1, 1, tzinfo=UTC)],
    ids=["behind-the-wall-clock", "ahead-of-the-wall-clock"],
)
def test_a_tokens_times_are_judged_by_the_injected_clock_not_the_wall_clock(
    start: datetime,
) -> None:
    clock = FakeClock(start)
    verifier = bootstrap(host_settings("sqlite://"), clock=clock).tokens
    assert verifier.verify(_sign(_claims(clock, "some-user"))) == "some-user"


def test_the_epoch_and_the_last_second_of_9999_are_instants_a_token_may_name() -> None:
    clock = FakeClock()
    verifier = bootstrap(host_settings("sqlite://"), clock=clock).tokens
    # 253,402,300,799: 9999-12-31T23:59:59Z, the last second a datetime holds.
    claims = _claims(clock, "some-user", nbf=0, iat=0, exp=253_402_300_799)
    assert verifier.verify(_sign(claims)) == "some-user"


def _outcomes(client: Any, tokens: dict[str, str]) -> dict[str, tuple[int, str | None]]:
    outcomes = {}
    for name, token in tokens.items():
        response = client.get("/api/accounts", headers={"Authorization": f"Bearer {token}"})
        code = response.json().get("errorCode") if response.status_code >= 400 else None
        outcomes[name] = (response.status_code, code)
    return outcomes


def _refused(tokens: dict[str, str]) -> dict[str, tuple[int, str | None]]:
    return {name: (401, "UNAUTHENTICATED") for name in tokens}


def test_a_signed_token_with_a_bad_time_claim_gets_401_from_the_api(db_url: str) -> None:
    clock = FakeClock()
    user = make_user(db_url, clock)
    now = int(clock.now().timestamp())
    build: Callable[[dict[str, Any]], str] = _sign_with_literals
    tokens = {
        name: build(_claims(clock, user.user_id, **overrides))
        for name, overrides in _time_cases(now).items()
    }
    with api_client(db_url, clock) as client:
        valid = _sign(_claims(clock, user.user_id))
        assert _outcomes(client, {"valid": valid}) == {"valid": (200, None)}
        assert _outcomes(client, tokens) == _refused(tokens)


def test_a_signed_token_with_a_sub_no_database_can_compare_gets_401_from_the_api(
    db_url: str,
) -> None:
    clock = FakeClock()
    user = make_user(db_url, clock)
    tokens = {name: _sign(_claims(clock, sub)) for name, sub in _sub_cases(user.user_id).items()}
    with api_client(db_url, clock) as client:
        assert _outcomes(client, tokens) == _refused(tokens)
