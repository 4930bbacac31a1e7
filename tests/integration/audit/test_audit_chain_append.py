"""AuditChain.append on real databases: the Id it returns is the row's (ADR-0052 D5), Sequence is
contiguous and the chain unforked under concurrent appends, because every append takes the tail
lock (docs/architecture.md#lock-order). The control (`AZUREBANK_RUN_CONTROLS=1`) runs the same test
with an append that reads the tail without the lock, and must fail."""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from shared.audit import tail_sql
from shared.audit.chain import GENESIS_HASH, AuditChain, ChainTail
from shared.audit.verify import walk_chain
from shared.db.engine import build_engine
from shared.db.schema import AuditChainTail, AuditEvent
from shared.db.uow import unit_of_work
from tests.support.audit import run_audit_verify
from tests.support.clock import FakeClock

KEY = b"k" * 32  # tests.support's Audit__ChainKey, decoded
RUN_CONTROLS = os.environ.get("AZUREBANK_RUN_CONTROLS") == "1"


class ChainWithoutTheTailLock(AuditChain):
    """The control: the real append, but the tail is read with no lock (never used in code)."""

    def lock_tail(self, session: Session) -> ChainTail:
        row = session.execute(tail_sql.tail_unlocked_read()).one()
        return ChainTail(int(row[0]), bytes(row[1]))


@pytest.mark.adr("0052", "D5")
def test_append_returns_the_id_it_minted_and_chains_onto_the_tail(engine: Engine) -> None:
    chain, clock = AuditChain(KEY), FakeClock()
    with unit_of_work(engine) as session:
        first = chain.append(
            session, actor_user_id="u1", event="PinEnrolled", occurred_at=clock.now()
        )
        second = chain.append(
            session,
            actor_user_id="u1",
            event="PinChanged",
            occurred_at=clock.now(),
            details={"reason": "test"},
        )
        session.commit()
    with unit_of_work(engine) as session:
        rows = list(session.scalars(select(AuditEvent).order_by(AuditEvent.Sequence)))
        tail = session.get_one(AuditChainTail, 1)
    assert [r.Id for r in rows] == [first, second]  # ADR-0052 D5: the Id minted before the save
    assert [r.Sequence for r in rows] == [1, 2]
    assert rows[0].PreviousHash == GENESIS_HASH
    assert rows[1].PreviousHash == rows[0].RowHash
    assert all(chain.hash_of(r) == r.RowHash for r in rows)
    assert (tail.LastSequence, tail.LastHash) == (2, rows[1].RowHash)
    assert rows[1].Details == '{"reason":"test"}'


def test_append_does_not_commit_so_a_rollback_leaves_no_row_and_the_tail_unmoved(
    engine: Engine,
) -> None:
    with unit_of_work(engine) as session:
        AuditChain(KEY).append(
            session, actor_user_id="u1", event="PinEnrolled", occurred_at=FakeClock().now()
        )
        # no commit: the unit of work rolls back
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == 0
        assert session.get_one(AuditChainTail, 1).LastSequence == 0


def _hammer(url: str, chain: AuditChain, threads: int, writes: int) -> list[str]:
    """`threads` workers each commit `writes` appends, one per transaction; returns the errors."""
    clock = FakeClock()
    eng = build_engine(url)
    errors: list[str] = []
    start = threading.Barrier(threads)

    def worker(n: int) -> None:
        start.wait(timeout=60)
        for i in range(writes):
            try:
                with unit_of_work(eng) as session:
                    chain.append(
                        session,
                        actor_user_id=f"worker-{n}",
                        event="TransferCompleted",
                        occurred_at=clock.advance(timedelta(milliseconds=1)),
                        details={"n": n, "i": i},
                    )
                    session.commit()
            except Exception as exc:  # the control's forks surface here
                errors.append(type(exc).__name__)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=240)
    eng.dispose()
    return errors


@pytest.mark.parametrize(
    "locked",
    [
        pytest.param(True, id="tail-locked"),
        pytest.param(
            False,
            id="CONTROL-no-tail-lock",
            marks=pytest.mark.skipif(not RUN_CONTROLS, reason="control: AZUREBANK_RUN_CONTROLS=1"),
        ),
    ],
)
def test_eight_writers_times_fifty_appends_leave_a_contiguous_unforked_chain_on_a_server(
    server_url: str, locked: bool
) -> None:
    chain = AuditChain(KEY) if locked else ChainWithoutTheTailLock(KEY)
    errors = _hammer(server_url, chain, threads=8, writes=50)
    eng = build_engine(server_url)
    with unit_of_work(eng) as session:
        sequences = list(session.scalars(select(AuditEvent.Sequence).order_by(AuditEvent.Sequence)))
        report = walk_chain(session, AuditChain(KEY))
    eng.dispose()
    assert errors == [], f"{len(errors)} of 400 appends failed: {sorted(set(errors))}"
    assert sequences == list(range(1, 401))
    assert report.intact and report.rows == 400, [f.line() for f in report.findings]
    done = run_audit_verify(server_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chain intact: 400 rows (Sequence 1..400)" in done.stdout


def test_concurrent_appends_on_sqlite_serialise_on_the_databases_writer_lock(
    sqlite_url: str,
) -> None:
    errors = _hammer(sqlite_url, AuditChain(KEY), threads=4, writes=10)
    eng = build_engine(sqlite_url)
    with unit_of_work(eng) as session:
        report = walk_chain(session, AuditChain(KEY))
    eng.dispose()
    assert errors == []
    assert report.intact and report.rows == 40 and report.last_sequence == 40
