"""Idempotency keys for money operations (ADR-0009, DESIGN §5, the IETF Idempotency-Key draft).

Keys are scoped to (user, operation). The protocol:

1. Claim: in a short transaction of its own, look the key up.
   - Completed, same request hash → replay the stored status and body byte-for-byte.
   - Any record with another request hash → 422 IDEMPOTENCY_KEY_REUSED.
   - InProgress, same hash → 409 IDEMPOTENCY_IN_PROGRESS (a duplicate still in flight).
   - Absent → insert an InProgress marker and commit it, BEFORE the money's transaction, so a
     concurrent duplicate sees it (the unique (UserId, Operation, Key) decides a tie).
2. The money's transaction completes the marker (State Completed, status, body) in the SAME
   transaction as the money: a success is stored if and only if the money moved.
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
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.exact import exact_equals
from shared.db.schema import IdempotencyRecord, IdempotencyState
from shared.db.storable_text import column_length
from shared.db.uow import unit_of_work
from shared.db.writes import rows_matched
from shared.money.applock_sql import is_lock_timeout
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
        self._lock_timeout_ms = lock_timeout_seconds * 1000
        self._stale_after = timedelta(seconds=in_progress_seconds)

    @contextmanager
    def _unit(self) -> Iterator[Session]:
        # A marker's transaction is a few statements; on SQLite it waits for the one writer no
        # longer than the money would (DailyLimit__LockTimeoutSeconds), and a wait that runs out
        # is the same 503 LOCK_TIMEOUT, never a 500.
        try:
            with unit_of_work(
                self._engine,
                sqlite_begin="IMMEDIATE",
                sqlite_busy_timeout_ms=self._lock_timeout_ms,
            ) as session:
                yield session
        except DBAPIError as exc:
            if is_lock_timeout(exc, self._engine.dialect.name):
                raise LockTimeout() from None
            raise

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

    def complete(self, session: Session, claim: IdempotencyClaim, status: int, body: str) -> None:
        """Store the success in the money's own transaction; raise ClaimLost when the marker is
        no longer ours (the caller's transaction must then roll back)."""
        completed = rows_matched(
            session,
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.Id == claim.record_id,
                IdempotencyRecord.State == IdempotencyState.IN_PROGRESS.value,
            )
            .values(
                State=IdempotencyState.COMPLETED.value,
                ResponseStatus=status,
                ResponseBody=body,
                CompletedAt=self._clock.now(),
            )
            .execution_options(synchronize_session=False),
        )
        if completed != 1:
            raise ClaimLost()

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
        action: Callable[[Callable[[Session, str], None]], T],
        *,
        status: int,
    ) -> tuple[StoredResponse, bool]:
        """Run `action` at most once per key and answer (response, replayed).

        `action(store)` performs the money operation; it must call `store(session, body)` inside
        its transaction, before the commit, with the exact body it answers."""
        hash_ = request_hash(operation, canonical)
        outcome = self.claim(user_id, operation, key, hash_)
        if isinstance(outcome, StoredResponse):
            return outcome, True
        claim = outcome
        stored: list[str] = []

        def store(session: Session, body: str) -> None:
            self.complete(session, claim, status, body)
            stored.append(body)

        try:
            action(store)
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
