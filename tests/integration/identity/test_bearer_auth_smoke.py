"""The bearer dependency accepts a token it minted for an existing user (the full JWT matrix
lives with the identity tests)."""

from __future__ import annotations

from fastapi import APIRouter

from api_funcs.deps import CurrentUser
from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_settings
from tests.support.tokens import bearer
from tests.support.users import make_user


def test_a_valid_local_token_names_its_user_and_a_missing_one_is_401(sqlite_url: str) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock)
    with api_client(sqlite_url, clock) as client:
        router = APIRouter()

        @router.get("/api/whoami")
        def whoami(user_id: CurrentUser) -> dict[str, str]:
            return {"userId": user_id}

        client.app.include_router(router)  # type: ignore[attr-defined]
        ok = client.get(
            "/api/whoami", headers=bearer(host_settings(sqlite_url), clock, user.user_id)
        )
        missing = client.get("/api/whoami")
    assert ok.status_code == 200 and ok.json() == {"userId": user.user_id}
    assert missing.status_code == 401
    assert missing.json()["errorCode"] == "UNAUTHENTICATED"
    assert missing.headers["content-type"] == "application/problem+json"
