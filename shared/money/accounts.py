"""Accounts as the money path sees them: the caller's own open account, a customer's primary
account, and balance writes guarded by the account's concurrency token."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple

from sqlalchemy import Select, Update, bindparam, false, or_, select, update
from sqlalchemy.orm import Session

from shared.db.prebuilt import prebuilt
from shared.db.schema import Account, Transaction, TransactionStatus, TransactionType
from shared.db.writes import rows_matched
from shared.money.refusals import AccountForbidden, AccountNotFound
from shared.money.retry import LostRace


def own_open_account(session: Session, user_id: str, account_id: uuid.UUID) -> Account:
    """The caller's open account: 404 ACCOUNT_NOT_FOUND when there is no such open account (a
    closed one is invisible, as behind the API's soft-delete filter), 403 ACCOUNT_FORBIDDEN when
    it is another customer's."""
    account = session.scalar(
        select(Account).where(Account.Id == account_id, Account.IsDeleted == false())
    )
    if account is None:
        raise AccountNotFound()
    if account.UserId != user_id:
        raise AccountForbidden()
    return account


class AccountState(NamedTuple):
    """An account as the transfer judges and writes it: whose it is, its balance, and the
    concurrency token its balance write is judged by. Named as the columns are."""

    Id: uuid.UUID
    UserId: str
    Balance: Decimal
    Version: int


def open_account_and_primary_account(
    session: Session, account_id: uuid.UUID, payee_user_id: str
) -> tuple[AccountState | None, AccountState | None]:
    """The open account `account_id` and the payee's primary account, in one statement: the
    payer's and the payee's rows with the concurrency tokens their writes will be judged by.
    Plain rows, not ORM objects: nothing here is written through the session, and every
    transfer runs this read."""
    rows = [
        AccountState(*row)
        for row in session.execute(
            _open_account_and_primary_account(),
            {"account_id": account_id, "payee_user_id": payee_user_id},
        )
    ]
    payer = next((row for row in rows if row.Id == account_id), None)
    payee = next((row for row in rows if row.Id != account_id), None)
    return payer, payee


def _primary_account_id() -> Select[uuid.UUID]:
    return (
        select(Account.Id)
        .where(Account.UserId == bindparam("payee_user_id"), Account.IsDeleted == false())
        .order_by(Account.CreatedAt, Account.Id)
        .limit(1)
    )


@prebuilt
def _open_account_and_primary_account() -> Select[uuid.UUID, str, Decimal, int]:
    return select(Account.Id, Account.UserId, Account.Balance, Account.Version).where(
        Account.IsDeleted == false(),
        or_(
            Account.Id == bindparam("account_id"),
            Account.Id == _primary_account_id().scalar_subquery(),
        ),
    )


def balance_update(account_id: uuid.UUID, seen_version: int, new_balance: Decimal) -> Update:
    """Set the balance only if nobody wrote the row since it was read (`Version` = what we saw),
    bumping the token; it matches no row otherwise."""
    return (
        update(Account)
        .where(
            Account.Id == account_id,
            Account.Version == seen_version,
            Account.IsDeleted == false(),
        )
        .values(Balance=new_balance, Version=Account.Version + 1)
        .execution_options(synchronize_session=False)
    )


def write_balance(session: Session, account: Account, new_balance: Decimal) -> None:
    """The balance write under the account's token; LostRace when someone wrote the row since it
    was read, so the whole attempt runs again on fresh rows."""
    if rows_matched(session, balance_update(account.Id, account.Version, new_balance)) != 1:
        raise LostRace()


def move_money(
    session: Session,
    source: Account,
    target: Account,
    amount: Decimal,
    *,
    entry_id: uuid.UUID,
    created_at: datetime,
    recipient_azure_tag: str | None = None,
) -> Decimal:
    """Debit `source` and credit `target` under their concurrency tokens and post the TransferOut
    (Id `entry_id`) and TransferIn rows; the source's balance after it. Does not commit."""
    new_balance = source.Balance - amount
    # Rows in Id order, so two movements between the same two accounts in opposite directions
    # (two users, two application locks) cannot deadlock on each other.
    for account, balance in sorted(
        ((source, new_balance), (target, target.Balance + amount)),
        key=lambda pair: str(pair[0].Id),
    ):
        write_balance(session, account, balance)
    post_entry(
        session,
        entry_id=entry_id,
        account_id=source.Id,
        type_=TransactionType.TRANSFER_OUT,
        amount=amount,
        created_at=created_at,
        recipient_azure_tag=recipient_azure_tag,
        counterparty_account_id=target.Id,
    )
    post_entry(
        session,
        account_id=target.Id,
        type_=TransactionType.TRANSFER_IN,
        amount=amount,
        created_at=created_at,
        counterparty_account_id=source.Id,
    )
    return new_balance


def post_entry(
    session: Session,
    *,
    account_id: uuid.UUID,
    type_: TransactionType,
    amount: Decimal,
    created_at: datetime,
    entry_id: uuid.UUID | None = None,
    recipient_azure_tag: str | None = None,
    counterparty_account_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """One completed ledger row (every writer sets Completed, ADR-0050 context)."""
    entry = Transaction(
        Id=entry_id or uuid.uuid4(),
        AccountId=account_id,
        Type=type_.value,
        Amount=amount,
        Status=TransactionStatus.COMPLETED.value,
        RecipientAzureTag=recipient_azure_tag,
        CounterpartyAccountId=counterparty_account_id,
        CreatedAt=created_at,
    )
    session.add(entry)
    return entry.Id
