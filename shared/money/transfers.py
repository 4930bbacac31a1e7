"""The external transfer spends a minted authorization under the user's application lock, the day
decided against the instant of the spend (docs/decisions.md#adr-0050-d4; its steps, lock order and
statement budget are docs/architecture.md#lock-order's)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import Any

from sqlalchemy import Engine, Select, bindparam, literal, select
from sqlalchemy.orm import Session

from shared.audit.chain import AuditAppender
from shared.clock import Clock, utc_day
from shared.db.prebuilt import prebuilt
from shared.db.schema import (
    AspNetUser,
    AuthorizationStatus,
    IdempotencyRecord,
    TransferAuthorization,
)
from shared.db.uow import one_read
from shared.money import idempotency, payees, refusals
from shared.money.accounts import BalanceWrite, in_lock_order, open_account_and_primary_account
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit, daily_outflow_statement
from shared.money.idempotency import Answer, HeldKey, IdempotencyClaim
from shared.money.payees import Payee
from shared.money.transfer_write_sql import TransferWriter, TransferWrites

TRANSFER_COMPLETED = "TransferCompleted"


@dataclass(frozen=True)
class TransferOrder:
    account_id: uuid.UUID
    recipient_azure_tag: str
    amount: Decimal
    authorization_id: uuid.UUID | None


@dataclass(frozen=True)
class TransferReceipt:
    transaction_id: uuid.UUID
    account_id: uuid.UUID
    recipient_azure_tag: str
    amount: Decimal
    balance: Decimal
    created_at: datetime


@dataclass(frozen=True, eq=False)
class TransferService:
    """The one place an external transfer moves money; `writes` sends those after the tail lock."""

    engine: Engine
    clock: Clock
    limit: DailyOutflowLimit
    lock: DailyLimitLock
    audit: AuditAppender
    writes: TransferWriter

    def transfer(self, claim: IdempotencyClaim[TransferReceipt], order: TransferOrder) -> Answer:
        """The transfer of `order`, at most once per key."""
        with one_read(self.engine) as session:
            checked = self.pre_check(session, claim, order, self.clock.now())
        if isinstance(checked, Answer):
            return checked
        unit = partial(self.lock.unit_of_work, self.engine)
        attempt = partial(self._attempt, order=order, payee=checked)
        return idempotency.run_keyed(unit, claim, self.clock, attempt)

    def pre_check(
        self, session: Session, claim: IdempotencyClaim[Any], order: TransferOrder, now: datetime
    ) -> Payee | Answer:
        """The stored answer to replay, or the payee once the order passed every rung before the
        lock (docs/decisions.md#adr-0050-rung-table), the key's record first: a committed transfer
        spent its authorization. Nothing here is authoritative, so one read serves every rung."""
        payees.refuse_an_unstorable_tag(order.recipient_azure_tag)
        if order.authorization_id is None:
            # Only the key can answer before this rung; no authorization is not a value to bind.
            if (replay := idempotency.committed_answer(session, claim)) is not None:
                return replay
            raise refusals.AuthorizationRequired()
        user_id = claim.user_id
        day_start, day_end = utc_day(now)
        row = session.execute(
            _pre_check_read(),
            {
                **idempotency.key_parameters(claim),
                "azure_tag": order.recipient_azure_tag,
                "authorization_id": order.authorization_id,
                "day_start": day_start,
                "day_end": day_end,
            },
        ).one()
        if (replay := idempotency.stored_answer(claim, row)) is not None:
            return replay
        payee = payees.judge_payee(user_id, row.payee_user_id, row.payee_open)
        # Another user's authorization and a mismatch answer alike: INVALID says nothing more.
        authorized = (row.UserId, row.AccountId, row.RecipientAzureTag, row.Amount, row.Status)
        ordered = (user_id, order.account_id, order.recipient_azure_tag, order.amount)
        if authorized != (*ordered, AuthorizationStatus.PENDING.value):
            raise refusals.AuthorizationInvalid()
        if row.ExpiresAt <= now:
            raise refusals.AuthorizationExpired()
        self.limit.judge(user_id, order.amount, row.used, now)
        return payee

    def _attempt(
        self, session: Session, held: HeldKey[TransferReceipt], order: TransferOrder, payee: Payee
    ) -> Answer:
        """One attempt, the key claimed; the lock order (key → application lock → tail → rows)
        is read here, in one place, and the refusals after the lock in their rungs' order."""
        user_id = held.claim.user_id
        self.lock.take(session, user_id)
        # The instant is read once, under the lock: the sum's day, the rows' CreatedAt and the
        # spend all use it, so the midnight edge is decided against the day of the spend.
        now = self.clock.now()
        # The sender's row (and its token) is read BEFORE the sum: a transfer from this account
        # that commits after this read makes our write lose, and one that committed before it
        # is in the sum. The lock covers two accounts of one user, which share no row.
        sender, receiver = open_account_and_primary_account(
            session, order.account_id, payee.user_id
        )
        self.limit.check(session, user_id, order.amount, now)
        if sender is None or sender.UserId != user_id:
            # Closed (or no longer the caller's) since the mint: the account cannot pay.
            raise refusals.AuthorizationInvalid()
        if sender.Balance < order.amount:
            raise refusals.InsufficientFunds(available=sender.Balance, requested=order.amount)
        if receiver is None:
            raise refusals.PayeeInvalid()
        balance = sender.Balance - order.amount
        receipt = TransferReceipt(
            uuid.uuid4(), sender.Id, order.recipient_azure_tag, order.amount, balance, now
        )
        # Rendered before the tail lock: every instant under the tail is every transfer's.
        success = held.success(receipt, now)
        facts = {
            "transactionId": str(receipt.transaction_id),
            "accountId": str(order.account_id),
            "recipientAzureTag": order.recipient_azure_tag,
            "amount": str(order.amount),
        }
        # The reads above were plain; the first row lock is in the writes, after the tail's.
        audit_row = self.audit.seal(
            session, actor_user_id=user_id, event=TRANSFER_COMPLETED, occurred_at=now, details=facts
        )
        assert order.authorization_id is not None
        writes = TransferWrites(
            audit=audit_row,
            balances=in_lock_order(
                BalanceWrite(sender.Id, sender.Version, balance),
                BalanceWrite(receiver.Id, receiver.Version, receiver.Balance + order.amount),
            ),
            transaction_id=receipt.transaction_id,
            transfer_in_id=uuid.uuid4(),
            sender_id=sender.Id,
            receiver_id=receiver.Id,
            recipient_azure_tag=order.recipient_azure_tag,
            amount=order.amount,
            authorization_id=order.authorization_id,
            now=now,
            success=success,
        )
        outcome = self.writes(session, writes)
        # Whatever half-applied rolls back with the attempt, the audit row too.
        if outcome.balances != 2:
            raise idempotency.LostRace()
        if outcome.spent == 1:
            return success.answer()
        # The authorization is no longer Pending and unexpired (of two spends, the second's case).
        grant = session.get(TransferAuthorization, order.authorization_id)
        if grant and grant.Status == AuthorizationStatus.PENDING.value and grant.ExpiresAt <= now:
            raise refusals.AuthorizationExpired()
        raise refusals.AuthorizationInvalid()


@prebuilt
def _pre_check_read() -> Select[
    str, str, int | None, str | None, str, int, str, uuid.UUID, str, Decimal, *tuple[Any, ...]
]:
    """One row whatever matches: a one-row anchor (SQL Server has no FROM-less join), outer-joined
    to the key's record, the tag's user and the authorization, with the day's sum beside them."""
    anchor = select(literal(1).label("one")).subquery("anchor")
    joined = (
        anchor.outerjoin(IdempotencyRecord, idempotency.key_match())
        .outerjoin(AspNetUser, payees.payee_match())
        .outerjoin(TransferAuthorization, TransferAuthorization.Id == bindparam("authorization_id"))
    )
    return select(
        IdempotencyRecord.RequestHash,
        IdempotencyRecord.State,
        IdempotencyRecord.ResponseStatus,
        IdempotencyRecord.ResponseBody,
        *payees.payee_columns(),
        TransferAuthorization.UserId,
        TransferAuthorization.AccountId,
        TransferAuthorization.RecipientAzureTag,
        TransferAuthorization.Amount,
        TransferAuthorization.Status,
        TransferAuthorization.ExpiresAt,
        daily_outflow_statement().scalar_subquery().label("used"),
    ).select_from(joined)
