"""`azurebank audit verify` as a real process (docs/cli.md): exit 0 on an intact chain;
each tamper kind — an edited field, a deleted row, a re-keyed Id (ADR-0052 D4), two rows swapped,
a wrong key — exits 1 naming the row; a missing or invalid Audit__ChainKey exits 78 naming it."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from shared.audit.chain import AuditChain
from shared.db.engine import get_engine
from shared.db.schema import AuditEvent
from shared.db.uow import unit_of_work
from tests.support.audit import run_audit_verify
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY

KEY = base64.b64decode(CHAIN_KEY)


verify = run_audit_verify


def verify_json(url: str, key: str = CHAIN_KEY) -> tuple[int, dict[str, Any]]:
    done = verify(url, "--json", key=key)
    return done.returncode, json.loads(done.stdout)


def build_chain(url: str, rows: int = 10) -> dict[int, uuid.UUID]:
    """`rows` audited writes, one transaction each; Sequence → Id."""
    chain, clock = AuditChain(KEY), FakeClock()
    ids: dict[int, uuid.UUID] = {}
    for n in range(1, rows + 1):
        with unit_of_work(get_engine(url)) as session:
            ids[n] = chain.append(
                session,
                actor_user_id=f"user-{n % 3}",
                event="PinChanged",
                occurred_at=clock.advance(timedelta(seconds=1)),
                details={"n": n},
            )
            session.commit()
    return ids


def tamper(url: str, *statements: Any) -> None:
    with unit_of_work(get_engine(url)) as session:
        for statement in statements:
            session.execute(statement)
        session.commit()


def _at(sequence: int) -> Any:
    return AuditEvent.Sequence == sequence


def test_an_intact_chain_exits_0(fresh_postgres_url: str) -> None:
    build_chain(fresh_postgres_url)
    done = verify(fresh_postgres_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chain intact: 10 rows (Sequence 1..10)" in done.stdout
    code, report = verify_json(fresh_postgres_url)
    assert (code, report["intact"], report["rows"], report["findings"]) == (0, True, 10, [])


def test_an_empty_chain_is_intact(sqlite_url: str) -> None:
    done = verify(sqlite_url)
    assert done.returncode == 0 and "chain intact: 0 rows (empty)" in done.stdout


@pytest.mark.parametrize(
    "edit",
    [
        {"Details": '{"n":400}'},
        {"Event": "PinEnrolled"},
        {"ActorUserId": "someone-else"},
        {"ActorUserId": None},
        {"OccurredAt": FakeClock().now()},
    ],
    ids=["details", "event", "actor", "actor-nulled", "occurred-at"],
)
def test_an_edited_field_exits_1_naming_that_row_only(
    fresh_postgres_url: str, edit: dict[str, Any]
) -> None:
    ids = build_chain(fresh_postgres_url)
    tamper(fresh_postgres_url, update(AuditEvent).where(_at(4)).values(**edit))
    done = verify(fresh_postgres_url)
    assert done.returncode == 1
    assert f"BROKEN row 4 (Id {ids[4]}): its RowHash does not verify" in done.stdout
    code, report = verify_json(fresh_postgres_url)
    assert code == 1 and [f["sequence"] for f in report["findings"]] == [4]


def test_a_deleted_row_exits_1_naming_the_gap_and_the_row_after_it(fresh_postgres_url: str) -> None:
    ids = build_chain(fresh_postgres_url)
    tamper(fresh_postgres_url, delete(AuditEvent).where(_at(5)))
    done = verify(fresh_postgres_url)
    assert done.returncode == 1
    assert f"BROKEN row 6 (Id {ids[6]}): rows missing before it (Sequence 5: deleted)" in (
        done.stdout
    )
    assert [f["sequence"] for f in verify_json(fresh_postgres_url)[1]["findings"]] == [6]


def test_deleted_rows_at_the_end_are_named_against_the_tail(fresh_postgres_url: str) -> None:
    build_chain(fresh_postgres_url)
    tamper(fresh_postgres_url, delete(AuditEvent).where(AuditEvent.Sequence >= 9))
    done = verify(fresh_postgres_url)
    assert done.returncode == 1
    assert "BROKEN row 10: rows missing at the end (Sequence 9–10: deleted)" in done.stdout


@pytest.mark.adr("0052", "D4")
def test_a_re_keyed_id_exits_1_naming_the_row_by_its_new_id(fresh_postgres_url: str) -> None:
    # ADR-0052 D4: Id is element three, so giving a row another identity breaks its hash.
    build_chain(fresh_postgres_url)
    new_id = uuid.uuid4()
    tamper(fresh_postgres_url, update(AuditEvent).where(_at(3)).values(Id=new_id))
    done = verify(fresh_postgres_url)
    assert done.returncode == 1
    assert f"BROKEN row 3 (Id {new_id}): its RowHash does not verify" in done.stdout
    assert [f["sequence"] for f in verify_json(fresh_postgres_url)[1]["findings"]] == [3]


def test_two_swapped_rows_exit_1_naming_both(fresh_postgres_url: str) -> None:
    ids = build_chain(fresh_postgres_url)
    tamper(
        fresh_postgres_url,
        update(AuditEvent).where(_at(6)).values(Sequence=-6),
        update(AuditEvent).where(_at(7)).values(Sequence=6),
        update(AuditEvent).where(_at(-6)).values(Sequence=7),
    )
    done = verify(fresh_postgres_url)
    assert done.returncode == 1
    assert f"BROKEN row 6 (Id {ids[7]})" in done.stdout
    assert f"BROKEN row 7 (Id {ids[6]})" in done.stdout
    findings = verify_json(fresh_postgres_url)[1]["findings"]
    # Row 8 is named too: its link points at the row the swap moved to sequence 6.
    assert [f["sequence"] for f in findings] == [6, 7, 8]
    assert "RowHash does not verify" not in findings[2]["problem"]


def test_a_wrong_key_exits_1_naming_every_row_and_saying_the_key_is_the_likely_cause(
    fresh_postgres_url: str,
) -> None:
    build_chain(fresh_postgres_url, rows=4)
    other = base64.b64encode(b"z" * 32).decode()
    done = verify(fresh_postgres_url, key=other)
    assert done.returncode == 1
    assert [line for line in done.stdout.splitlines() if "BROKEN row" in line] == [
        line for line in done.stdout.splitlines() if "RowHash does not verify" in line
    ]
    assert done.stdout.count("BROKEN row") == 4
    assert "Audit__ChainKey is probably not the key that wrote this chain" in done.stdout
    code, report = verify_json(fresh_postgres_url, key=other)
    assert code == 1 and report["hint"] and len(report["findings"]) == 4


@pytest.mark.parametrize(
    "key",
    [None, "", "not base64 at all!", base64.b64encode(b"short").decode()],
    ids=["unset", "blank", "not-base64", "too-short"],
)
def test_a_missing_or_invalid_chain_key_exits_78_naming_the_key_and_the_fix(
    sqlite_url: str, key: str | None
) -> None:
    done = verify(sqlite_url, key=key)
    assert done.returncode == 78
    assert "Audit__ChainKey" in done.stderr
    assert "openssl rand -base64 32" in done.stderr
    if key:
        assert key not in done.stderr  # a key, even a wrong one, is never echoed


def test_an_edited_row_is_found_on_sqlite_too(sqlite_url: str) -> None:
    ids = build_chain(sqlite_url, rows=3)
    tamper(sqlite_url, update(AuditEvent).where(_at(2)).values(Details="{}"))
    done = verify(sqlite_url)
    assert done.returncode == 1 and f"BROKEN row 2 (Id {ids[2]})" in done.stdout
    with unit_of_work(get_engine(sqlite_url)) as session:
        assert session.scalar(select(AuditEvent.Details).where(_at(2))) == "{}"
