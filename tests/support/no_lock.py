"""The lock a control test hands the composition root in place of the per-user application lock
(ADR-0050 D5): none. With it a transfer opens a plain unit of work and takes no lock in it, so a
test that still passes proves nothing about the lock, and the control that fails proves the lock
is what keeps a user's day within the limit."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from shared.db.uow import unit_of_work
from shared.money.applock_sql import DailyLimitLock


@dataclass(frozen=True)
class NoDailyLimitLock(DailyLimitLock):
    """A DailyLimitLock that takes no lock: the transfer's plain unit of work, nothing in it."""

    timeout_seconds: int = 0

    def unit_of_work(self, engine: Engine) -> AbstractContextManager[Session]:
        return unit_of_work(engine)

    def take(self, session: Session, user_id: str) -> None:
        return None
