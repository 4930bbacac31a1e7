"""The owed security notices the relay delivers (shared/notices/)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Uuid, and_, column, or_
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.schema import Base
from shared.db.types import ExactStr, Str, UtcDateTime


class SubscriberNotice(Base):
    """An owed security notice (ADR-0045, ADR-0048, ADR-0052): the row is the obligation."""

    __tablename__ = "SubscriberNotices"
    __table_args__ = (
        # ADR-0048 D2: both lease columns or neither, quoted in each dialect's own way.
        CheckConstraint(
            or_(
                and_(column("LeasedUntil").is_(None), column("LeasedBy").is_(None)),
                and_(column("LeasedUntil").is_not(None), column("LeasedBy").is_not(None)),
            ),
            name="Lease",
        ),
        # The claim reads the oldest owed rows; the migration filters this index to them in each
        # dialect's words. No `*_where` here: each loads its dialect, and a host loads only its own.
        Index("IX_SubscriberNotices_Owed_CreatedAt", "CreatedAt"),
        Index("IX_SubscriberNotices_LeasedBy", "LeasedBy"),
        Index("IX_SubscriberNotices_AuditEventId", "AuditEventId"),
    )

    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    UserId: Mapped[str] = mapped_column(
        ForeignKey("AspNetUsers.Id", ondelete="CASCADE"), index=True
    )
    Kind: Mapped[str] = mapped_column(Str(32))
    CreatedAt: Mapped[datetime] = mapped_column(UtcDateTime)
    DeliveredAt: Mapped[datetime | None] = mapped_column(UtcDateTime)
    DeliveryReceipt: Mapped[str | None] = mapped_column(Str(400))
    LeasedUntil: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Exact on every dialect (docs/database.md): two runner names differing in case are two.
    LeasedBy: Mapped[str | None] = mapped_column(ExactStr(200))
    # ADR-0052 D2: a plain column, deliberately no foreign key.
    AuditEventId: Mapped[uuid.UUID | None] = mapped_column(Uuid)
