"""Idempotency keys for money operations (ADR-0009, docs/http.md, the IETF Idempotency-Key draft).

Keys are scoped to (user, operation). The protocol:

1. Claim: in a short transaction of its own, look the key up.
   - Completed, same request hash → replay the stored status and body byte-for-byte.
   - Any record with another request hash → 422 IDEMPOTENCY_KEY_REUSED.
   - InProgress, same hash → 409 IDEMPOTENCY_IN_PROGRESS (a duplicate still in flight).
   - Absent → insert an InProgress marker and commit it, BEFORE the money's transaction, so a
     concurrent duplicate sees it (the unique (UserId, Operation, Key) decides a tie).
2. The money's transaction completes the marker (State Completed, status, body) in the SAME
   transaction as the money: a success is stored if and only if the money moved. The operation
   hands its writer a `SuccessRecord` (the marker's Id and the answer); the writer stores it with
   `store_success`, or in the one batch of its other writes, and either way a marker that is no
   longer ours rolls the money back (`ClaimLost`).
3. A refusal or fault deletes the marker (never stored, never replayed: the next try with the key
   is evaluated afresh, ADR-0050 A3.4).

A process that dies between 1 and 3 leaves a marker whose money never committed (2 is atomic with
the money). After `in_progress_seconds` such a marker is taken over: deleted and claimed anew under
a new Id. Completion is conditional on the Id still being ours and InProgress, so even a request
that outlived its marker cannot store (or commit) a second success for the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.exact import exact_equals
from shared.db.faults import DriverFault, map_driver_faults
from shared.db.schema import IdempotencyRecord, IdempotencyState
from shared.db.storable_text import column_length
from shared.db.uow import writing_unit_of_work
from shared.db.writes import rows_matched
from shared.money.refusals import IdempotencyInProgress, IdempotencyKeyReused, LockTimeout

T = TypeVar("T")

log = logging.getLogger("azurebank.money")

MAX_KEY_LENGTH = column_length(IdempotencyRecord.Key)  # 255


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
class StoredResponse:
    """A success as it was first answered; replayed byte-for-byte."""

    status: int
    body: str


@dataclass(frozen=True)
class IdempotencyClaim:
    """An InProgress marker this request holds."""

    record_id: uuid.UUID
    user_id: str
    operation: str
    key: str
    request_hash: str


@dataclass(frozen=True)
class SuccessRecord:
    """A success to store in the money's own transaction: it completes the marker `record_id`
    only while that marker is still InProgress (still ours)."""

    record_id: uuid.UUID
    status: int
    body: str
    completed_at: datetime


# What a money operation calls with its receipt inside its transaction, before the commit: the
# success its writer must store with the money (the idempotency record).
SuccessHook = Callable[[Any], SuccessRecord]


def store_success(session: Session, record: SuccessRecord) -> None:
    """Complete the marker in the money's transaction; raise ClaimLost when it is no longer ours
    (the caller's transaction must then roll back)."""
    completed = rows_matched(
        session,
        update(IdempotencyRecord)
        .where(
            IdempotencyRecord.Id == record.record_id,
            IdempotencyRecord.State == IdempotencyState.IN_PROGRESS.value,
        )
        .values(
            State=IdempotencyState.COMPLETED.value,
            ResponseStatus=record.status,
            ResponseBody=record.body,
            CompletedAt=record.completed_at,
        )
        .execution_options(synchronize_session=False),
    )
    if completed != 1:
        raise ClaimLost()


class ClaimLost(Exception):
    """Our marker was taken over (we outlived `in_progress_seconds`); our money rolls back."""


class IdempotencyKeys:
    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        lock_timeout_seconds: int,
        in_progress_seconds: int = 300,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._lock_timeout_seconds = lock_timeout_seconds
        self._stale_after = timedelta(seconds=in_progress_seconds)

    @contextmanager
    def _unit(self) -> Iterator[Session]:
        # A marker's transaction is a few statements; it waits for the right to write no longer
        # than the money would (DailyLimit__LockTimeoutSeconds), and a wait that runs out is the
        # same 503 LOCK_TIMEOUT, never a 500.
        faults = {DriverFault.LOCK_TIMEOUT: LockTimeout}
        with (
            map_driver_faults(self._engine.dialect.name, faults),
            writing_unit_of_work(self._engine, wait_seconds=self._lock_timeout_seconds) as session,
        ):
            yield session

    def claim(
        self, user_id: str, operation: str, key: str, hash_: str
    ) -> IdempotencyClaim | StoredResponse:
        """Claim the key for this request, or return the stored success to replay; raise 422
        IDEMPOTENCY_KEY_REUSED or 409 IDEMPOTENCY_IN_PROGRESS."""
        for _ in range(3):
            now = self._clock.now()
            with self._unit() as session:
                record = self._find(session, user_id, operation, key)
                if record is not None:
                    outcome = self._judge(session, record, hash_, now)
                    if outcome is not None:
                        return outcome
                    # A stale marker was deleted in this transaction: claim in its place.
                claim = IdempotencyClaim(uuid.uuid4(), user_id, operation, key, hash_)
                session.add(
                    IdempotencyRecord(
                        Id=claim.record_id,
                        UserId=user_id,
                        Operation=operation,
                        Key=key,
                        RequestHash=hash_,
                        State=IdempotencyState.IN_PROGRESS.value,
                        CreatedAt=now,
                    )
                )
                try:
                    session.commit()
                except IntegrityError:
                    # A concurrent duplicate claimed first: look again.
                    continue
                return claim
        raise IdempotencyInProgress()

    def _find(
        self, session: Session, user_id: str, operation: str, key: str
    ) -> IdempotencyRecord | None:
        return session.scalar(
            select(IdempotencyRecord).where(
                IdempotencyRecord.UserId == user_id,
                IdempotencyRecord.Operation == operation,
                # Exact on every dialect, trailing spaces included (docs/database.md).
                exact_equals(IdempotencyRecord.Key, key),
            )
        )

    def _judge(
        self, session: Session, record: IdempotencyRecord, hash_: str, now: datetime
    ) -> StoredResponse | None:
        if record.RequestHash != hash_:
            raise IdempotencyKeyReused()
        if record.State == IdempotencyState.COMPLETED.value:
            assert record.ResponseStatus is not None and record.ResponseBody is not None
            return StoredResponse(record.ResponseStatus, record.ResponseBody)
        if now - record.CreatedAt < self._stale_after:
            raise IdempotencyInProgress()
        # Abandoned: its money never committed (completion is atomic with the money).
        session.execute(
            delete(IdempotencyRecord).where(
                IdempotencyRecord.Id == record.Id,
                IdempotencyRecord.State == IdempotencyState.IN_PROGRESS.value,
            )
        )
        return None

    def success(self, claim: IdempotencyClaim, status: int, body: str) -> SuccessRecord:
        """The success that completes `claim`, for the money's writer to store."""
        return SuccessRecord(claim.record_id, status, body, self._clock.now())

    def release(self, claim: IdempotencyClaim) -> None:
        """A refusal or fault: drop the marker, so the key is evaluated afresh next time."""
        with self._unit() as session:
            session.execute(
                delete(IdempotencyRecord).where(
                    IdempotencyRecord.Id == claim.record_id,
                    IdempotencyRecord.State == IdempotencyState.IN_PROGRESS.value,
                )
            )
            session.commit()

    def run(
        self,
        user_id: str,
        operation: str,
        key: str,
        canonical: Mapping[str, Any],
        action: Callable[[Callable[[str], SuccessRecord]], T],
        *,
        status: int,
    ) -> tuple[StoredResponse, bool]:
        """Run `action` at most once per key and answer (response, replayed).

        `action(success)` performs the money operation; inside its transaction, before the
        commit, it calls `success(body)` with the exact body it answers and stores the record
        that returns with its money."""
        hash_ = request_hash(operation, canonical)
        outcome = self.claim(user_id, operation, key, hash_)
        if isinstance(outcome, StoredResponse):
            return outcome, True
        claim = outcome
        stored: list[str] = []

        def success(body: str) -> SuccessRecord:
            # The last attempt's body is the one its commit stored (a lost race runs again).
            stored.append(body)
            return self.success(claim, status, body)

        try:
            action(success)
        except ClaimLost:
            # Our money rolled back; whoever holds the key now answers for it.
            again = self.claim(user_id, operation, key, hash_)
            if isinstance(again, StoredResponse):
                return again, True
            self.release(again)
            raise IdempotencyInProgress() from None
        except BaseException:
            try:
                self.release(claim)
            except Exception:  # the refusal is the answer; a stale marker ages out (see above)
                log.warning("Could not release an idempotency marker; it will be taken over")
            raise
        return StoredResponse(status, stored[-1]), False
