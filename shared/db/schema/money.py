"""The money's rows: the ledger, the transfer authorizations, the idempotency keys."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

from sqlalchemy import ForeignKey, Index, Integer, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.schema import Base
from shared.db.types import ExactStr, LongText, Money, Str, UtcDateTime


class Transaction(Base):
    """One ledger row. An external transfer is a `TransferOut` with `RecipientAzureTag` set
    (ADR-0050 D2); an internal one leaves it null."""

    __tablename__ = "Transactions"
    __table_args__ = (
        # Beyond the ADR: the daily sum is a seek on (account, day), not a scan of the ledger.
        Index("IX_Transactions_AccountId_Type_CreatedAt", "AccountId", "Type", "CreatedAt"),
    )

    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    AccountId: Mapped[uuid.UUID] = mapped_column(ForeignKey("Accounts.Id"))
    Type: Mapped[str] = mapped_column(Str(16))
    Amount: Mapped[Decimal] = mapped_column(Money)
    Status: Mapped[str] = mapped_column(Str(16))
    RecipientAzureTag: Mapped[str | None] = mapped_column(Str(64))
    CounterpartyAccountId: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    CreatedAt: Mapped[datetime] = mapped_column(UtcDateTime)


class TransferAuthorization(Base):
    """What the mint issues and the transfer spends (ADR-0042)."""

    __tablename__ = "TransferAuthorizations"

    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    UserId: Mapped[str] = mapped_column(ForeignKey("AspNetUsers.Id"), index=True)
    AccountId: Mapped[uuid.UUID] = mapped_column(ForeignKey("Accounts.Id"))
    RecipientAzureTag: Mapped[str] = mapped_column(Str(64))
    Amount: Mapped[Decimal] = mapped_column(Money)
    Status: Mapped[str] = mapped_column(Str(16))
    CreatedAt: Mapped[datetime] = mapped_column(UtcDateTime)
    ExpiresAt: Mapped[datetime] = mapped_column(UtcDateTime)
    SpentAt: Mapped[datetime | None] = mapped_column(UtcDateTime)
    TransactionId: Mapped[uuid.UUID | None] = mapped_column(Uuid)


class IdempotencyRecord(Base):
    """ADR-0009: a success stored with the money it moved; keys scoped to user and operation."""

    __tablename__ = "IdempotencyRecords"
    __table_args__ = (UniqueConstraint("UserId", "Operation", "Key"),)

    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    UserId: Mapped[str] = mapped_column(Str(450))
    Operation: Mapped[str] = mapped_column(Str(64))
    # Exact on every dialect (docs/database.md): `abc` and `ABC` are two keys.
    Key: Mapped[str] = mapped_column(ExactStr(255))
    RequestHash: Mapped[str] = mapped_column(Str(64))
    State: Mapped[str] = mapped_column(Str(16))
    ResponseStatus: Mapped[int | None] = mapped_column(Integer)
    ResponseBody: Mapped[str | None] = mapped_column(LongText)
    CreatedAt: Mapped[datetime] = mapped_column(UtcDateTime)
    CompletedAt: Mapped[datetime | None] = mapped_column(UtcDateTime)
