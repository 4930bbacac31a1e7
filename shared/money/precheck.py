"""The external transfer's pre-check (ADR-0050 D4.2), in ONE read: the payee, the authorization
and the day's outflow so far, judged in the rungs' order.

    payee (404 PAYEE_NOT_FOUND / 422 PAYEE_INVALID)
    → authorization: the caller's, for this account, payee and amount, Pending
      (401 AUTHORIZATION_INVALID), unexpired (401 AUTHORIZATION_EXPIRED)
    → the day's limit (422 DAILY_LIMIT_EXCEEDED; after the authorization, so it is no oracle)

Nothing here is authoritative: the locked transaction re-reads the sum (D4.3) and spends the
authorization only if it is still Pending and unexpired. The three answers are independent
reads with no consistency owed to each other, so one statement serves them, which is two round
trips and two statements' client CPU fewer on every transfer than a read each. The answers are
judged in the same order the separate reads were, so every refusal is the one it was.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from sqlalchemy import Select, bindparam, literal, select
from sqlalchemy.orm import Session

from shared.clock import utc_day
from shared.db.prebuilt import prebuilt
from shared.db.schema import AspNetUser, AuthorizationStatus, TransferAuthorization
from shared.money.daily_limit import DailyOutflowLimit, daily_outflow_statement
from shared.money.payees import (
    Payee,
    judge_payee,
    payee_columns,
    payee_match,
    refuse_an_unstorable_tag,
)
from shared.money.refusals import AuthorizationExpired, AuthorizationInvalid

if TYPE_CHECKING:
    from shared.money.transfers import TransferOrder


def pre_check(
    session: Session,
    limit: DailyOutflowLimit,
    user_id: str,
    order: TransferOrder,
    now: datetime,
) -> Payee:
    """The payee, once the order has passed every rung before the locked transaction."""
    refuse_an_unstorable_tag(order.recipient_azure_tag)
    day_start, day_end = utc_day(now)
    row = session.execute(
        _pre_check_read(),
        {
            "azure_tag": order.recipient_azure_tag,
            "authorization_id": order.authorization_id,
            "user_id": user_id,
            "day_start": day_start,
            "day_end": day_end,
        },
    ).one()
    payee = judge_payee(user_id, order.recipient_azure_tag, row.payee_user_id, row.payee_open)
    # Another user's authorization and a mismatch answer alike: INVALID says nothing more.
    if (
        row.UserId != user_id
        or row.AccountId != order.account_id
        or row.RecipientAzureTag != order.recipient_azure_tag
        or row.Amount != order.amount
        or row.Status != AuthorizationStatus.PENDING.value
    ):
        raise AuthorizationInvalid()
    if row.ExpiresAt <= now:
        raise AuthorizationExpired()
    limit.judge(user_id, order.amount, row.used, now)
    return payee


@prebuilt
def _pre_check_read() -> Select[str, int, str, uuid.UUID, str, Decimal, str, datetime, Decimal]:
    """One row whatever matches: an anchor row, outer-joined to the tag's user and to the
    authorization (NULLs where nothing matches), with the day's sum beside them. The anchor is
    a one-row derived table, which both servers and SQLite accept (SQL Server has no FROM-less
    join)."""
    anchor = select(literal(1).label("one")).subquery("anchor")
    payee_user_id, payee_open = payee_columns()
    joined = anchor.outerjoin(AspNetUser, payee_match()).outerjoin(
        TransferAuthorization,
        TransferAuthorization.Id
        == bindparam("authorization_id", type_=TransferAuthorization.Id.type),
    )
    return select(
        payee_user_id.label("payee_user_id"),
        payee_open.label("payee_open"),
        TransferAuthorization.UserId,
        TransferAuthorization.AccountId,
        TransferAuthorization.RecipientAzureTag,
        TransferAuthorization.Amount,
        TransferAuthorization.Status,
        TransferAuthorization.ExpiresAt,
        daily_outflow_statement().scalar_subquery().label("used"),
    ).select_from(joined)
