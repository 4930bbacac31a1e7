"""The schema, in the .NET API's EF names, so a database shared with the API is the same database
(docs/database.md); constraint names come from one naming convention, the same on every dialect.
A table's class is mapped when first named (`from shared.db.schema import Account`), so a cold
instance maps only the tables its first request reads (bench/cold_start.py)."""

from __future__ import annotations

import enum
import importlib
from typing import TYPE_CHECKING, Any

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

if TYPE_CHECKING:
    from shared.db.schema.audit import AuditChainTail as AuditChainTail
    from shared.db.schema.audit import AuditEvent as AuditEvent
    from shared.db.schema.money import IdempotencyRecord as IdempotencyRecord
    from shared.db.schema.money import Transaction as Transaction
    from shared.db.schema.money import TransferAuthorization as TransferAuthorization
    from shared.db.schema.notices import SubscriberNotice as SubscriberNotice
    from shared.db.schema.users import Account as Account
    from shared.db.schema.users import AspNetUser as AspNetUser

NAMING_CONVENTION = {
    "ix": "IX_%(table_name)s_%(column_0_N_name)s",
    "uq": "UQ_%(table_name)s_%(column_0_N_name)s",
    "ck": "CK_%(table_name)s_%(constraint_name)s",
    "fk": "FK_%(table_name)s_%(referred_table_name)s_%(column_0_name)s",
    "pk": "PK_%(table_name)s",
}

# Each part of the bank's module and the tables it declares, in one order, run after run.
_TABLES = {
    "users": ("AspNetUser", "Account"),
    "money": ("Transaction", "TransferAuthorization", "IdempotencyRecord"),
    "audit": ("AuditEvent", "AuditChainTail"),
    "notices": ("SubscriberNotice",),
}
_DECLARED_IN = {name: module for module, names in _TABLES.items() for name in names}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def metadata() -> MetaData:
    """Every table: read this, not `Base.metadata`, which holds only the tables mapped so far."""
    for module in _TABLES:
        importlib.import_module(f"{__name__}.{module}")
    return Base.metadata


def __getattr__(name: str) -> Any:
    module = _DECLARED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    table = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = table
    return table


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
    # a committed one is an older release's, which committed its claim alone: taken over at once.
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"  # a success, stored with the money it moved
