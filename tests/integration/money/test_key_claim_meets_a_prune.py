"""The key's claim meets a committed record and reads it next; retention may prune that record
in between (on PostgreSQL, whose claim and read see each other's commits). The claim then
claims again, so a pruned key is claimed as a new one; a key that vanishes and comes back under
every claim is given up after three claims, 409 IDEMPOTENCY_IN_PROGRESS. Another connection
prunes (and restores) the record just before the read (and the claim) on the claiming one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Connection, delete, event, select

from shared.db.engine import get_engine
from shared.db.schema import IdempotencyRecord, IdempotencyState
from shared.db.uow import unit_of_work
from shared.errors import DomainError
from shared.money.idempotency import HeldKey, IdempotencyClaim, claim_key
from tests.support.clock import FakeClock
from tests.support.money import keyed
from tests.support.users import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.adr("0009")]


class Retention:
    """The key's Completed record, pruned and restored on its own connection."""

    def __init__(self, url: str, claim: IdempotencyClaim[Any], clock: FakeClock) -> None:
        self.engine, self.claim, self.clock = get_engine(url), claim, clock
        self.restore()

    def _mine(self) -> Any:
        claim = self.claim
        return (
            (IdempotencyRecord.UserId == claim.user_id)
            & (IdempotencyRecord.Operation == claim.operation)
            & (IdempotencyRecord.Key == claim.key)
        )

    def prune(self) -> None:
        with unit_of_work(self.engine) as session:
            session.execute(delete(IdempotencyRecord).where(self._mine()))
            session.commit()

    def restore(self) -> None:
        with unit_of_work(self.engine) as session:
            if session.scalar(select(IdempotencyRecord.Id).where(self._mine())) is None:
                now = self.clock.now()
                session.add(
                    IdempotencyRecord(
                        UserId=self.claim.user_id,
                        Operation=self.claim.operation,
                        Key=self.claim.key,
                        RequestHash=self.claim.request_hash,
                        State=IdempotencyState.COMPLETED.value,
                        ResponseStatus=201,
                        ResponseBody="{}",
                        CreatedAt=now,
                        CompletedAt=now,
                    )
                )
            session.commit()


@contextmanager
def _meddling(
    connection: Connection, retention: Retention, *, every_time: bool
) -> Iterator[list[str]]:
    """Before each read of the record on `connection`, the record pruned (only the first time,
    unless `every_time`); with `every_time`, restored before each claim after the first. Yields
    the claims made on `connection`, as they are made."""
    claims: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().startswith("INSERT"):
            if claims and every_time:
                retention.restore()
            claims.append(statement)
        elif statement.lstrip().startswith("SELECT") and (every_time or len(claims) == 1):
            retention.prune()

    event.listen(connection, "before_cursor_execute", before)
    try:
        yield claims
    finally:
        event.remove(connection, "before_cursor_execute", before)


def _claim(url: str, *, every_time: bool) -> tuple[object, int]:
    clock = FakeClock()
    claim = keyed(make_user(url, clock).user_id, "deposit")
    retention = Retention(url, claim, clock)
    with unit_of_work(get_engine(url)) as session:
        with _meddling(session.connection(), retention, every_time=every_time) as claims:
            try:
                outcome: object = claim_key(session, claim, clock.now())
            except DomainError as refused:
                outcome = (refused.status, refused.error_code)
        session.rollback()
    return outcome, len(claims)


def test_a_record_pruned_between_the_claim_and_its_read_is_claimed_as_a_new_key(
    postgres_url: str,
) -> None:
    outcome, claims = _claim(postgres_url, every_time=False)
    assert isinstance(outcome, HeldKey)
    assert claims == 2


def test_a_record_that_vanishes_and_returns_under_every_claim_is_given_up_after_three(
    postgres_url: str,
) -> None:
    outcome, claims = _claim(postgres_url, every_time=True)
    assert outcome == (409, "IDEMPOTENCY_IN_PROGRESS")
    assert claims == 3
