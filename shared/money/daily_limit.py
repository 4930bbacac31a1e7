"""The one sum behind the daily limit's three checks and the allowance: a user's external
transfers of the clock's UTC day, closed accounts included (docs/decisions.md#adr-0050-d3)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from shared.clock import Clock, utc_day
from shared.db.prebuilt import prebuilt
from shared.db.schema import Account, Transaction, TransactionStatus, TransactionType
from shared.money.refusals import DailyLimitExceeded

log = logging.getLogger("azurebank.money")


@prebuilt
def daily_outflow_statement() -> Select[Decimal]:
    """The day's external outflow of `:user_id`: a seek per account on
    IX_Transactions_AccountId_Type_CreatedAt, not a scan of the ledger."""
    return (
        select(func.sum(Transaction.Amount))
        .select_from(Transaction)
        .join(Account, Account.Id == Transaction.AccountId)
        .where(
            Account.UserId == bindparam("user_id"),
            Transaction.Type == TransactionType.TRANSFER_OUT.value,
            Transaction.CreatedAt >= bindparam("day_start"),
            Transaction.CreatedAt < bindparam("day_end"),
            Transaction.RecipientAzureTag.is_not(None),
            Transaction.Status == TransactionStatus.COMPLETED.value,
        )
    )


@dataclass(frozen=True)
class Allowance:
    limit: Decimal
    used: Decimal
    remaining: Decimal
    resets_at: datetime


@dataclass(frozen=True, eq=False)
class DailyOutflowLimit:
    """The UTC-day bound on a user's external transfers (DailyLimit__Amount)."""

    limit: Decimal
    clock: Clock

    def used(self, session: Session, user_id: str, instant: datetime) -> Decimal:
        start, end = utc_day(instant)
        parameters = {"user_id": user_id, "day_start": start, "day_end": end}
        # SUM over no rows is NULL, which is nothing spent.
        return Decimal(session.scalar(daily_outflow_statement(), parameters) or 0)

    def check(self, session: Session, user_id: str, requested: Decimal, instant: datetime) -> None:
        """Refuse when used + requested would pass the limit (inclusive)."""
        self.judge(user_id, requested, self.used(session, user_id, instant), instant)

    def judge(
        self, user_id: str, requested: Decimal, used: Decimal | None, instant: datetime
    ) -> None:
        """`check` on a sum already read (None: SUM over no rows)."""
        used = Decimal(used or 0)
        if used + requested > self.limit:
            # Log-only, no audit row (docs/decisions.md#adr-0050-d7). The user id is no address.
            figures = (requested, user_id, used, self.limit)
            log.info("Daily limit refused %s for user %s: used %s of %s", *figures)
            raise DailyLimitExceeded(
                limit=self.limit, used=used, requested=requested, resets_at=utc_day(instant)[1]
            )

    def allowance(self, session: Session, user_id: str) -> Allowance:
        now = self.clock.now()
        used = self.used(session, user_id, now)
        return Allowance(self.limit, used, max(Decimal(0), self.limit - used), utc_day(now)[1])
