"""The external transfer (ADR-0050 D4–D5): spends a minted authorization under the user's
application lock, with the day decided against the instant of the spend.

    the key's committed record (its replay; 422 IDEMPOTENCY_KEY_REUSED)
    → authorization present (401 AUTHORIZATION_REQUIRED)
    → payee (404 PAYEE_NOT_FOUND / 422 PAYEE_INVALID)
    → authorization valid: user, account, payee, amount, unspent (401 AUTHORIZATION_INVALID),
      unexpired (401 AUTHORIZATION_EXPIRED)
    → daily pre-check (D4.2: after the authorization, so the check is no oracle)
    → retry loop { begin → the key's claim (shared/money/idempotency.py: a duplicate waits here
      for the attempt in flight, then replays it) → application lock → both accounts →
      authoritative sum (D4.3) → balance (422 INSUFFICIENT_FUNDS) → tail lock → ONE round trip
      of writes: audit row and tail, debit/credit with concurrency tokens, ledger rows,
      authorization spent (conditional), the key's record completed → commit }

The pre-check reads the key's committed record with its rungs, so a retry of a transfer that
committed replays it before any rung could refuse it (its authorization is spent by then); one
still in flight passes the pre-check and waits for it at the claim.

Statements per transfer on PostgreSQL: 1 before the loop (the pre-check's one read,
shared/money/precheck.py), then per attempt the claim, the lock, the accounts, the sum, the tail
lock, the writes; from the tail lock to the commit, 3 round trips (pinned by
tests/integration/money/test_transfer_statement_budget.py; why:
shared/money/transfer_write_sql.py).
"""

from __future__ import annotations

import logging
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
from shared.money.accounts import AccountState, open_account_and_primary_account
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
from shared.money.transfer_write_sql import BalanceWrite, TransferWriter, TransferWrites

if TYPE_CHECKING:
    from shared.audit.chain import SealedAuditRow

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


class TransferService:
    """Spends transfer authorizations; the one place an external transfer moves money."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        limit: DailyOutflowLimit,
        lock: DailyLimitLock,
        audit: AuditAppender,
        writes: TransferWriter,
    ) -> None:
        """`writes` sends the writes after the tail lock (`transfer_write_sql.write_transfer`,
        the dialect's one round trip, as the composition root passes)."""
        self._engine = engine
        self._clock = clock
        self._limit = limit
        self._lock = lock
        self._audit = audit
        self._writes = writes

    def transfer(self, claim: IdempotencyClaim[TransferReceipt], order: TransferOrder) -> Answer:
        """The transfer of `order` by `claim`'s user, at most once per key: its answer, or the
        stored answer of the attempt that did it."""
        with one_read(self._engine) as session:
            # D4.2: before the loop, after the authorization, before the balance.
            checked = pre_check(session, self._limit, claim, order, self._clock.now())
        if isinstance(checked, Answer):
            return checked
        return run_keyed(
            lambda: self._lock.unit_of_work(self._engine),
            claim,
            self._clock,
            lambda session, held: self._attempt(session, held, order, checked),
        )

    def _attempt(
        self,
        session: Session,
        held: HeldKey[TransferReceipt],
        order: TransferOrder,
        payee: Payee,
    ) -> Answer:
        """One attempt, the key claimed: the application lock (D5), the parties and the day,
        then the critical section — the tail lock, every write in one round trip, judged. The
        lock order (key → application lock → tail → rows) is read here, in one place."""
        assert order.authorization_id is not None
        user_id = held.claim.user_id
        self._lock.take(session, user_id)
        # The instant is read once, under the lock: the sum's day, the rows' CreatedAt and the
        # spend all use it, so the midnight edge is decided against the day of the spend (D4.3).
        now = self._clock.now()
        sender, receiver = self._parties(session, user_id, order, payee, now)
        transaction_id = uuid.uuid4()
        receipt = TransferReceipt(
            transaction_id,
            sender.Id,
            order.recipient_azure_tag,
            order.amount,
            sender.Balance - order.amount,
            now,
        )
        # Rendered before the tail lock: nothing the answer holds depends on the chain, and every
        # instant spent under the tail is spent by every transfer of the bank.
        success = held.success(receipt, now)
        # Lock order is key → application lock → tail → rows (docs/architecture.md, ADR-0050
        # "Rejected"): audited saves lock tail → row, so taking a row before the tail would
        # close a deadlock cycle with them. The reads above were plain; the first row lock is in
        # the writes below.
        audit_row = self._seal(session, user_id, order, receipt)
        # Every round trip from the tail lock to the commit is paid by every transfer of the
        # bank, all waiting for the tail: the writes go in one (transfer_write_sql).
        writes = _transfer_writes(order, receipt, (sender, receiver), audit_row, success)
        outcome = self._writes(session, writes)
        # Judged in the order of the writes; whatever half-applied rolls back with the attempt,
        # the audit row too (successes only, ADR-0044).
        if outcome.balances != 2:
            raise LostRace()
        if outcome.spent != 1:
            _refuse_spend(session, order, now)
        return success.answer()

    def _seal(
        self, session: Session, user_id: str, order: TransferOrder, receipt: TransferReceipt
    ) -> SealedAuditRow:
        """The audit row of the transfer, sealed under the chain's tail lock."""
        return self._audit.seal(
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
        """The sender's and the payee's rows (one read), the authoritative day (D4.3), then the
        sender, the balance, the payee's account; refuses in that order."""
        # The sender's row (and its concurrency token) is read BEFORE the sum: any transfer from
        # this account that commits after this read bumps the token and makes our write lose,
        # and any that committed before it is in the sum. So one account's transfers keep the day
        # even without the lock (ADR-0050 Verification: "the retry's" tripwire); the lock is what
        # covers two accounts of one user, which share no row. No row lock yet: the tail first.
        sender, receiver = open_account_and_primary_account(
            session, order.account_id, payee.user_id
        )
        self._limit.check(session, user_id, order.amount, now)  # D4.3
        if sender is None or sender.UserId != user_id:
            # Closed (or no longer the caller's) since the mint: the authorization names an
            # account that cannot pay.
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
    """Every write of one transfer, for the one round trip (transfer_write_sql)."""
    assert order.authorization_id is not None
    sender, receiver = parties
    return TransferWrites(
        audit=audit_row,
        balances=_in_lock_order(
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


def _in_lock_order(a: BalanceWrite, b: BalanceWrite) -> tuple[BalanceWrite, BalanceWrite]:
    # Rows in Id order, so two movements between the same two accounts in opposite directions
    # (two users, two application locks) cannot deadlock on each other.
    return (a, b) if str(a.account_id) <= str(b.account_id) else (b, a)


def _refuse_spend(session: Session, order: TransferOrder, now: datetime) -> NoReturn:
    """The spend matched no row: the authorization is no longer Pending and unexpired. Of two
    spends of one authorization, the second lands here and loses."""
    expires_at = session.scalar(
        select(TransferAuthorization.ExpiresAt).where(
            TransferAuthorization.Id == order.authorization_id,
            TransferAuthorization.Status == AuthorizationStatus.PENDING.value,
        )
    )
    if expires_at is not None and expires_at <= now:
        raise AuthorizationExpired()
    raise AuthorizationInvalid()
