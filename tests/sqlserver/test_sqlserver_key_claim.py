"""The Idempotency-Key's claim on SQL Server (opt-in, AZUREBANK_TEST_SQLSERVER): the INSERT …
WHERE NOT EXISTS (… WITH (UPDLOCK, HOLDLOCK)) of shared/money/key_claim_sql.py inserts one row
per key; a second claim of a key another open transaction holds waits on it — at most the unit
of work's lock wait, then 409 IDEMPOTENCY_IN_PROGRESS (error 1222) — and goes in once that
transaction rolls back, or replays its answer once it commits. Not run on this machine (no SQL
Server); the batch's text is pinned by tests/unit/test_key_claim_sql.py and parsed as T-SQL by
tests/unit/test_tsql_parse.py."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, func, select

from shared.db.schema import IdempotencyRecord
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.money.idempotency import (
    Answer,
    HeldKey,
    IdempotencyClaim,
    claim_key,
    store_success,
)
from shared.money.refusals import IdempotencyInProgress

pytestmark = pytest.mark.sqlserver

NOW = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


def _claim(key: str) -> IdempotencyClaim[str]:
    return IdempotencyClaim("user-" + key[:8], "deposit", key, "h", 201, str)


def _rows(engine: Engine, key: str) -> int:
    with unit_of_work(engine) as session:
        found = session.scalar(
            select(func.count()).select_from(IdempotencyRecord).where(IdempotencyRecord.Key == key)
        )
    return int(found or 0)


@pytest.fixture
def engine(fresh_sqlserver_url: str) -> Engine:
    from shared.db.engine import get_engine

    return get_engine(fresh_sqlserver_url)


def test_a_held_key_is_waited_on_for_the_lock_wait_then_in_progress_then_free_on_rollback(
    engine: Engine,
) -> None:
    claim = _claim(uuid.uuid4().hex)
    with writing_unit_of_work(engine) as holder:
        assert isinstance(claim_key(holder, claim, NOW), HeldKey)
        started = time.monotonic()
        with (
            writing_unit_of_work(engine, wait_seconds=1) as waiter,
            pytest.raises(IdempotencyInProgress),
        ):
            claim_key(waiter, claim, NOW)
        assert 0.9 <= time.monotonic() - started < 15
        holder.rollback()
    with writing_unit_of_work(engine, wait_seconds=1) as again:
        assert isinstance(claim_key(again, claim, NOW), HeldKey)
        again.commit()  # InProgress committed: what the protocol before this one left
    with writing_unit_of_work(engine, wait_seconds=1) as taken_over:
        held = claim_key(taken_over, claim, NOW)
        assert isinstance(held, HeldKey)
        store_success(taken_over, held.success("done", NOW))
        taken_over.commit()
    assert _rows(engine, claim.key) == 1


def test_a_claim_waiting_on_a_transaction_that_commits_replays_its_answer(engine: Engine) -> None:
    claim = _claim(uuid.uuid4().hex)
    seen: dict[str, object] = {}
    with writing_unit_of_work(engine) as holder:
        held = claim_key(holder, claim, NOW)
        assert isinstance(held, HeldKey)

        def duplicate() -> None:
            with writing_unit_of_work(engine, wait_seconds=10) as waiter:
                seen["answer"] = claim_key(waiter, claim, NOW)

        thread = threading.Thread(target=duplicate)
        thread.start()
        time.sleep(0.5)
        assert "answer" not in seen  # waiting on the uncommitted row
        store_success(holder, held.success("first", NOW))
        holder.commit()
    thread.join(timeout=30)
    assert seen["answer"] == Answer(201, "first", replayed=True)
    assert _rows(engine, claim.key) == 1


def test_two_claims_of_an_absent_key_at_once_insert_one_row(engine: Engine) -> None:
    """UPDLOCK + HOLDLOCK: both reads find no row, but the range lock lets one insert; the
    other waits, then reads the winner's row (committed here) instead of inserting a second."""
    claim = _claim(uuid.uuid4().hex)
    barrier = threading.Barrier(2)
    answers: list[object] = []

    def claimer(body: str) -> None:
        with writing_unit_of_work(engine, wait_seconds=10) as session:
            barrier.wait()
            held = claim_key(session, claim, NOW)
            if isinstance(held, HeldKey):
                store_success(session, held.success(body, NOW))
                session.commit()
            answers.append(held)

    threads = [threading.Thread(target=claimer, args=(b,)) for b in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(type(a).__name__ for a in answers) == ["Answer", "HeldKey"]
    assert _rows(engine, claim.key) == 1
