"""The retry loop around one money transaction (docs/money.md): each attempt is a fresh unit of
work; a lost race on an account's concurrency token, or a TransactionRolledBack, rolls the whole
attempt back and runs it again, a bounded number of times. DatabaseUnavailable during COMMIT is
not a race: whether the server committed is unknown (shared.db.uow.commit_unit), so it is raised
as `CommitLost` for the caller, which can ask the key (shared/money/idempotency.py). Other faults
(LockTimeout, DatabaseUnavailable before the COMMIT) pass."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from sqlalchemy.orm import Session

from shared.db.uow import commit_unit
from shared.errors import CommitOutcomeUnknown, TransactionRolledBack
from shared.money.refusals import ConcurrencyConflict

T = TypeVar("T")

log = logging.getLogger("azurebank.money")

# Enough for eight clients on one account (each loser retries behind one winner); small enough
# that a caller hears 503 CONCURRENCY_CONFLICT in well under a second of backoff.
MAX_ATTEMPTS = 12
_BACKOFF_SECONDS = 0.005


class LostRace(Exception):
    """A conditional write matched no row: someone committed first. Retry the attempt."""


class CommitLost(Exception):
    """The connection failed during COMMIT: the server may have committed `result`'s
    transaction, or not."""

    def __init__(self, result: object) -> None:
        super().__init__("the connection was lost during COMMIT")
        self.result = result


def run_money_transaction(
    open_unit: Callable[[], AbstractContextManager[Session]],
    work: Callable[[Session], T],
    *,
    attempts: int = MAX_ATTEMPTS,
) -> T:
    """Run `work` in a unit of work and commit it; on a lost race, start again from scratch.
    Domain refusals raised by `work` pass through (their attempt rolls back)."""
    for attempt in range(1, attempts + 1):
        try:
            with open_unit() as session:
                result = work(session)
                _commit(session, result)
                return result
        except (LostRace, TransactionRolledBack):
            pass  # a deadlock's victim lost a race too: the server rolled it back
        log.info("Money transaction lost a race (attempt %d of %d); retrying", attempt, attempts)
        # Jitter so losers do not collide again in lockstep.
        time.sleep(random.uniform(0, _BACKOFF_SECONDS * attempt))  # noqa: S311 - not security
    raise ConcurrencyConflict()


def _commit(session: Session, result: object) -> None:
    # A TransactionRolledBack passes: the server says it rolled back, so nothing is unknown and
    # the race is run again.
    try:
        commit_unit(session)
    except CommitOutcomeUnknown:
        raise CommitLost(result) from None
