"""Accounts as the money path reads them, and balance writes guarded by the concurrency token."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple, TypeAlias, cast

from sqlalchemy import Row, Select, Table, Update, bindparam, false, or_, select, update
from sqlalchemy.orm import Session

from shared.db.prebuilt import prebuilt
from shared.db.schema import Account, Transaction, TransactionStatus, TransactionType
from shared.db.uow import rows_matched
from shared.money.idempotency import LostRace
from shared.money.refusals import AccountForbidden, AccountNotFound

_accounts = cast(Table, Account.__table__)
# `= false()`, not `IS false`: SQL Server has no `IS 0` (IS takes NULL alone).
_OPEN = Account.IsDeleted == false()


def own_open_account(session: Session, user_id: str, account_id: uuid.UUID) -> Account:
    """The caller's open account: 404 if none (a closed one is invisible), 403 if another's."""
    account = session.scalar(select(Account).where(Account.Id == account_id, _OPEN))
    if account is None:
        raise AccountNotFound()
    if account.UserId != user_id:
        raise AccountForbidden()
    return account


# An account as the transfer judges and writes it: its Id, UserId, Balance and Version.
AccountState: TypeAlias = Row[uuid.UUID, str, Decimal, int]


def open_account_and_primary_account(
    session: Session, account_id: uuid.UUID, payee_user_id: str
) -> tuple[AccountState | None, AccountState | None]:
    """The open account `account_id` and the payee's primary (oldest open) one, in one read."""
    parameters = {"account_id": account_id, "payee_user_id": payee_user_id}
    rows = session.execute(_open_account_and_primary_account(), parameters).all()
    payer = next((row for row in rows if row.Id == account_id), None)
    payee = next((row for row in rows if row.Id != account_id), None)
    return payer, payee


@prebuilt
def _open_account_and_primary_account() -> Select[uuid.UUID, str, Decimal, int]:
    primary = (
        select(Account.Id)
        .where(Account.UserId == bindparam("payee_user_id"), _OPEN)
        .order_by(Account.CreatedAt, Account.Id)
        .limit(1)
    )
    return select(Account.Id, Account.UserId, Account.Balance, Account.Version).where(
        _OPEN, or_(Account.Id == bindparam("account_id"), Account.Id == primary.scalar_subquery())
    )


class BalanceWrite(NamedTuple):
    """One account's new balance, written only if its token is still `seen_version`."""

    account_id: uuid.UUID
    seen_version: int
    balance: Decimal


def balance_update(account_id: object, seen_version: object, balance: object) -> Update:
    """Set the balance and bump the token if nobody wrote the row since it was read (or binds)."""
    return (
        update(_accounts)
        .where(_accounts.c.Id == account_id, _accounts.c.Version == seen_version, _OPEN)
        .values(Balance=balance, Version=_accounts.c.Version + 1)
    )


def in_lock_order(a: BalanceWrite, b: BalanceWrite) -> tuple[BalanceWrite, BalanceWrite]:
    """Rows in Id order, so two movements between the same two accounts in opposite directions
    (two users, two application locks) cannot deadlock on each other."""
    return (a, b) if str(a.account_id) <= str(b.account_id) else (b, a)


def write_balance(session: Session, write: BalanceWrite) -> None:
    """LostRace when someone wrote the row since it was read: the attempt runs again."""
    if rows_matched(session, balance_update(*write)) != 1:
        raise LostRace()


def move_money(
    session: Session,
    source: Account,
    target: Account,
    amount: Decimal,
    entry_id: uuid.UUID,
    created_at: datetime,
) -> Decimal:
    """Move `amount` with both ledger rows (TransferOut's Id `entry_id`): the source's balance."""
    new_balance = source.Balance - amount
    for write in in_lock_order(
        BalanceWrite(source.Id, source.Version, new_balance),
        BalanceWrite(target.Id, target.Version, target.Balance + amount),
    ):
        write_balance(session, write)
    for id_, account_id, type_, other in (
        (entry_id, source.Id, TransactionType.TRANSFER_OUT, target.Id),
        (None, target.Id, TransactionType.TRANSFER_IN, source.Id),
    ):
        post_entry(session, account_id, type_, amount, created_at, entry_id=id_, counterparty=other)
    return new_balance


def post_entry(
    session: Session,
    account_id: uuid.UUID,
    type_: TransactionType,
    amount: Decimal,
    created_at: datetime,
    *,
    entry_id: uuid.UUID | None = None,
    recipient_azure_tag: str | None = None,
    counterparty: uuid.UUID | None = None,
) -> None:
    """One completed ledger row."""
    session.add(
        Transaction(
            Id=entry_id or uuid.uuid4(),
            AccountId=account_id,
            Type=type_.value,
            Amount=amount,
            Status=TransactionStatus.COMPLETED.value,
            RecipientAzureTag=recipient_azure_tag,
            CounterpartyAccountId=counterparty,
            CreatedAt=created_at,
        )
    )
