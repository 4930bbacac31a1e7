"""The schema, in the .NET API's EF names (PascalCase), so a database shared with the API is the
same database (docs/database.md). Constraint names come from one naming convention, so they are the
same on SQL Server, PostgreSQL and SQLite and a migration can name them."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from decimal import Decimal

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    UniqueConstraint,
    Uuid,
    and_,
    column,
    false,
    func,
    or_,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from shared.db.types import ExactStr, Hash32, LongText, Money, Str, UtcDateTime

NAMING_CONVENTION = {
    "ix": "IX_%(table_name)s_%(column_0_N_name)s",
    "uq": "UQ_%(table_name)s_%(column_0_N_name)s",
    "ck": "CK_%(table_name)s_%(constraint_name)s",
    "fk": "FK_%(table_name)s_%(referred_table_name)s_%(column_0_name)s",
    "pk": "PK_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TransactionType(enum.StrEnum):
    DEPOSIT = "Deposit"
    WITHDRAWAL = "Withdrawal"
    TRANSFER_IN = "TransferIn"
    TRANSFER_OUT = "TransferOut"


class TransactionStatus(enum.StrEnum):
    COMPLETED = "Completed"  # every writer sets this today (ADR-0050 context)
    PENDING = "Pending"  # nothing writes it yet; D3's filter decides nothing until something does
    FAILED = "Failed"


class AuthorizationStatus(enum.StrEnum):
    PENDING = "Pending"  # minted, not yet spent (a refused spend leaves it here, ADR-0050 A3)
    SPENT = "Spent"


class NoticeKind(enum.StrEnum):
    PIN_ENROLLED = "PinEnrolled"
    PIN_CHANGED = "PinChanged"


class IdempotencyState(enum.StrEnum):
    # The key's row while its money transaction is open, uncommitted (a duplicate waits on it);
    # committed only by the protocol before the claim moved into that transaction.
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"  # a success, stored with the money it moved


class AspNetUser(Base):
    """ASP.NET Core Identity's user row, plus the columns AzureBank added."""

    __tablename__ = "AspNetUsers"

    Id: Mapped[str] = mapped_column(Str(450), primary_key=True)
    UserName: Mapped[str | None] = mapped_column(Str(256))
    NormalizedUserName: Mapped[str | None] = mapped_column(Str(256), unique=True)
    Email: Mapped[str | None] = mapped_column(Str(256))
    NormalizedEmail: Mapped[str | None] = mapped_column(Str(256), index=True)
    EmailConfirmed: Mapped[bool] = mapped_column(Boolean, default=False)
    PasswordHash: Mapped[str | None] = mapped_column(LongText)
    SecurityStamp: Mapped[str | None] = mapped_column(LongText)
    ConcurrencyStamp: Mapped[str | None] = mapped_column(LongText)
    PhoneNumber: Mapped[str | None] = mapped_column(LongText)
    PhoneNumberConfirmed: Mapped[bool] = mapped_column(Boolean, default=False)
    TwoFactorEnabled: Mapped[bool] = mapped_column(Boolean, default=False)
    LockoutEnd: Mapped[datetime | None] = mapped_column(UtcDateTime)
    LockoutEnabled: Mapped[bool] = mapped_column(Boolean, default=True)
    AccessFailedCount: Mapped[int] = mapped_column(Integer, default=0)
    AzureTag: Mapped[str] = mapped_column(Str(64), unique=True)
    # The payee's tag as it is looked up, case-insensitively (docs/database.md): computed by the
    # database's own UPPER, so rows the .NET API inserts carry it too, and the lookup
    # `NormalizedAzureTag = UPPER(:tag)` folds both sides with the same function.
    NormalizedAzureTag: Mapped[str | None] = mapped_column(
        Str(64), Computed(func.upper(column("AzureTag")), persisted=True), unique=True
    )
    PinHash: Mapped[str | None] = mapped_column(LongText)
    PinAccessFailedCount: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    PinLockoutEnd: Mapped[datetime | None] = mapped_column(UtcDateTime)


class Account(Base):
    __tablename__ = "Accounts"

    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    UserId: Mapped[str] = mapped_column(ForeignKey("AspNetUsers.Id"), index=True)
    Name: Mapped[str] = mapped_column(Str(100))
    Balance: Mapped[Decimal] = mapped_column(Money, default=Decimal(0))
    Currency: Mapped[str] = mapped_column(Str(3), default="EUR")
    IsDeleted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    CreatedAt: Mapped[datetime] = mapped_column(UtcDateTime)
    # The concurrency token: every balance write is `… WHERE Version = :seen` and bumps it.
    Version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


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
