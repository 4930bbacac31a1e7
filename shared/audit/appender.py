"""What a writer of audit rows needs of the chain (the money path and the PIN service alike), as
a protocol: `AuditChain` satisfies it, and so does `UnkeyedAuditChain`, which refuses."""

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
