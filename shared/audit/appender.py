"""What a writer of audit rows needs of the chain (the money path, the PIN service): `AuditChain`
satisfies it, and so does `UnkeyedAuditChain`, which refuses."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict, Unpack

from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from shared.audit.chain import SealedAuditRow


class AuditEntry(TypedDict):
    """What the writer says of a row; the chain assigns its Id, Sequence and hashes."""

    actor_user_id: str | None
    event: str
    occurred_at: datetime
    details: NotRequired[Mapping[str, object] | None]


class AuditAppender(Protocol):
    def append(self, session: Session, **entry: Unpack[AuditEntry]) -> uuid.UUID:
        """Append one chained row under the tail lock and return its Id; does not commit."""
        ...

    def seal(self, session: Session, **entry: Unpack[AuditEntry]) -> SealedAuditRow:
        """Take the tail lock and build the next chained row, unwritten: the caller writes it and
        the tail in the same transaction (in one round trip with its own writes, if it can)."""
        ...
