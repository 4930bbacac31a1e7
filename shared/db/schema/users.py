"""A customer: the ASP.NET Core Identity user and the accounts they own."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Boolean, Computed, ForeignKey, Integer, Uuid, column, false, func
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.schema import Base
from shared.db.types import LongText, Money, Str, UtcDateTime


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
    # The payee's tag as looked up, case-insensitively (docs/database.md): the database's UPPER
    # computes it, so the .NET API's rows carry it too and `= UPPER(:tag)` folds both sides alike.
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
