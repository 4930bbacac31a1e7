"""Idempotency keys for money operations (ADR-0009, the IETF Idempotency-Key draft).

Keys are scoped to (user, operation). The route builds an `IdempotencyClaim` — who, which
operation, the key, the request's hash, and how a success is answered — and hands it to the
operation, whose money transaction does everything else, in that one transaction:

1. Claim, as its first statement (shared/money/key_claim_sql.py): insert the key's row unless
   the key has one. A duplicate still in flight holds its row uncommitted, so the claim waits for
   that transaction to end (at most Database__LockTimeoutSeconds, then 409
   IDEMPOTENCY_IN_PROGRESS: only then is another attempt really alive). Then the key's committed
   record, if any, decides: the same request hash replays its stored status and body byte for
   byte; another hash is 422 IDEMPOTENCY_KEY_REUSED.
2. Move the money, render the answer, and complete the row (State Completed, status, body) in
   the same transaction: a success is stored if and only if the money moved.
3. Commit. A refusal, a fault or a crash before it rolls the row back with the money, so the key
   is free at once, evaluated afresh by the next try (ADR-0050 A3.4): nothing to release and
   nothing to take over. A process that dies mid-request ends its transaction with its
   connection (and on PostgreSQL a backend notices within half a second, even mid-wait).

A connection lost during COMMIT leaves the outcome unknown to us: the transaction is run once
more, and its claim finds out — the record committed (the answer is the stored one, ours), or
the key is free (nothing moved; this run moves it), or still held (409). When even that run
cannot reach the database, the answer is 503 OUTCOME_UNKNOWN, which says so.

An `InProgress` row that is committed was left by the code before this protocol (which committed
a marker before the money and completed it with the money): its money never moved without its
completion, and that completion was conditional on the marker, so the claim deletes it and
claims the key in its place.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, bindparam, delete, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from shared.clock import Clock
from shared.db.exact import exact_equals_parameter
from shared.db.schema import IdempotencyRecord, IdempotencyState
from shared.db.storable_text import column_length
from shared.errors import DatabaseUnavailable, LockTimeout
from shared.money.key_claim_sql import bounds, claim_statement
from shared.money.refusals import IdempotencyInProgress, IdempotencyKeyReused, OutcomeUnknown
from shared.money.retry import CommitLost, run_money_transaction

R = TypeVar("R")

log = logging.getLogger("azurebank.money")

MAX_KEY_LENGTH = column_length(IdempotencyRecord.Key)  # 255
_COMPLETED = IdempotencyState.COMPLETED.value
_IN_PROGRESS = IdempotencyState.IN_PROGRESS.value


def request_hash(operation: str, canonical: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical request: the operation and its parsed fields, keys sorted, values
    as their canonical strings (so 100 and 100.00 are the same request)."""
    text = json.dumps(
        {"operation": operation, "request": canonical},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class IdempotencyClaim(Generic[R]):
    """A money request under its Idempotency-Key, as its operation claims it: the caller, the
    operation, the key, the request's hash, and the status and body (`render` of the operation's
    receipt) its success answers and stores."""

    user_id: str
    operation: str
    key: str
    request_hash: str
    status: int
    render: Callable[[R], str]


@dataclass(frozen=True)
class Answer:
    """What a keyed money operation answers: the success's status and exact body, and whether
    it is the stored answer of an earlier attempt (a replay)."""

    status: int
    body: str
    replayed: bool


@dataclass(frozen=True)
class SuccessRecord:
    """A success to store in the money's own transaction: it completes the row `record_id` that
    the transaction's claim inserted."""

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
        """The answer to `receipt`, rendered, as the row's completion stores it."""
        return SuccessRecord(
            self.record_id, self.claim.status, self.claim.render(receipt), completed_at
        )


def stored_answer(
    claim: IdempotencyClaim[Any],
    hash_: str | None,
    state: str | None,
    status: int | None,
    body: str | None,
) -> Answer | None:
    """The key's committed record judged (None for each column when there is none): its replay,
    None when there is no record to answer (none, or one abandoned `InProgress`), or 422
    IDEMPOTENCY_KEY_REUSED for another request's."""
    if state is None or state == _IN_PROGRESS:
        return None
    if hash_ != claim.request_hash:
        raise IdempotencyKeyReused()
    assert status is not None and body is not None
    return Answer(status, body, replayed=True)


def key_match() -> ColumnElement[bool]:
    """The record of `:user_id`'s `:operation` under `:key` (exact on every dialect)."""
    return (
        (IdempotencyRecord.UserId == bindparam("user_id", type_=IdempotencyRecord.UserId.type))
        & (
            IdempotencyRecord.Operation
            == bindparam("operation", type_=IdempotencyRecord.Operation.type)
        )
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
    """The key's committed record judged (`stored_answer`), read on its own."""
    record = session.execute(_record_read(), key_parameters(claim)).first()
    return None if record is None else stored_answer(claim, *record[1:])


def claim_key(session: Session, claim: IdempotencyClaim[R], now: datetime) -> HeldKey[R] | Answer:
    """Claim the key as the transaction's first statement: the row this transaction now holds,
    or the stored success to replay; 422 IDEMPOTENCY_KEY_REUSED, or 409 IDEMPOTENCY_IN_PROGRESS
    when another attempt still holds the key after the connection's lock wait."""
    dialect = session.get_bind().dialect.name
    for _ in range(3):
        record_id = uuid.uuid4()
        try:
            claimed = session.execute(
                claim_statement(dialect),
                {
                    "record_id": record_id,
                    **key_parameters(claim),
                    "request_hash": claim.request_hash,
                    "now": now,
                    **bounds(dialect),
                },
            ).first()
        except LockTimeout:
            # A server's lock timeout here is the wait on another attempt's key. SQLite's is the
            # write lock its BEGIN IMMEDIATE waits for (no uncommitted row of another exists
            # there): LOCK_TIMEOUT, as for any writer.
            if dialect != "sqlite":
                raise IdempotencyInProgress() from None
            raise
        if claimed is not None:
            return HeldKey(record_id, claim)
        record = session.execute(_record_read(), key_parameters(claim)).first()
        if record is None:
            continue  # pruned since the claim met it: claim again
        found, hash_, state, status, body = record
        answer = stored_answer(claim, hash_, state, status, body)
        if answer is not None:
            return answer
        # Committed InProgress: abandoned by the code before this protocol (module docstring).
        session.execute(
            delete(IdempotencyRecord).where(
                IdempotencyRecord.Id == found, IdempotencyRecord.State == _IN_PROGRESS
            )
        )
    raise IdempotencyInProgress()


def store_success(session: Session, success: SuccessRecord) -> None:
    """Complete the row this transaction claimed, in the money's transaction."""
    session.execute(
        update(IdempotencyRecord)
        .where(IdempotencyRecord.Id == success.record_id)
        .values(
            State=_COMPLETED,
            ResponseStatus=success.status,
            ResponseBody=success.body,
            CompletedAt=success.completed_at,
        )
        .execution_options(synchronize_session=False)
    )


class _Replay(Exception):
    """The key's stored answer, carried out of a transaction that wrote nothing."""

    def __init__(self, answer: Answer) -> None:
        super().__init__("replay")
        self.answer = answer


def run_keyed(
    open_unit: Callable[[], AbstractContextManager[Session]],
    claim: IdempotencyClaim[R],
    clock: Clock,
    move: Callable[[Session, HeldKey[R]], Answer],
) -> Answer:
    """Run the money transaction of `claim`: the key claimed first, then `move` (which moves the
    money and stores `held.success(receipt)` with it), in the retry loop; a commit whose
    connection was lost is resolved by running the transaction once more (module docstring)."""

    def attempt(session: Session) -> Answer:
        held = claim_key(session, claim, clock.now())
        if isinstance(held, Answer):
            raise _Replay(held)  # nothing was written: the transaction rolls back, no COMMIT
        return move(session, held)

    def transaction() -> Answer:
        try:
            return run_money_transaction(open_unit, attempt)
        except _Replay as replay:
            return replay.answer

    try:
        return transaction()
    except CommitLost as lost:
        sent = lost.result
    log.warning("%s: the connection was lost during COMMIT; asking the key", claim.operation)
    try:
        again = transaction()
    except (CommitLost, DatabaseUnavailable):
        raise OutcomeUnknown() from None
    if isinstance(sent, Answer) and again.replayed and again.body == sent.body:
        # The lost commit landed: this is our own first answer, not an earlier request's.
        return sent
    return again
