"""A bearer token for a test user, signed with the test host's key on the test's clock."""

from __future__ import annotations

from shared.clock import Clock
from shared.identity.tokens import issue_token
from shared.settings import Settings


def bearer(settings: Settings, clock: Clock, user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(settings, clock, user_id)}"}
