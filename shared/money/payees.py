"""Resolving a payee by AzureTag (the rung after the account, ADR-0050's table)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from shared.db.schema import AspNetUser
from shared.money.accounts import primary_account
from shared.money.refusals import PayeeInvalid, PayeeNotFound


@dataclass(frozen=True)
class Payee:
    user_id: str
    azure_tag: str


def resolve_payee(session: Session, caller_id: str, azure_tag: str) -> Payee:
    """404 PAYEE_NOT_FOUND when no customer has the tag. 422 PAYEE_INVALID when the tag is the
    caller's own (moving money between one's own accounts is the internal transfer, which the
    limit does not count, D2; an external transfer to oneself would spend the day on nothing) or
    when the payee has no open account to receive it (every account closed)."""
    if "\x00" in azure_tag:
        # No stored tag holds a NUL (PostgreSQL text cannot), and PostgreSQL refuses to compare
        # one: answer as every dialect would, not with the driver's DataError (a 500).
        raise PayeeNotFound()
    # Case-insensitive on every dialect, like a user name (docs/database.md): both sides are
    # folded by the database's own UPPER, NormalizedAzureTag being UPPER(AzureTag) computed.
    user_id = session.scalar(_payee_by_tag(), {"azure_tag": azure_tag})
    if user_id is None:
        raise PayeeNotFound()
    if user_id == caller_id:
        raise PayeeInvalid()
    if primary_account(session, user_id) is None:
        raise PayeeInvalid()
    return Payee(user_id=user_id, azure_tag=azure_tag)


@functools.cache
def _payee_by_tag() -> Select[str]:
    # Built once, with a named parameter: every transfer and mint runs it.
    return select(AspNetUser.Id).where(
        AspNetUser.NormalizedAzureTag
        == func.upper(bindparam("azure_tag", type_=AspNetUser.AzureTag.type))
    )
