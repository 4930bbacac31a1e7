"""AuditChain.compute_row_hash: an explicit, versioned field list, Id as element three, HMAC-SHA256
under Audit__ChainKey chaining the previous row's hash (ADR-0052 D1, D4)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.dialects import mssql, postgresql, sqlite

from shared.audit import tail_sql
from shared.audit.chain import (
    CURRENT_PAYLOAD_VERSION,
    PAYLOAD_FIELDS,
    AuditChain,
    render_details,
    render_payload,
    uuid7,
)
from shared.settings import SettingsError, load_settings

KEY = b"k" * 32
ROW: dict[str, Any] = {
    "payload_version": 1,
    "sequence": 1,
    "id": uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"),
    "actor_user_id": "user-1",
    "event": "PinEnrolled",
    "occurred_at": datetime(2026, 9, 7, 12, 0, 0, 123456, tzinfo=UTC),
    "details": None,
    "previous_hash": bytes(32),
}


def _field(raw: bytes) -> bytes:
    return b"\x01" + len(raw).to_bytes(4, "big") + raw


@pytest.mark.adr("0052", "D4")
def test_the_v1_field_list_is_explicit_and_names_id_as_element_three() -> None:
    # ADR-0052 D4: giving a row another identity must break its hash.
    assert PAYLOAD_FIELDS[1][2] == "Id"
    assert PAYLOAD_FIELDS[1] == (
        "PayloadVersion",
        "Sequence",
        "Id",
        "ActorUserId",
        "Event",
        "OccurredAt",
        "Details",
        "PreviousHash",
    )
    assert CURRENT_PAYLOAD_VERSION == 1


def test_the_v1_payload_is_length_prefixed_fields_in_list_order_with_a_null_marker() -> None:
    expected = (
        _field(b"1")
        + _field(b"1")
        + _field(b"01890a5d-ac96-774b-bcce-b302099a8057")
        + _field(b"user-1")
        + _field(b"PinEnrolled")
        + _field(b"2026-09-07T12:00:00.123456Z")
        + b"\x00"  # Details: null
        + _field(bytes(32))
    )
    assert render_payload(**ROW) == expected


def test_a_pinned_row_hash_vector_is_hmac_sha256_of_the_payload_under_the_key() -> None:
    # Pinned so a change to the renderer cannot pass silently: every stored RowHash depends on it.
    digest = AuditChain(KEY).compute_row_hash(**ROW)
    assert digest == hmac.new(KEY, render_payload(**ROW), hashlib.sha256).digest()
    assert digest.hex() == "d328699250f21f95de14480d5502e61ff81215c6b11d340ddc78b62327394b8b"


@pytest.mark.parametrize(
    ("field", "other"),
    [
        ("sequence", 2),
        ("id", uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8058")),
        ("actor_user_id", "user-2"),
        ("actor_user_id", None),
        ("event", "PinChanged"),
        ("occurred_at", ROW["occurred_at"] + timedelta(microseconds=1)),
        ("details", "{}"),
        ("previous_hash", b"\x01" * 32),
    ],
)
def test_every_hashed_field_changes_the_row_hash(field: str, other: object) -> None:
    chain = AuditChain(KEY)
    assert chain.compute_row_hash(**{**ROW, field: other}) != chain.compute_row_hash(**ROW)


def test_another_key_gives_another_hash() -> None:
    assert AuditChain(b"j" * 32).compute_row_hash(**ROW) != AuditChain(KEY).compute_row_hash(**ROW)


def test_an_unknown_payload_version_is_refused_not_hashed() -> None:
    with pytest.raises(ValueError, match="PayloadVersion 2"):
        AuditChain(KEY).compute_row_hash(**{**ROW, "payload_version": 2})


def test_details_are_canonical_json_with_sorted_keys() -> None:
    assert render_details({"b": 1, "a": "x"}) == '{"a":"x","b":1}'
    assert render_details(None) is None


def test_from_settings_names_audit_chain_key_and_its_fix_when_unset() -> None:
    with pytest.raises(SettingsError) as caught:
        AuditChain.from_settings(load_settings({}))
    assert "Audit__ChainKey" in str(caught.value)
    assert "openssl rand -base64 32" in str(caught.value)


def test_from_settings_decodes_the_base64_key() -> None:
    settings = load_settings({"Audit__ChainKey": base64.b64encode(KEY).decode()})
    assert AuditChain.from_settings(settings).compute_row_hash(**ROW) == AuditChain(
        KEY
    ).compute_row_hash(**ROW)


def test_minted_ids_are_version_7_and_ordered_by_time() -> None:
    start = datetime(2026, 9, 7, tzinfo=UTC)
    ids = [uuid7(start + timedelta(milliseconds=i)) for i in range(50)]
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    assert ids == sorted(ids)
    assert len({uuid7(start) for _ in range(1000)}) == 1000


def _sql(stmt: Any, dialect: Any) -> str:
    return str(stmt.compile(dialect=dialect))


def test_the_tail_lock_is_for_update_on_postgresql() -> None:
    sql = _sql(tail_sql.postgresql_tail_lock(), postgresql.dialect())
    assert sql.rstrip().endswith("FOR UPDATE")
    assert '"AuditChainTail"' in sql


def test_the_tail_lock_is_an_updlock_rowlock_hint_on_sql_server() -> None:
    sql = _sql(tail_sql.mssql_tail_lock(), mssql.dialect())
    assert "[AuditChainTail] WITH (UPDLOCK, ROWLOCK)" in sql
    assert "FOR UPDATE" not in sql


def test_the_tail_lock_on_sqlite_is_the_databases_writer_lock_taken_by_a_no_op_write() -> None:
    sql = _sql(tail_sql.sqlite_writer_lock(), sqlite.dialect())
    assert sql.startswith(
        'UPDATE "AuditChainTail" SET "LastSequence"="AuditChainTail"."LastSequence"'
    )
