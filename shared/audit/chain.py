"""AuditChain: the HMAC-SHA256 chain over `AuditEvents`, appended under its tail lock
(docs/architecture.md#the-audit-chain), with ids minted before the save (ADR-0052 D5), and
AuditAppender, what a writer of audit rows (the money path, the PIN service) needs of it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NotRequired, Protocol, TypedDict, Unpack

from sqlalchemy import update
from sqlalchemy.orm import Session

from shared.audit import tail_sql
from shared.db.schema import AuditChainTail, AuditEvent
from shared.errors import Fault
from shared.settings import Settings, SettingsError, missing

# ADR-0052 D1: a new hashed column means a new version and a renderer arm kept for ever. Version
# 1's hashed columns in payload order, each with its field's name in PayloadFields.
_V1_FIELDS = {
    "PayloadVersion": "payload_version",
    "Sequence": "sequence",
    "Id": "id",  # ADR-0052 D4: element three
    "ActorUserId": "actor_user_id",
    "Event": "event",
    "OccurredAt": "occurred_at",
    "Details": "details",
    "PreviousHash": "previous_hash",
}
CURRENT_PAYLOAD_VERSION = 1
PAYLOAD_FIELDS: Mapping[int, tuple[str, ...]] = {1: tuple(_V1_FIELDS)}
GENESIS_HASH = bytes(32)  # what the first row chains onto


class AuditEntry(TypedDict):
    """What the writer says of a row; the chain assigns its Id, Sequence and hashes."""

    actor_user_id: str | None
    event: str
    occurred_at: datetime
    details: NotRequired[Mapping[str, object] | None]


class AuditAppender(Protocol):
    """Satisfied by AuditChain, and by UnkeyedAuditChain, which refuses."""

    def append(self, session: Session, **entry: Unpack[AuditEntry]) -> uuid.UUID: ...

    def seal(self, session: Session, **entry: Unpack[AuditEntry]) -> SealedAuditRow: ...


class AuditChainUnavailable(Fault):
    """The tail row is missing: the database was not migrated by `azurebank db upgrade`."""

    error_code = "AUDIT_CHAIN_UNAVAILABLE"
    title = "The audit log is unavailable."


class UnkeyedAuditChain:
    """The chain while Audit__ChainKey is unset: an audited write refuses (503) rather than
    writing an unchained row."""

    def append(self, session: Session, **entry: Unpack[AuditEntry]) -> uuid.UUID:
        raise AuditChainUnavailable

    def seal(self, session: Session, **entry: Unpack[AuditEntry]) -> SealedAuditRow:
        raise AuditChainUnavailable


def uuid7(instant: datetime) -> uuid.UUID:
    """A version-7 UUID (RFC 9562), as .NET's Guid.CreateVersion7(): 48 bits of Unix
    milliseconds from `instant`, then 74 random bits."""
    millis = int(instant.timestamp() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 74 are kept
    rand_a = rand >> 68 & 0xFFF  # 12 bits
    rand_b = rand & ((1 << 62) - 1)  # 62 bits
    value = millis << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return uuid.UUID(int=value)


@dataclass(frozen=True)
class ChainTail:
    """The last appended row, as the tail row records it."""

    sequence: int
    row_hash: bytes


@dataclass(frozen=True)
class SealedAuditRow:
    """The chain's next row, its Sequence and RowHash assigned under the tail lock, not yet
    written: the transaction that sealed it writes it and moves the tail before commit."""

    id: uuid.UUID
    sequence: int
    payload_version: int
    actor_user_id: str | None
    event: str
    occurred_at: datetime
    details: str | None
    previous_hash: bytes
    row_hash: bytes

    def row_values(self) -> dict[str, object]:
        hashed = {column: getattr(self, name) for column, name in _V1_FIELDS.items()}
        return {**hashed, "RowHash": self.row_hash}


def write_sealed(session: Session, sealed: SealedAuditRow) -> None:
    """Write a sealed row through the session and move the tail onto it; does not commit."""
    session.add(AuditEvent(**sealed.row_values()))
    session.execute(
        update(AuditChainTail)
        .where(AuditChainTail.Id == tail_sql.TAIL_ID)
        .values(LastSequence=sealed.sequence, LastHash=sealed.row_hash)
    )
    session.flush()


def render_details(details: Mapping[str, object] | None) -> str | None:
    """Details as stored and hashed: canonical JSON; a value JSON cannot hold (Decimal, UUID,
    datetime) as its `str()`, so an amount keeps its exact digits."""
    if details is None:
        return None
    return json.dumps(dict(details), sort_keys=True, separators=(",", ":"), default=str)


def _render_instant(instant: datetime) -> str:
    if instant.tzinfo is None:
        raise ValueError("OccurredAt must be timezone-aware")
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _field(value: str | bytes | None) -> bytes:
    # Length-prefixed, with a distinct null marker: no two field lists render alike.
    if value is None:
        return b"\x00"
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return b"\x01" + struct.pack(">I", len(raw)) + raw


class PayloadFields(TypedDict):
    """One row's hashed fields."""

    payload_version: int
    sequence: int
    id: uuid.UUID
    actor_user_id: str | None
    event: str
    occurred_at: datetime
    details: str | None
    previous_hash: bytes


def render_payload(**fields: Unpack[PayloadFields]) -> bytes:
    """The bytes the HMAC covers, one arm per PayloadVersion."""
    payload_version = fields["payload_version"]
    if payload_version == 1:
        values: tuple[str | bytes | None, ...] = (
            "1",
            str(fields["sequence"]),
            str(fields["id"]),
            fields["actor_user_id"],
            fields["event"],
            _render_instant(fields["occurred_at"]),
            fields["details"],
            fields["previous_hash"],
        )
        assert len(values) == len(PAYLOAD_FIELDS[1])
        return b"".join(_field(v) for v in values)
    raise ValueError(f"unknown audit PayloadVersion {payload_version}")


class AuditChain:
    """Appends audit rows onto the chain and recomputes their hashes under `Audit__ChainKey`."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("the audit chain key must be at least 32 bytes")
        self._key = key

    @classmethod
    def from_settings(cls, settings: Settings) -> AuditChain:
        """The chain under `Audit__ChainKey`; SettingsError naming the key when it is unset."""
        raw = settings.Audit.ChainKey
        if not raw:
            raise SettingsError(
                [missing("Audit__ChainKey", "this host writes or verifies audit rows")]
            )
        return cls(base64.b64decode(raw, validate=True))

    def compute_row_hash(self, **fields: Unpack[PayloadFields]) -> bytes:
        """HMAC-SHA256 under the chain key over the versioned field list (ADR-0052 D1, D4)."""
        return hmac.new(self._key, render_payload(**fields), hashlib.sha256).digest()

    def hash_of(self, row: AuditEvent) -> bytes:
        """The RowHash a stored row should carry."""
        fields = {name: getattr(row, column) for column, name in _V1_FIELDS.items()}
        return self.compute_row_hash(**fields)

    def lock_tail(self, session: Session) -> ChainTail:
        """Take the tail lock (held to commit) and read the tail, before any other row the
        transaction writes (docs/architecture.md#lock-order)."""
        row = tail_sql.lock_and_read_tail(session)
        if row is None:
            raise AuditChainUnavailable
        return ChainTail(int(row[0]), bytes(row[1]))

    def seal(self, session: Session, **entry: Unpack[AuditEntry]) -> SealedAuditRow:
        """Take the tail lock and build the next row on the tail it read; writes nothing. The
        caller writes the row and the tail in the same transaction (in one round trip with its own
        writes, if it can), before any row it has not yet locked. Sequence and RowHash are
        assigned under the lock: contiguous and unforked."""
        row_id = uuid7(entry["occurred_at"])
        tail = self.lock_tail(session)
        fields = PayloadFields(
            payload_version=CURRENT_PAYLOAD_VERSION,
            sequence=tail.sequence + 1,
            id=row_id,
            actor_user_id=entry["actor_user_id"],
            event=entry["event"],
            occurred_at=entry["occurred_at"],
            details=render_details(entry.get("details")),
            previous_hash=tail.row_hash,
        )
        return SealedAuditRow(**fields, row_hash=self.compute_row_hash(**fields))

    def append(self, session: Session, **entry: Unpack[AuditEntry]) -> uuid.UUID:
        """Append one row under the tail lock and return the Id it minted, so the caller's notice
        can name it in the same unit of work (ADR-0052 D5); does not commit."""
        sealed = self.seal(session, **entry)
        write_sealed(session, sealed)
        return sealed.id
