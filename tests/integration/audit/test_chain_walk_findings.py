"""The chain walk behind `audit verify`, in this process, on SQLite and PostgreSQL: what it
reports for an intact chain and for each kind of tamper, line for line (the command's tests run
it as a real process and check the exit codes; these pin every finding's wording, the runs of
missing rows, the tail's checks and the wrong-key hint)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, delete, insert, text, update

from shared.audit import verify
from shared.audit.chain import AuditChain, render_details
from shared.audit.verify import ChainReport, walk_chain
from shared.db.schema import AuditChainTail, AuditEvent
from shared.db.uow import unit_of_work
from shared.settings import SettingsError, load_settings
from tests.support.clock import FakeClock

KEY = b"k" * 32
RUN = 10


def _chain(engine: Engine, rows: int = RUN) -> dict[int, uuid.UUID]:
    """`rows` appends, one transaction each; Sequence → Id."""
    chain, clock = AuditChain(KEY), FakeClock()
    ids: dict[int, uuid.UUID] = {}
    for n in range(1, rows + 1):
        with unit_of_work(engine) as session:
            ids[n] = chain.append(
                session,
                actor_user_id=f"user-{n % 3}",
                event="PinChanged",
                occurred_at=clock.advance(timedelta(seconds=1)),
                details={"n": n},
            )
            session.commit()
    return ids


def _tamper(engine: Engine, *statements: Any) -> None:
    with unit_of_work(engine) as session:
        for statement in statements:
            session.execute(statement)
        session.commit()


def _walk(engine: Engine, key: bytes = KEY, **options: Any) -> ChainReport:
    with unit_of_work(engine) as session:
        return walk_chain(session, AuditChain(key), **options)


def _lines(report: ChainReport) -> list[str]:
    return [finding.line() for finding in report.findings]


def _at(sequence: int) -> Any:
    return AuditEvent.Sequence == sequence


HASH_FAILS = (
    "its RowHash does not verify (an edited field, a re-keyed Id, or another Audit__ChainKey)"
)
LINK_FAILS = (
    "its PreviousHash is not the RowHash of the row before it (rows swapped, moved or inserted)"
)


def test_an_intact_chain_reports_every_row_and_no_finding(engine: Engine) -> None:
    _chain(engine)
    report = _walk(engine)
    assert (report.rows, report.last_sequence, report.findings) == (RUN, RUN, [])
    assert report.intact and not report.every_row_fails_hmac


def test_an_intact_chain_of_one_row_is_not_taken_for_a_wrong_key(engine: Engine) -> None:
    _chain(engine, rows=1)
    report = _walk(engine)
    assert report.intact and not report.every_row_fails_hmac


def test_an_empty_chain_is_intact_with_no_rows(engine: Engine) -> None:
    report = _walk(engine)
    assert (report.rows, report.last_sequence, report.intact) == (0, 0, True)
    assert not report.every_row_fails_hmac


def test_an_edited_row_is_named_alone_by_its_sequence_and_id(engine: Engine) -> None:
    ids = _chain(engine)
    _tamper(engine, update(AuditEvent).where(_at(4)).values(Details='{"n":400}'))
    report = _walk(engine)
    assert _lines(report) == [f"row 4 (Id {ids[4]}): {HASH_FAILS}"]
    assert (report.rows, report.intact, report.every_row_fails_hmac) == (RUN, False, False)


@pytest.mark.parametrize(
    ("deleted", "named", "missing"),
    [((5,), 6, "Sequence 5"), ((5, 6, 7), 8, "Sequence 5–7")],
    ids=["one", "a-run"],
)
def test_deleted_rows_are_named_at_the_row_after_them(
    engine: Engine, deleted: tuple[int, ...], named: int, missing: str
) -> None:
    ids = _chain(engine)
    _tamper(engine, delete(AuditEvent).where(AuditEvent.Sequence.in_(deleted)))
    report = _walk(engine)
    # The row after the gap still links to the deleted row's hash: only the gap is named.
    assert _lines(report) == [
        f"row {named} (Id {ids[named]}): rows missing before it ({missing}: deleted)"
    ]


@pytest.mark.parametrize(
    ("first_deleted", "missing"), [(10, "Sequence 10"), (8, "Sequence 8–10")], ids=["one", "run"]
)
def test_rows_deleted_at_the_end_are_named_against_the_tail(
    engine: Engine, first_deleted: int, missing: str
) -> None:
    _chain(engine)
    _tamper(engine, delete(AuditEvent).where(AuditEvent.Sequence >= first_deleted))
    report = _walk(engine)
    assert _lines(report) == [f"row {RUN}: rows missing at the end ({missing}: deleted)"]
    assert report.last_sequence == first_deleted - 1


def test_two_swapped_rows_and_the_row_after_them_are_named_for_their_links(
    engine: Engine,
) -> None:
    ids = _chain(engine)
    _tamper(
        engine,
        update(AuditEvent).where(_at(6)).values(Sequence=-6),
        update(AuditEvent).where(_at(7)).values(Sequence=6),
        update(AuditEvent).where(_at(-6)).values(Sequence=7),
    )
    assert _lines(_walk(engine)) == [
        f"row 6 (Id {ids[7]}): {LINK_FAILS}; {HASH_FAILS}",
        f"row 7 (Id {ids[6]}): {LINK_FAILS}; {HASH_FAILS}",
        f"row 8 (Id {ids[8]}): {LINK_FAILS}",
    ]


@pytest.mark.parametrize("rows", [1, 4])
def test_a_wrong_key_fails_every_row_and_says_so(engine: Engine, rows: int) -> None:
    ids = _chain(engine, rows=rows)
    report = _walk(engine, b"z" * 32)
    assert _lines(report) == [f"row {n} (Id {ids[n]}): {HASH_FAILS}" for n in ids]
    assert report.every_row_fails_hmac


def test_a_row_of_an_unknown_payload_version_is_named_without_a_hash_check(
    engine: Engine,
) -> None:
    ids = _chain(engine, rows=3)
    _tamper(engine, update(AuditEvent).where(_at(2)).values(PayloadVersion=9))
    report = _walk(engine)
    assert _lines(report) == [f"row 2 (Id {ids[2]}): unknown PayloadVersion 9"]
    assert not report.every_row_fails_hmac


def test_a_missing_tail_row_is_the_one_finding(engine: Engine) -> None:
    _chain(engine, rows=2)
    _tamper(engine, delete(AuditChainTail))
    report = _walk(engine)
    assert (_lines(report), report.rows) == (["row 0: the chain's tail row is missing"], 0)


def test_a_tail_that_does_not_hold_the_last_rows_hash_is_named(engine: Engine) -> None:
    _chain(engine, rows=3)
    _tamper(engine, update(AuditChainTail).values(LastHash=b"\x01" * 32))
    assert _lines(_walk(engine)) == ["row 3: the tail's LastHash is not the last row's RowHash"]


def test_rows_past_the_tail_read_first_are_left_for_the_next_walk(engine: Engine) -> None:
    """A row appended while the walk runs is past the tail the walk read: not walked, not
    named (here: the tail moved back onto row 8, as it stood before rows 9 and 10)."""
    ids = _chain(engine)
    with unit_of_work(engine) as session:
        hash_of_eighth = bytes(session.get_one(AuditEvent, ids[8]).RowHash)
    _tamper(engine, update(AuditChainTail).values(LastSequence=8, LastHash=hash_of_eighth))
    report = _walk(engine)
    assert (report.rows, report.last_sequence, report.findings) == (8, 8, [])


def test_a_chain_longer_than_one_batch_is_walked_whole(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _chain(engine, rows=7)
    _tamper(engine, update(AuditEvent).where(_at(5)).values(Details="{}"))
    monkeypatch.setattr(verify, "_BATCH", 2)
    report = _walk(engine)
    assert (report.rows, _lines(report)) == (7, [f"row 5 (Id {ids[5]}): {HASH_FAILS}"])


def test_progress_is_reported_every_ten_thousand_rows(engine: Engine) -> None:
    rows = 10_000
    _bulk_chain(engine, rows)
    seen: list[int] = []
    report = _walk(engine, progress=seen.append)
    assert (report.rows, report.intact, seen) == (rows, True, [rows])


def _bulk_chain(engine: Engine, rows: int, *, reverse: bool = False) -> None:
    """`rows` chained rows written in one statement (appending them one by one takes long),
    the last first when `reverse`."""
    chain, clock = AuditChain(KEY), FakeClock()
    values, previous = [], bytes(32)
    for n in range(1, rows + 1):
        row = AuditEvent(
            Id=uuid.uuid4(),
            Sequence=n,
            PayloadVersion=1,
            ActorUserId="user",
            Event="PinChanged",
            OccurredAt=clock.now(),
            Details=render_details({"n": n}),
            PreviousHash=previous,
        )
        row.RowHash = previous = chain.hash_of(row)
        values.append({c.key: getattr(row, c.key) for c in AuditEvent.__table__.columns})
    with unit_of_work(engine) as session:
        session.execute(insert(AuditEvent), values[::-1] if reverse else values)
        session.execute(update(AuditChainTail).values(LastSequence=rows, LastHash=previous))
        session.commit()


def test_the_chain_without_its_key_names_the_key_why_and_the_fix() -> None:
    with pytest.raises(SettingsError) as refused:
        AuditChain.from_settings(load_settings({}))
    assert refused.value.problems == [
        "Audit__ChainKey: missing; this host writes or verifies audit rows. Fix: set "
        "Audit__ChainKey to base64 of at least 32 random bytes (e.g. `openssl rand -base64 32`)."
    ]


def test_rows_stored_out_of_sequence_order_are_walked_in_sequence_order(engine: Engine) -> None:
    """Rows the database holds in another order (written last first, as a restore might) are
    still walked by Sequence: the walk does not lean on the order rows come back in."""
    _bulk_chain(engine, 12, reverse=True)
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:  # the planner learns the table is small: a plain scan
            conn.execute(text('ANALYZE "AuditEvents"'))
            conn.commit()
    report = _walk(engine)
    assert (report.rows, report.findings) == (12, [])
