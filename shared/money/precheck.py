"""The external transfer's pre-check, in ONE read: the key's committed record, the payee, the
authorization and the day's outflow so far, judged in the rungs' order
(docs/decisions.md#adr-0050-rung-table), the key's record first: a transfer that committed has
spent its authorization, so any rung below would refuse its retry.

Nothing here is authoritative (the locked transaction claims the key, re-reads the sum and spends
conditionally), and the answers owe each other no consistency, so one statement serves them: a
round trip and a statement's client CPU fewer on every transfer (bench/README.md, Transfers).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, bindparam, literal, select
from sqlalchemy.orm import Session

from shared.clock import utc_day
from shared.db.prebuilt import prebuilt
from shared.db.schema import (
    AspNetUser,
    AuthorizationStatus,
    IdempotencyRecord,
    TransferAuthorization,
)
from shared.money.daily_limit import DailyOutflowLimit, daily_outflow_statement
from shared.money.idempotency import (
    Answer,
    IdempotencyClaim,
    committed_answer,
    key_match,
    key_parameters,
    stored_answer,
)
from shared.money.payees import (
    Payee,
    judge_payee,
    payee_columns,
    payee_match,
    refuse_an_unstorable_tag,
)
from shared.money.refusals import (
    AuthorizationExpired,
    AuthorizationInvalid,
    AuthorizationRequired,
)

if TYPE_CHECKING:
    from shared.money.transfers import TransferOrder


def pre_check(
    session: Session,
    limit: DailyOutflowLimit,
    claim: IdempotencyClaim[Any],
    order: TransferOrder,
    now: datetime,
) -> Payee | Answer:
    """The stored answer to replay, or the payee once the order has passed every rung before
    the locked transaction."""
    refuse_an_unstorable_tag(order.recipient_azure_tag)
    if order.authorization_id is None:
        # Only the key can answer before this rung; no authorization is not a value to bind.
        replay = committed_answer(session, claim)
        if replay is not None:
            return replay
        raise AuthorizationRequired()
    user_id = claim.user_id
    day_start, day_end = utc_day(now)
    row = session.execute(
        _pre_check_read(),
        {
            **key_parameters(claim),
            "azure_tag": order.recipient_azure_tag,
            "authorization_id": order.authorization_id,
            "day_start": day_start,
            "day_end": day_end,
        },
    ).one()
    replay = stored_answer(claim, row.RequestHash, row.State, row.ResponseStatus, row.ResponseBody)
    if replay is not None:
        return replay
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
def _pre_check_read() -> Select[
    str, str, int | None, str | None, str, int, str, uuid.UUID, str, Decimal, *tuple[Any, ...]
]:
    """One row whatever matches: a one-row anchor (SQL Server has no FROM-less join), outer-joined
    to the key's record, the tag's user and the authorization, with the day's sum beside them."""
    anchor = select(literal(1).label("one")).subquery("anchor")
    payee_user_id, payee_open = payee_columns()
    joined = (
        anchor.outerjoin(IdempotencyRecord, key_match())
        .outerjoin(AspNetUser, payee_match())
        .outerjoin(
            TransferAuthorization,
            TransferAuthorization.Id
            == bindparam("authorization_id", type_=TransferAuthorization.Id.type),
        )
    )
    return select(
        IdempotencyRecord.RequestHash,
        IdempotencyRecord.State,
        IdempotencyRecord.ResponseStatus,
        IdempotencyRecord.ResponseBody,
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
