"""The external transfer: spends a minted authorization under the user's application lock, with
the day decided against the instant of the spend (docs/decisions.md#adr-0050-d4).

    the pre-check's one read (shared/money/precheck.py): a replay, or the rungs before the lock
    → retry loop { the key's claim → application lock → both accounts → authoritative sum →
      balance → tail lock → ONE round trip of writes (transfer_write_sql) → commit }

The lock order and the statement budget are docs/architecture.md#lock-order's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, NoReturn

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from shared.audit.appender import AuditAppender
from shared.clock import Clock
from shared.db.schema import AuthorizationStatus, TransferAuthorization
from shared.db.uow import one_read
from shared.money.accounts import (
    AccountState,
    BalanceWrite,
    in_lock_order,
    open_account_and_primary_account,
)
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.idempotency import Answer, HeldKey, IdempotencyClaim, SuccessRecord, run_keyed
from shared.money.payees import Payee
from shared.money.precheck import pre_check
from shared.money.refusals import (
    AuthorizationExpired,
    AuthorizationInvalid,
    InsufficientFunds,
    PayeeInvalid,
)
from shared.money.retry import LostRace
from shared.money.transfer_write_sql import TransferWriter, TransferWrites

if TYPE_CHECKING:
    from shared.audit.chain import SealedAuditRow

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
    """Spends transfer authorizations; the one place an external transfer moves money. `writes`
    sends the writes after the tail lock (the composition root passes `write_transfer`)."""

    engine: Engine
    clock: Clock
    limit: DailyOutflowLimit
    lock: DailyLimitLock
    audit: AuditAppender
    writes: TransferWriter

    def transfer(self, claim: IdempotencyClaim[TransferReceipt], order: TransferOrder) -> Answer:
        """The transfer of `order` by `claim`'s user, at most once per key: its answer, or the
        stored answer of the attempt that did it."""
        with one_read(self.engine) as session:
            checked = pre_check(session, self.limit, claim, order, self.clock.now())
        if isinstance(checked, Answer):
            return checked
        return run_keyed(
            lambda: self.lock.unit_of_work(self.engine),
            claim,
            self.clock,
            lambda session, held: self._attempt(session, held, order, checked),
        )

    def _attempt(
        self,
        session: Session,
        held: HeldKey[TransferReceipt],
        order: TransferOrder,
        payee: Payee,
    ) -> Answer:
        """One attempt, the key claimed; the lock order (key → application lock → tail → rows)
        is read here, in one place."""
        user_id = held.claim.user_id
        self.lock.take(session, user_id)
        # The instant is read once, under the lock: the sum's day, the rows' CreatedAt and the
        # spend all use it, so the midnight edge is decided against the day of the spend.
        now = self.clock.now()
        sender, receiver = self._parties(session, user_id, order, payee, now)
        receipt = TransferReceipt(
            uuid.uuid4(),
            sender.Id,
            order.recipient_azure_tag,
            order.amount,
            sender.Balance - order.amount,
            now,
        )
        # Rendered before the tail lock: every instant under the tail is every transfer's.
        success = held.success(receipt, now)
        # The reads above were plain; the first row lock is in the writes, after the tail's.
        audit_row = self._seal(session, user_id, order, receipt)
        outcome = self.writes(
            session, _transfer_writes(order, receipt, (sender, receiver), audit_row, success)
        )
        # Whatever half-applied rolls back with the attempt, the audit row too.
        if outcome.balances != 2:
            raise LostRace()
        if outcome.spent != 1:
            _refuse_spend(session, order, now)
        return success.answer()

    def _seal(
        self, session: Session, user_id: str, order: TransferOrder, receipt: TransferReceipt
    ) -> SealedAuditRow:
        """The audit row of the transfer, sealed under the chain's tail lock."""
        return self.audit.seal(
            session,
            actor_user_id=user_id,
            event=TRANSFER_COMPLETED,
            occurred_at=receipt.created_at,
            details={
                "transactionId": str(receipt.transaction_id),
                "accountId": str(order.account_id),
                "recipientAzureTag": order.recipient_azure_tag,
                "amount": str(order.amount),
            },
        )

    def _parties(
        self, session: Session, user_id: str, order: TransferOrder, payee: Payee, now: datetime
    ) -> tuple[AccountState, AccountState]:
        """The sender's and the payee's rows (one read), the authoritative day, then the
        sender, the balance, the payee's account; refuses in that order."""
        # The sender's row (and its token) is read BEFORE the sum: a transfer from this account
        # that commits after this read makes our write lose, and one that committed before it
        # is in the sum. The lock covers two accounts of one user, which share no row.
        sender, receiver = open_account_and_primary_account(
            session, order.account_id, payee.user_id
        )
        self.limit.check(session, user_id, order.amount, now)
        if sender is None or sender.UserId != user_id:
            # Closed (or no longer the caller's) since the mint: the account cannot pay.
            raise AuthorizationInvalid()
        if sender.Balance < order.amount:
            raise InsufficientFunds(available=sender.Balance, requested=order.amount)
        if receiver is None:
            raise PayeeInvalid()
        return sender, receiver


def _transfer_writes(
    order: TransferOrder,
    receipt: TransferReceipt,
    parties: tuple[AccountState, AccountState],
    audit_row: SealedAuditRow,
    success: SuccessRecord,
) -> TransferWrites:
    assert order.authorization_id is not None
    sender, receiver = parties
    return TransferWrites(
        audit=audit_row,
        balances=in_lock_order(
            BalanceWrite(sender.Id, sender.Version, receipt.balance),
            BalanceWrite(receiver.Id, receiver.Version, receiver.Balance + order.amount),
        ),
        transaction_id=receipt.transaction_id,
        transfer_in_id=uuid.uuid4(),
        sender_id=sender.Id,
        receiver_id=receiver.Id,
        recipient_azure_tag=order.recipient_azure_tag,
        amount=order.amount,
        authorization_id=order.authorization_id,
        now=receipt.created_at,
        success=success,
    )


def _refuse_spend(session: Session, order: TransferOrder, now: datetime) -> NoReturn:
    """The spend matched no row: the authorization is no longer Pending and unexpired (of two
    spends of one authorization, the second lands here)."""
    expires_at = session.scalar(
        select(TransferAuthorization.ExpiresAt).where(
            TransferAuthorization.Id == order.authorization_id,
            TransferAuthorization.Status == AuthorizationStatus.PENDING.value,
        )
    )
    if expires_at is not None and expires_at <= now:
        raise AuthorizationExpired()
    raise AuthorizationInvalid()
