"""The external transfer (ADR-0050 D4–D5): spends a minted authorization under the user's
application lock, with the day decided against the instant of the spend.

    authorization present (401 AUTHORIZATION_REQUIRED)
    → payee (404 PAYEE_NOT_FOUND / 422 PAYEE_INVALID)
    → authorization valid: user, account, payee, amount, unspent (401 AUTHORIZATION_INVALID),
      unexpired (401 AUTHORIZATION_EXPIRED)
    → daily pre-check (D4.2: after the authorization, so the check is no oracle)
    → retry loop { begin → application lock → authoritative sum (D4.3) → balance (422
      INSUFFICIENT_FUNDS) → audit row (tail lock) → debit/credit with concurrency tokens →
      ledger rows → authorization spent (conditional) → success hook (idempotency) → commit }
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.schema import (
    Account,
    AuthorizationStatus,
    TransferAuthorization,
)
from shared.db.uow import unit_of_work
from shared.db.writes import rows_matched
from shared.money.accounts import move_money, primary_account
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.payees import Payee, resolve_payee
from shared.money.ports import AuditAppender
from shared.money.refusals import (
    AuthorizationExpired,
    AuthorizationInvalid,
    AuthorizationRequired,
    InsufficientFunds,
    PayeeInvalid,
)
from shared.money.retry import run_money_transaction

log = logging.getLogger("azurebank.money")

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


# Runs inside the money's transaction just before its commit (the idempotency record).
SuccessHook = Callable[[Session, Any], None]


def _validate_authorization(
    session: Session, user_id: str, order: TransferOrder, now: datetime
) -> None:
    assert order.authorization_id is not None
    auth = session.get(TransferAuthorization, order.authorization_id)
    # Another user's authorization and a mismatch answer alike: INVALID says nothing more.
    if (
        auth is None
        or auth.UserId != user_id
        or auth.AccountId != order.account_id
        or auth.RecipientAzureTag != order.recipient_azure_tag
        or auth.Amount != order.amount
        or auth.Status != AuthorizationStatus.PENDING.value
    ):
        raise AuthorizationInvalid()
    if auth.ExpiresAt <= now:
        raise AuthorizationExpired()


class TransferService:
    """Spends transfer authorizations; the one place an external transfer moves money."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        limit: DailyOutflowLimit,
        lock: DailyLimitLock,
        audit: AuditAppender,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._limit = limit
        self._lock = lock
        self._audit = audit

    def transfer(
        self, user_id: str, order: TransferOrder, *, on_success: SuccessHook | None = None
    ) -> TransferReceipt:
        if order.authorization_id is None:
            raise AuthorizationRequired()
        with unit_of_work(self._engine) as session:
            payee = resolve_payee(session, user_id, order.recipient_azure_tag)
            now = self._clock.now()
            _validate_authorization(session, user_id, order, now)
            # D4.2: before the loop, after the authorization, before the balance.
            self._limit.check(session, user_id, order.amount, now)
        return run_money_transaction(
            lambda: self._lock.unit_of_work(self._engine, user_id),
            lambda session: self._attempt(session, user_id, order, payee, on_success),
            dialect=self._engine.dialect.name,
        )

    def _attempt(
        self,
        session: Session,
        user_id: str,
        order: TransferOrder,
        payee: Payee,
        on_success: SuccessHook | None,
    ) -> TransferReceipt:
        """One attempt inside the unit of work that opened with the application lock (D5):
        the parties and the day, the audit row, the money, the spend, the success hook. Kept
        whole because the lock order (tail before rows) is read here, in one place."""
        # The instant is read once, under the lock: the sum's day, the rows' CreatedAt and the
        # spend all use it, so the midnight edge is decided against the day of the spend (D4.3).
        now = self._clock.now()
        sender, receiver = self._parties(session, user_id, order, payee, now)
        transaction_id = uuid.uuid4()
        # Lock order is application lock → tail → rows (DESIGN §7, ADR-0050 "Rejected"): audited
        # saves lock tail → row, so taking a row before the tail would close a deadlock cycle
        # with them. The reads above were plain; the first row lock comes after this append.
        # Rolled back with everything else if a later step refuses: successes only (ADR-0044).
        self._audit.append(
            session,
            actor_user_id=user_id,
            event=TRANSFER_COMPLETED,
            occurred_at=now,
            details={
                "transactionId": str(transaction_id),
                "accountId": str(order.account_id),
                "recipientAzureTag": order.recipient_azure_tag,
                "amount": str(order.amount),
            },
        )
        new_balance = move_money(
            session,
            sender,
            receiver,
            order.amount,
            entry_id=transaction_id,
            created_at=now,
            recipient_azure_tag=order.recipient_azure_tag,
        )
        self._spend(session, order, transaction_id, now)
        receipt = TransferReceipt(
            transaction_id, sender.Id, order.recipient_azure_tag, order.amount, new_balance, now
        )
        if on_success is not None:
            on_success(session, receipt)
        session.flush()
        return receipt

    def _parties(
        self, session: Session, user_id: str, order: TransferOrder, payee: Payee, now: datetime
    ) -> tuple[Account, Account]:
        """The sender's row, the authoritative day (D4.3), the balance, then the payee's
        account; refuses in that order."""
        # The sender's row (and its concurrency token) is read BEFORE the sum: any transfer from
        # this account that commits after this read bumps the token and makes our write lose,
        # and any that committed before it is in the sum. So one account's transfers keep the day
        # even without the lock (ADR-0050 Verification: "the retry's" tripwire); the lock is what
        # covers two accounts of one user, which share no row.
        sender = session.scalar(
            select(Account).where(Account.Id == order.account_id, Account.IsDeleted.is_(False))
        )
        self._limit.check(session, user_id, order.amount, now)  # D4.3
        if sender is None or sender.UserId != user_id:
            # Closed (or no longer the caller's) since the mint: the authorization names an
            # account that cannot pay.
            raise AuthorizationInvalid()
        if sender.Balance < order.amount:
            raise InsufficientFunds(available=sender.Balance, requested=order.amount)
        receiver = primary_account(session, payee.user_id)
        if receiver is None:
            raise PayeeInvalid()
        return sender, receiver

    def _spend(
        self, session: Session, order: TransferOrder, transaction_id: uuid.UUID, now: datetime
    ) -> None:
        """Mark the authorization spent only if it is still Pending and unexpired: of two spends
        of one authorization, the second matches no row and loses."""
        spent = rows_matched(
            session,
            update(TransferAuthorization)
            .where(
                TransferAuthorization.Id == order.authorization_id,
                TransferAuthorization.Status == AuthorizationStatus.PENDING.value,
                TransferAuthorization.ExpiresAt > now,
            )
            .values(
                Status=AuthorizationStatus.SPENT.value,
                SpentAt=now,
                TransactionId=transaction_id,
            )
            .execution_options(synchronize_session=False),
        )
        if spent == 1:
            return
        expires_at = session.scalar(
            select(TransferAuthorization.ExpiresAt).where(
                TransferAuthorization.Id == order.authorization_id,
                TransferAuthorization.Status == AuthorizationStatus.PENDING.value,
            )
        )
        if expires_at is not None and expires_at <= now:
            raise AuthorizationExpired()
        raise AuthorizationInvalid()
