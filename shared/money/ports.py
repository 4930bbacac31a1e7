"""What the money path needs from its neighbours, as protocols: the audit chain (shared/audit)
and the PIN step-up (shared/identity/pins). The HTTP edge wires the real ones."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from shared.audit.chain import SealedAuditRow


class AuditAppender(Protocol):
    def append(
        self,
        session: Session,
        *,
        actor_user_id: str | None,
        event: str,
        occurred_at: datetime,
        details: Mapping[str, object] | None = None,
    ) -> uuid.UUID:
        """Append one chained row under the tail lock; does not commit."""
        ...

    def seal(
        self,
        session: Session,
        *,
        actor_user_id: str | None,
        event: str,
        occurred_at: datetime,
        details: Mapping[str, object] | None = None,
    ) -> SealedAuditRow:
        """Take the tail lock and build the next chained row, unwritten: the caller writes it and
        the tail in the same transaction (in one round trip with its own writes, if it can)."""
        ...


class PinCheck(Protocol):
    def __call__(self, user_id: str, pin: str | None) -> None:
        """Return when `pin` is the user's PIN; raise PIN_REQUIRED, INVALID_PIN or PIN_LOCKED,
        counting a failure durably in its own transaction."""
        ...
