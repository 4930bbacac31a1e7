"""Resolving a payee by AzureTag, case-insensitively (docs/database.md: NormalizedAzureTag is the
database's own UPPER(AzureTag))."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Label, bindparam, case, exists, false, func, select
from sqlalchemy.orm import Session

from shared.db.schema import Account, AspNetUser
from shared.money.refusals import PayeeInvalid, PayeeNotFound


@dataclass(frozen=True)
class Payee:
    user_id: str


def resolve_payee(session: Session, caller_id: str, azure_tag: str) -> Payee:
    """404 when no customer has the tag; 422 PAYEE_INVALID for the caller's own tag (that is
    the internal transfer, which the limit does not count) or a payee with no open account."""
    refuse_an_unstorable_tag(azure_tag)
    read = select(*payee_columns()).where(payee_match())
    found = session.execute(read, {"azure_tag": azure_tag}).first()
    return judge_payee(caller_id, *(found or (None, 0)))


def refuse_an_unstorable_tag(azure_tag: str) -> None:
    """404 before any SQL for a tag with a NUL: no row holds one, and PostgreSQL would refuse
    to compare it (a 500)."""
    if "\x00" in azure_tag:
        raise PayeeNotFound()


def judge_payee(caller_id: str, user_id: str | None, payee_open: int) -> Payee:
    """`resolve_payee`'s rungs on `payee_columns` already read (`user_id` None: nobody)."""
    if user_id is None:
        raise PayeeNotFound()
    if user_id == caller_id or not payee_open:
        raise PayeeInvalid()
    return Payee(user_id)


def payee_match() -> ColumnElement[bool]:
    """The AspNetUsers row whose tag is `:azure_tag`, case-insensitively."""
    return AspNetUser.NormalizedAzureTag == func.upper(
        bindparam("azure_tag", type_=AspNetUser.AzureTag.type)
    )


def payee_columns() -> tuple[Label[str], Label[int]]:
    """The matched user's Id, and 1 when it has an open account (else 0): CASE WHEN EXISTS,
    because SQL Server has no boolean expression in a select list."""
    open_account = exists().where(Account.UserId == AspNetUser.Id, Account.IsDeleted == false())
    has_open_account = case((open_account, 1), else_=0).label("payee_open")
    return AspNetUser.Id.label("payee_user_id"), has_open_account
