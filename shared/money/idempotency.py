"""Idempotency keys (ADR-0009) and the retry loop around each money transaction: the key is
claimed first and its success stored with the money (docs/money.md#idempotency-records)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Row, Select, bindparam, delete, select, update
from sqlalchemy.orm import Session

from shared import errors
from shared.clock import Clock
from shared.db.exact import exact_equals_parameter
from shared.db.schema import IdempotencyRecord, IdempotencyState
from shared.db.types import column_length
from shared.db.uow import commit_unit
from shared.money import refusals
from shared.money.key_claim_sql import bounds, claim_statement

R = TypeVar("R")

log = logging.getLogger("azurebank.money")

MAX_KEY_LENGTH = column_length(IdempotencyRecord.Key)  # 255
_IN_PROGRESS = IdempotencyState.IN_PROGRESS.value
# Enough for eight clients on one account (each loser retries behind one winner); small enough
# that a caller hears 503 CONCURRENCY_CONFLICT in well under a second of backoff.
MAX_ATTEMPTS = 12
_BACKOFF_SECONDS = 0.005


def request_hash(operation: str, canonical: Mapping[str, Any]) -> str:
    """SHA-256 of the operation and its parsed fields, keys sorted, values as their canonical
    strings (so 100 and 100.00 are the same request)."""
    request = {"operation": operation, "request": canonical}
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class IdempotencyClaim(Generic[R]):
    """A money request under its key; `status` and `render(receipt)` make its success's answer."""

    user_id: str
    operation: str
    key: str
    request_hash: str
    status: int
    render: Callable[[R], str]


@dataclass(frozen=True)
class Answer:
    """A keyed money operation's answer; `replayed` when it is an earlier attempt's, stored."""

    status: int
    body: str
    replayed: bool


@dataclass(frozen=True)
class SuccessRecord:
    """A success to store in the money's own transaction, in the row its claim inserted."""

    record_id: uuid.UUID
    status: int
    body: str
    completed_at: datetime

    def answer(self) -> Answer:
        return Answer(self.status, self.body, replayed=False)


@dataclass(frozen=True)
class HeldKey(Generic[R]):
    """The key's row this transaction inserted: uncommitted, so a duplicate waits on it."""

    record_id: uuid.UUID
    claim: IdempotencyClaim[R]

    def success(self, receipt: R, completed_at: datetime) -> SuccessRecord:
        body = self.claim.render(receipt)
        return SuccessRecord(self.record_id, self.claim.status, body, completed_at)


def stored_answer(
    claim: IdempotencyClaim[Any], record: Row[*tuple[Any, ...]] | None
) -> Answer | None:
    """The key's committed record (None, or a NULL State: none) judged: its replay, None when
    nothing answers (no record, or an abandoned `InProgress`), or 422 for another request's."""
    if record is None or record.State is None or record.State == _IN_PROGRESS:
        return None
    if record.RequestHash != claim.request_hash:
        raise refusals.IdempotencyKeyReused()
    assert record.ResponseStatus is not None and record.ResponseBody is not None
    return Answer(record.ResponseStatus, record.ResponseBody, replayed=True)


def key_match() -> ColumnElement[bool]:
    """`:user_id`'s `:operation` under `:key`, exact on every dialect, typed by its columns."""
    return (
        (IdempotencyRecord.UserId == bindparam("user_id"))
        & (IdempotencyRecord.Operation == bindparam("operation"))
        & exact_equals_parameter(IdempotencyRecord.Key, "key")
    )


def key_parameters(claim: IdempotencyClaim[Any]) -> dict[str, str]:
    return {"user_id": claim.user_id, "operation": claim.operation, "key": claim.key}


@functools.cache
def _record_read() -> Select[uuid.UUID, str, str, int | None, str | None]:
    return select(
        IdempotencyRecord.Id,
        IdempotencyRecord.RequestHash,
        IdempotencyRecord.State,
        IdempotencyRecord.ResponseStatus,
        IdempotencyRecord.ResponseBody,
    ).where(key_match())


def committed_answer(session: Session, claim: IdempotencyClaim[Any]) -> Answer | None:
    """`stored_answer` of the key's committed record, read on its own."""
    return stored_answer(claim, session.execute(_record_read(), key_parameters(claim)).first())


def claim_key(session: Session, claim: IdempotencyClaim[R], now: datetime) -> HeldKey[R] | Answer:
    """Claim the key as the transaction's first statement: the row held, or the success to
    replay; 422, or 409 when another attempt still holds it after the connection's lock wait."""
    dialect = session.get_bind().dialect.name
    values = {**key_parameters(claim), "request_hash": claim.request_hash, "now": now}
    for _ in range(3):
        record_id = uuid.uuid4()
        try:
            claimed = session.execute(
                claim_statement(dialect), {"record_id": record_id, **values, **bounds(dialect)}
            ).first()
        except errors.LockTimeout:
            # A server's is the wait on another attempt's key; SQLite's is its BEGIN IMMEDIATE's
            # (no other's uncommitted row exists there): LOCK_TIMEOUT, as for any writer.
            if dialect != "sqlite":
                raise refusals.IdempotencyInProgress() from None
            raise
        if claimed is not None:
            return HeldKey(record_id, claim)
        record = session.execute(_record_read(), key_parameters(claim)).first()
        if record is None:
            continue  # pruned since the claim met it: claim again
        if (answer := stored_answer(claim, record)) is not None:
            return answer
        # A committed InProgress row is an older release's, whose money never moved without
        # completing it (docs/money.md#idempotency-records): take its place.
        stale = (IdempotencyRecord.Id == record.Id) & (IdempotencyRecord.State == _IN_PROGRESS)
        session.execute(delete(IdempotencyRecord).where(stale))
    raise refusals.IdempotencyInProgress()


def store_success(session: Session, success: SuccessRecord) -> None:
    """Complete the row this transaction claimed, in the money's transaction."""
    session.execute(
        update(IdempotencyRecord)
        .where(IdempotencyRecord.Id == success.record_id)
        .values(
            State=IdempotencyState.COMPLETED.value,
            ResponseStatus=success.status,
            ResponseBody=success.body,
            CompletedAt=success.completed_at,
        )
        .execution_options(synchronize_session=False)
    )


class LostRace(Exception):
    """A conditional write matched no row: someone committed first. Retry the attempt."""


class CommitLost(Exception):
    """The connection failed during COMMIT: `result`'s transaction may have committed, or not."""

    def __init__(self, result: object) -> None:
        super().__init__("the connection was lost during COMMIT")
        self.result = result


def run_keyed(
    open_unit: Callable[[], AbstractContextManager[Session]],
    claim: IdempotencyClaim[R],
    clock: Clock,
    move: Callable[[Session, HeldKey[R]], Answer],
) -> Answer:
    """`claim`'s money transaction: the key claimed, then `move` moves the money and stores
    `held.success(receipt)`; a lost commit is resolved by running it once more."""

    def transaction() -> Answer:
        # Each attempt a fresh unit of work, run again from scratch after a lost race (a
        # deadlock's victim, which the server rolled back, lost one too); refusals pass through.
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with open_unit() as session:
                    held = claim_key(session, claim, clock.now())
                    if isinstance(held, Answer):
                        return held  # nothing was written: the unit rolls back, no COMMIT
                    answer = move(session, held)
                    try:
                        commit_unit(session)
                    except errors.CommitOutcomeUnknown:
                        raise CommitLost(answer) from None
                    return answer
            except (LostRace, errors.TransactionRolledBack):
                pass
            if attempt == MAX_ATTEMPTS:
                break  # no pause before the refusal, and no "retrying" that does not follow
            log.info(
                "Money transaction lost a race (attempt %d of %d); retrying", attempt, MAX_ATTEMPTS
            )
            # Jitter so losers do not collide again in lockstep.
            time.sleep(random.uniform(0, _BACKOFF_SECONDS * attempt))  # noqa: S311 - not security
        log.warning("Money transaction lost a race on each of its %d attempts", MAX_ATTEMPTS)
        raise refusals.ConcurrencyConflict()

    try:
        return transaction()
    except CommitLost as lost:
        sent = lost.result
    log.warning("%s: the connection was lost during COMMIT; asking the key", claim.operation)
    try:
        again = transaction()
    except (CommitLost, errors.DatabaseUnavailable):
        raise refusals.OutcomeUnknown() from None
    if isinstance(sent, Answer) and again.replayed and again.body == sent.body:
        # The lost commit landed: this is our own first answer, not an earlier request's.
        return sent
    return again
