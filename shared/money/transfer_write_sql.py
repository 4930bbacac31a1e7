"""The external transfer's writes after the audit chain's tail lock, and the ONE module holding
their SQL, one function per dialect (docs/database.md).

Every transfer and every audited save of the .NET API serialises on the tail lock, so the bank's
transfer rate is bounded by how long one transfer holds it: one round trip per statement under
it is one network latency per statement for everybody. So, once the tail is locked and read (its
hash chained into the new row in Python), every write goes in ONE round trip, then the commit:

    the audit row and the tail moved onto it
    both balances, each conditional on the concurrency token read before (`Version` = seen)
    the TransferOut and TransferIn ledger rows
    the authorization spent, conditional on Pending and unexpired (of two spends one loses)
    the idempotency record completed: the row this transaction's claim inserted

    PostgreSQL  one statement of data-modifying CTEs; its SELECT returns how many rows the
                conditional writes matched
    SQL Server  one batch (SET NOCOUNT ON, so its one result set is the final SELECT of the same
                counts, each read from @@ROWCOUNT after its write)
    SQLite      one statement per write (one writer at a time: nobody waits on this transaction's
                round trips but its own host), stopping at the first conditional write that loses

Nothing here decides: the caller reads the counts (`WriteOutcome`) and raises — a lost race or
a lost spend — and its unit of work rolls the whole transaction back, so a write
that half-applied is never committed (only the boundary commits: docs/architecture.md#house-rules).
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import BindParameter, TextClause, bindparam, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from shared.audit.chain import SealedAuditRow, write_sealed
from shared.db.schema import (
    Account,
    AuditEvent,
    AuthorizationStatus,
    IdempotencyRecord,
    Transaction,
    TransactionType,
    TransferAuthorization,
)
from shared.db.writes import rows_matched
from shared.money.accounts import balance_update, post_entry
from shared.money.idempotency import SuccessRecord, store_success


@dataclass(frozen=True)
class BalanceWrite:
    """One account's new balance, written only if its token is still `seen_version`."""

    account_id: uuid.UUID
    seen_version: int
    balance: Decimal


@dataclass(frozen=True)
class TransferWrites:
    """Every write of one external transfer after the tail lock. `balances` are in the order
    their rows are locked (by Id, so two opposite movements cannot deadlock on each other)."""

    audit: SealedAuditRow
    balances: tuple[BalanceWrite, BalanceWrite]
    transaction_id: uuid.UUID  # the TransferOut row's Id, which the authorization records
    transfer_in_id: uuid.UUID
    sender_id: uuid.UUID
    receiver_id: uuid.UUID
    recipient_azure_tag: str
    amount: Decimal
    authorization_id: uuid.UUID
    now: datetime
    success: SuccessRecord


@dataclass(frozen=True)
class WriteOutcome:
    """How many rows the conditional writes matched; the transfer holds only when every one is
    1 (both balances: 2)."""

    balances: int
    spent: int


# The bound values of the one-round-trip forms, by name, each typed by the column it is written
# to or compared with, so money, instants, ids and hashes bind as every other write binds them.
_PARAMETER_COLUMNS: dict[str, ColumnElement[object]] = {
    "first_account_id": Account.__table__.c.Id,
    "first_version": Account.__table__.c.Version,
    "first_balance": Account.__table__.c.Balance,
    "second_account_id": Account.__table__.c.Id,
    "second_version": Account.__table__.c.Version,
    "second_balance": Account.__table__.c.Balance,
    "transaction_id": Transaction.__table__.c.Id,
    "transfer_in_id": Transaction.__table__.c.Id,
    "sender_id": Transaction.__table__.c.AccountId,
    "receiver_id": Transaction.__table__.c.AccountId,
    "amount": Transaction.__table__.c.Amount,
    "recipient_azure_tag": Transaction.__table__.c.RecipientAzureTag,
    "now": Transaction.__table__.c.CreatedAt,
    "authorization_id": TransferAuthorization.__table__.c.Id,
    "audit_id": AuditEvent.__table__.c.Id,
    "audit_sequence": AuditEvent.__table__.c.Sequence,
    "audit_payload_version": AuditEvent.__table__.c.PayloadVersion,
    "audit_actor_user_id": AuditEvent.__table__.c.ActorUserId,
    "audit_event": AuditEvent.__table__.c.Event,
    "audit_occurred_at": AuditEvent.__table__.c.OccurredAt,
    "audit_details": AuditEvent.__table__.c.Details,
    "audit_previous_hash": AuditEvent.__table__.c.PreviousHash,
    "audit_row_hash": AuditEvent.__table__.c.RowHash,
    "record_id": IdempotencyRecord.__table__.c.Id,
    "response_status": IdempotencyRecord.__table__.c.ResponseStatus,
    "response_body": IdempotencyRecord.__table__.c.ResponseBody,
    "completed_at": IdempotencyRecord.__table__.c.CompletedAt,
}

_PENDING = AuthorizationStatus.PENDING.value
_SPENT = AuthorizationStatus.SPENT.value


def _typed(sql: str) -> TextClause:
    binds: list[BindParameter[object]] = [
        bindparam(name, type_=column.type) for name, column in _PARAMETER_COLUMNS.items()
    ]
    return text(sql).bindparams(*binds)


# The statuses are the schema's enums, as literals (the compile tests hold them to the enums):
# TransactionType TransferOut / TransferIn, TransactionStatus Completed, AuthorizationStatus
# Pending → Spent, IdempotencyState Completed; the tail is row 1 (tail_sql.TAIL_ID).
_POSTGRESQL_WRITES = """WITH first_balance AS (
    UPDATE "Accounts" SET "Balance" = :first_balance, "Version" = "Version" + 1
    WHERE "Id" = :first_account_id AND "Version" = :first_version AND "IsDeleted" = false
    RETURNING 1
),
second_balance AS (
    UPDATE "Accounts" SET "Balance" = :second_balance, "Version" = "Version" + 1
    WHERE "Id" = :second_account_id AND "Version" = :second_version AND "IsDeleted" = false
    RETURNING 1
),
ledger AS (
    INSERT INTO "Transactions" ("Id", "AccountId", "Type", "Amount", "Status",
        "RecipientAzureTag", "CounterpartyAccountId", "CreatedAt")
    VALUES (:transaction_id, :sender_id, 'TransferOut', :amount, 'Completed',
            :recipient_azure_tag, :receiver_id, :now),
           (:transfer_in_id, :receiver_id, 'TransferIn', :amount, 'Completed',
            NULL, :sender_id, :now)
),
spend AS (
    UPDATE "TransferAuthorizations"
    SET "Status" = 'Spent', "SpentAt" = :now, "TransactionId" = :transaction_id
    WHERE "Id" = :authorization_id AND "Status" = 'Pending' AND "ExpiresAt" > :now
    RETURNING 1
),
audit AS (
    INSERT INTO "AuditEvents" ("Id", "Sequence", "PayloadVersion", "ActorUserId", "Event",
        "OccurredAt", "Details", "PreviousHash", "RowHash")
    VALUES (:audit_id, :audit_sequence, :audit_payload_version, :audit_actor_user_id,
            :audit_event, :audit_occurred_at, :audit_details, :audit_previous_hash,
            :audit_row_hash)
),
tail AS (
    UPDATE "AuditChainTail" SET "LastSequence" = :audit_sequence, "LastHash" = :audit_row_hash
    WHERE "Id" = 1
),
stored AS (
    UPDATE "IdempotencyRecords"
    SET "State" = 'Completed', "ResponseStatus" = :response_status,
        "ResponseBody" = :response_body, "CompletedAt" = :completed_at
    WHERE "Id" = :record_id
)
SELECT (SELECT count(*) FROM first_balance) + (SELECT count(*) FROM second_balance) AS balances,
       (SELECT count(*) FROM spend) AS spent"""


@functools.cache
def postgresql_transfer_write() -> TextClause:
    """PostgreSQL: one statement. Every sub-statement of a WITH runs exactly once, to completion,
    on the statement's one snapshot; a conditional UPDATE that meets a row another transaction
    changed re-checks its WHERE against the committed row (READ COMMITTED), so a token that
    moved matches nothing, as a standalone UPDATE would. The SELECT reads the balance CTEs
    first, then second, which takes the two rows' locks in that order."""
    return _typed(_POSTGRESQL_WRITES)


_MSSQL_WRITES = """SET NOCOUNT ON;
DECLARE @balances int, @spent int;
UPDATE [Accounts] SET [Balance] = :first_balance, [Version] = [Version] + 1
WHERE [Id] = :first_account_id AND [Version] = :first_version AND [IsDeleted] = 0;
SET @balances = @@ROWCOUNT;
UPDATE [Accounts] SET [Balance] = :second_balance, [Version] = [Version] + 1
WHERE [Id] = :second_account_id AND [Version] = :second_version AND [IsDeleted] = 0;
SET @balances = @balances + @@ROWCOUNT;
INSERT INTO [Transactions] ([Id], [AccountId], [Type], [Amount], [Status],
    [RecipientAzureTag], [CounterpartyAccountId], [CreatedAt])
VALUES (:transaction_id, :sender_id, N'TransferOut', :amount, N'Completed',
        :recipient_azure_tag, :receiver_id, :now),
       (:transfer_in_id, :receiver_id, N'TransferIn', :amount, N'Completed',
        NULL, :sender_id, :now);
UPDATE [TransferAuthorizations]
SET [Status] = N'Spent', [SpentAt] = :now, [TransactionId] = :transaction_id
WHERE [Id] = :authorization_id AND [Status] = N'Pending' AND [ExpiresAt] > :now;
SET @spent = @@ROWCOUNT;
INSERT INTO [AuditEvents] ([Id], [Sequence], [PayloadVersion], [ActorUserId], [Event],
    [OccurredAt], [Details], [PreviousHash], [RowHash])
VALUES (:audit_id, :audit_sequence, :audit_payload_version, :audit_actor_user_id,
        :audit_event, :audit_occurred_at, :audit_details, :audit_previous_hash,
        :audit_row_hash);
UPDATE [AuditChainTail] SET [LastSequence] = :audit_sequence, [LastHash] = :audit_row_hash
WHERE [Id] = 1;
UPDATE [IdempotencyRecords]
SET [State] = N'Completed', [ResponseStatus] = :response_status,
    [ResponseBody] = :response_body, [CompletedAt] = :completed_at
WHERE [Id] = :record_id;
SELECT @balances AS balances, @spent AS spent;
"""


@functools.cache
def mssql_transfer_write() -> TextClause:
    """SQL Server: one batch, the writes in order (rows in the balances' order, after the tail
    this transaction already holds under UPDLOCK). SET NOCOUNT ON leaves the final SELECT as the
    batch's only result set; an error in any statement reaches the driver before that result,
    so the caller sees it and rolls back."""
    return _typed(_MSSQL_WRITES)


def parameters(writes: TransferWrites) -> dict[str, object]:
    """The bound values of the one-round-trip forms."""
    first, second = writes.balances
    audit = writes.audit
    values: dict[str, object] = {
        "first_account_id": first.account_id,
        "first_version": first.seen_version,
        "first_balance": first.balance,
        "second_account_id": second.account_id,
        "second_version": second.seen_version,
        "second_balance": second.balance,
        "transaction_id": writes.transaction_id,
        "transfer_in_id": writes.transfer_in_id,
        "sender_id": writes.sender_id,
        "receiver_id": writes.receiver_id,
        "amount": writes.amount,
        "recipient_azure_tag": writes.recipient_azure_tag,
        "now": writes.now,
        "authorization_id": writes.authorization_id,
        "audit_id": audit.id,
        "audit_sequence": audit.sequence,
        "audit_payload_version": audit.payload_version,
        "audit_actor_user_id": audit.actor_user_id,
        "audit_event": audit.event,
        "audit_occurred_at": audit.occurred_at,
        "audit_details": audit.details,
        "audit_previous_hash": audit.previous_hash,
        "audit_row_hash": audit.row_hash,
        "record_id": writes.success.record_id,
        "response_status": writes.success.status,
        "response_body": writes.success.body,
        "completed_at": writes.success.completed_at,
    }
    return values


def _one_round_trip(
    session: Session, statement: TextClause, writes: TransferWrites
) -> WriteOutcome:
    balances, spent = session.execute(statement, parameters(writes)).one()
    return WriteOutcome(int(balances), int(spent))


def one_statement_per_write(session: Session, writes: TransferWrites) -> WriteOutcome:
    """SQLite's form, dialect-neutral: each write its own statement, in the order of the SQL
    Server batch, stopping at the first conditional write that matched nothing (the caller rolls
    back). Also the bench's baseline on PostgreSQL: the writes at one round trip each."""
    write_sealed(session, writes.audit)
    balances = 0
    for write in writes.balances:
        written = balance_update(write.account_id, write.seen_version, write.balance)
        if rows_matched(session, written) != 1:
            return WriteOutcome(balances, 0)
        balances += 1
    _post_ledger_rows(session, writes)
    spent = _spend(session, writes)
    if spent == 1:
        store_success(session, writes.success)
    return WriteOutcome(balances, spent)


def _post_ledger_rows(session: Session, writes: TransferWrites) -> None:
    """The sender's TransferOut row and the payee's TransferIn row."""
    post_entry(
        session,
        entry_id=writes.transaction_id,
        account_id=writes.sender_id,
        type_=TransactionType.TRANSFER_OUT,
        amount=writes.amount,
        created_at=writes.now,
        recipient_azure_tag=writes.recipient_azure_tag,
        counterparty_account_id=writes.receiver_id,
    )
    post_entry(
        session,
        entry_id=writes.transfer_in_id,
        account_id=writes.receiver_id,
        type_=TransactionType.TRANSFER_IN,
        amount=writes.amount,
        created_at=writes.now,
        counterparty_account_id=writes.sender_id,
    )


def _spend(session: Session, writes: TransferWrites) -> int:
    """The conditional spend: rows matched, 1 while the authorization is Pending and unexpired."""
    return rows_matched(
        session,
        update(TransferAuthorization)
        .where(
            TransferAuthorization.Id == writes.authorization_id,
            TransferAuthorization.Status == _PENDING,
            TransferAuthorization.ExpiresAt > writes.now,
        )
        .values(Status=_SPENT, SpentAt=writes.now, TransactionId=writes.transaction_id)
        .execution_options(synchronize_session=False),
    )


def write_transfer(
    session: Session, writes: TransferWrites, *, one_round_trip: bool = True
) -> WriteOutcome:
    """Every write after the tail lock, in one round trip where the server allows it; the
    caller judges the outcome. `one_round_trip=False` is the bench's baseline only."""
    dialect = session.get_bind().dialect.name
    if one_round_trip and dialect == "postgresql":
        return _one_round_trip(session, postgresql_transfer_write(), writes)
    if one_round_trip and dialect == "mssql":
        return _one_round_trip(session, mssql_transfer_write(), writes)
    if dialect in ("sqlite", "postgresql", "mssql"):
        return one_statement_per_write(session, writes)
    raise ValueError(f"no transfer write for dialect {dialect!r}")
