"""The neighbouring rails (docs/http.md): internal transfer, deposit and withdrawal. The daily
limit counts none, so none takes the application lock; each moves money under the concurrency
tokens in the retry loop, its audit row first (tail before rows, as everywhere)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from shared.audit.chain import AuditAppender
from shared.clock import Clock
from shared.db.schema import TransactionType
from shared.db.uow import writing_unit_of_work
from shared.errors import ValidationFailed
from shared.money import accounts
from shared.money.accounts import BalanceWrite
from shared.money.idempotency import Answer, HeldKey, IdempotencyClaim, run_keyed, store_success
from shared.money.refusals import InsufficientFunds

INTERNAL_TRANSFER_COMPLETED = "InternalTransferCompleted"
DEPOSIT_COMPLETED = "DepositCompleted"
WITHDRAWAL_COMPLETED = "WithdrawalCompleted"

R = TypeVar("R")


@dataclass(frozen=True)
class RailReceipt:
    transaction_id: uuid.UUID
    account_id: uuid.UUID
    amount: Decimal
    balance: Decimal
    created_at: datetime


@dataclass(frozen=True)
class InternalTransferReceipt:
    transaction_id: uuid.UUID
    from_account_id: uuid.UUID
    to_account_id: uuid.UUID
    amount: Decimal
    balance: Decimal  # the source account's, after the transfer
    created_at: datetime


@dataclass(frozen=True, eq=False)
class AccountRails:
    """Movements within one customer's accounts or across the bank's edge, once per key."""

    engine: Engine
    clock: Clock
    audit: AuditAppender

    def _run(self, claim: IdempotencyClaim[R], move: Callable[[Session], R]) -> Answer:
        """`move` in the key's transaction, its receipt's answer stored with the money."""

        def moved(session: Session, held: HeldKey[R]) -> Answer:
            success = held.success(move(session), self.clock.now())
            store_success(session, success)
            session.flush()
            return success.answer()

        # A read-then-write holds the right to write from its first statement, and waits for
        # every lock (the key's, the tail's, the rows') Database__LockTimeoutSeconds.
        return run_keyed(lambda: writing_unit_of_work(self.engine), claim, self.clock, moved)

    def _audited(
        self, session: Session, user_id: str, event: str, **details: object
    ) -> tuple[uuid.UUID, datetime]:
        """A new transaction's Id and instant, its audit row (`details` after its Id) appended."""
        transaction_id, now = uuid.uuid4(), self.clock.now()
        texts = {k: str(v) for k, v in {"transactionId": transaction_id, **details}.items()}
        self.audit.append(
            session, actor_user_id=user_id, event=event, occurred_at=now, details=texts
        )
        return transaction_id, now

    def internal_transfer(
        self,
        claim: IdempotencyClaim[InternalTransferReceipt],
        from_account_id: uuid.UUID,
        to_account_id: uuid.UUID,
        amount: Decimal,
    ) -> Answer:
        """TransferOut with no RecipientAzureTag (so the daily limit skips it), and TransferIn."""
        if from_account_id == to_account_id:
            raise ValidationFailed("toAccountId", "must differ from fromAccountId")

        def attempt(session: Session) -> InternalTransferReceipt:
            source = accounts.own_open_account(session, claim.user_id, from_account_id)
            target = accounts.own_open_account(session, claim.user_id, to_account_id)
            if source.Balance < amount:
                raise InsufficientFunds(available=source.Balance, requested=amount)
            transaction_id, now = self._audited(
                session,
                claim.user_id,
                INTERNAL_TRANSFER_COMPLETED,
                fromAccountId=source.Id,
                toAccountId=target.Id,
                amount=amount,
            )
            balance = accounts.move_money(session, source, target, amount, transaction_id, now)
            return InternalTransferReceipt(
                transaction_id, source.Id, target.Id, amount, balance, now
            )

        return self._run(claim, attempt)

    def deposit(
        self, claim: IdempotencyClaim[RailReceipt], account_id: uuid.UUID, amount: Decimal
    ) -> Answer:
        return self._single(TransactionType.DEPOSIT, claim, account_id, amount)

    def withdrawal(
        self, claim: IdempotencyClaim[RailReceipt], account_id: uuid.UUID, amount: Decimal
    ) -> Answer:
        """Not counted by the daily limit; refused only for funds."""
        return self._single(TransactionType.WITHDRAWAL, claim, account_id, amount)

    def _single(
        self,
        type_: TransactionType,
        claim: IdempotencyClaim[RailReceipt],
        account_id: uuid.UUID,
        amount: Decimal,
    ) -> Answer:
        outflow = type_ is TransactionType.WITHDRAWAL

        def attempt(session: Session) -> RailReceipt:
            account = accounts.own_open_account(session, claim.user_id, account_id)
            if outflow and account.Balance < amount:
                raise InsufficientFunds(available=account.Balance, requested=amount)
            balance = account.Balance - amount if outflow else account.Balance + amount
            event = WITHDRAWAL_COMPLETED if outflow else DEPOSIT_COMPLETED
            transaction_id, now = self._audited(
                session, claim.user_id, event, accountId=account.Id, amount=amount
            )
            accounts.write_balance(session, BalanceWrite(account.Id, account.Version, balance))
            accounts.post_entry(session, account.Id, type_, amount, now, entry_id=transaction_id)
            return RailReceipt(transaction_id, account.Id, amount, balance, now)

        return self._run(claim, attempt)
