"""The HMAC-chained audit trail and its tail (shared/audit/)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.schema import Base
from shared.db.types import Hash32, LongText, Str, UtcDateTime


class AuditEvent(Base):
    """An HMAC-chained audit row (shared/audit/chain.py). `Id` is minted by the writer before the
    save (ADR-0052 D5) and is element three of the hashed payload (D4)."""

    __tablename__ = "AuditEvents"
    __table_args__ = (Index("IX_AuditEvents_ActorUserId_Event", "ActorUserId", "Event"),)

    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    Sequence: Mapped[int] = mapped_column(BigInteger, unique=True)
    PayloadVersion: Mapped[int] = mapped_column(Integer)
    ActorUserId: Mapped[str | None] = mapped_column(Str(450))
    Event: Mapped[str] = mapped_column(Str(64))
    OccurredAt: Mapped[datetime] = mapped_column(UtcDateTime)
    Details: Mapped[str | None] = mapped_column(LongText)
    PreviousHash: Mapped[bytes] = mapped_column(Hash32)
    RowHash: Mapped[bytes] = mapped_column(Hash32)


class AuditChainTail(Base):
    """One row: the chain's tail. Appends lock it (the tail lock), so concurrent appends
    serialise and the chain never forks."""

    __tablename__ = "AuditChainTail"

    Id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    LastSequence: Mapped[int] = mapped_column(BigInteger)
    LastHash: Mapped[bytes] = mapped_column(Hash32)
