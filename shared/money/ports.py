"""What the money path needs from its neighbours, as protocols: the PIN step-up
(shared/identity/pins) here, the audit chain's in shared/audit/chain.py. The HTTP edge wires
the real ones."""

from __future__ import annotations

from typing import Protocol


class PinCheck(Protocol):
    def __call__(self, user_id: str, pin: str | None) -> None:
        """Return when `pin` is the user's PIN; raise PIN_REQUIRED, INVALID_PIN or PIN_LOCKED,
        counting a failure durably in its own transaction."""
        ...
