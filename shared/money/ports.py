"""The PIN step-up the money path needs; the audit chain's port is in shared/audit/chain.py."""

from __future__ import annotations

from typing import Protocol


class PinCheck(Protocol):
    def __call__(self, user_id: str, pin: str | None) -> None:
        """Return when `pin` is the user's PIN; raise PIN_REQUIRED, INVALID_PIN or PIN_LOCKED,
        counting a failure durably in its own transaction."""
