"""The external transfer's writes after the tail lock, in ONE round trip (why:
docs/architecture.md#lock-order): PostgreSQL's data-modifying CTEs, SQL Server's hand-written
batch, SQLite's one statement per write (docs/database.md#sql-that-differs-by-dialect). The caller
judges the counts."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal
from operator import attrgetter
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Executable,
    Insert,
    Select,
    Table,
    TextClause,
    Update,
    bindparam,
    func,
    insert,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from shared.audit.chain import SealedAuditRow
from shared.audit.tail_sql import TAIL_ID
from shared.db.engine import DialectName, for_dialect
from shared.db.prebuilt import prebuilt
from shared.db.schema import (
    Account,
    AuditChainTail,
    AuditEvent,
    AuthorizationStatus,
    IdempotencyRecord,
    IdempotencyState,
    Transaction,
    TransactionStatus,
    TransactionType,
    TransferAuthorization,
)
from shared.db.uow import rows_matched
from shared.money.accounts import BalanceWrite, balance_update
from shared.money.idempotency import SuccessRecord


@dataclass(frozen=True)
class TransferWrites:
    """Every write of one external transfer after the tail lock; `balances` in lock order."""

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
    """How many rows the conditional writes matched (the transfer holds at 2 and 1)."""

    balances: int
    spent: int


# The dialect's one round trip (`write_transfer`), or what a bench or a test hands the root.
TransferWriter = Callable[[Session, TransferWrites], WriteOutcome]

_accounts = cast(Table, Account.__table__)
_ledger = cast(Table, Transaction.__table__)
_authorizations = cast(Table, TransferAuthorization.__table__)
_audit = cast(Table, AuditEvent.__table__)
_tail = cast(Table, AuditChainTail.__table__)
_records = cast(Table, IdempotencyRecord.__table__)

# Every bound value, once: its name, the column that types it, and where its value comes from.
_BOUND: tuple[tuple[str, ColumnElement[Any], Callable[[TransferWrites], object]], ...] = (
    ("first_account_id", _accounts.c.Id, lambda w: w.balances[0].account_id),
    ("first_version", _accounts.c.Version, lambda w: w.balances[0].seen_version),
    ("first_balance", _accounts.c.Balance, lambda w: w.balances[0].balance),
    ("second_account_id", _accounts.c.Id, lambda w: w.balances[1].account_id),
    ("second_version", _accounts.c.Version, lambda w: w.balances[1].seen_version),
    ("second_balance", _accounts.c.Balance, lambda w: w.balances[1].balance),
    ("transaction_id", _ledger.c.Id, lambda w: w.transaction_id),
    ("transfer_in_id", _ledger.c.Id, lambda w: w.transfer_in_id),
    ("sender_id", _ledger.c.AccountId, lambda w: w.sender_id),
    ("receiver_id", _ledger.c.AccountId, lambda w: w.receiver_id),
    ("amount", _ledger.c.Amount, lambda w: w.amount),
    ("recipient_azure_tag", _ledger.c.RecipientAzureTag, lambda w: w.recipient_azure_tag),
    ("now", _ledger.c.CreatedAt, lambda w: w.now),
    ("authorization_id", _authorizations.c.Id, lambda w: w.authorization_id),
    # audit_<field> for each field of the sealed row, into its AuditEvents column (in PascalCase).
    *(
        (f"audit_{name}", _audit.c[name.title().replace("_", "")], attrgetter(f"audit.{name}"))
        for name in (field.name for field in fields(SealedAuditRow))
    ),
    ("record_id", _records.c.Id, lambda w: w.success.record_id),
    ("response_status", _records.c.ResponseStatus, lambda w: w.success.status),
    ("response_body", _records.c.ResponseBody, lambda w: w.success.body),
    ("completed_at", _records.c.CompletedAt, lambda w: w.success.completed_at),
)
_TYPED = {name: column.type for name, column, _ in _BOUND}


def parameters(writes: TransferWrites) -> dict[str, object]:
    return {name: value(writes) for name, _, value in _BOUND}


def _p(name: str) -> BindParameter[Any]:
    return bindparam(name, type_=_TYPED[name])


def _balance(which: str) -> Update:
    return balance_update(_p(f"{which}_account_id"), _p(f"{which}_version"), _p(f"{which}_balance"))


@prebuilt
def _writes() -> tuple[tuple[str, Update | Insert, bool], ...]:
    """Every write in the batch's order: its name, its statement, whether its count is judged."""
    tag = _p("recipient_azure_tag")  # on the TransferOut alone: what the daily limit counts
    ledger = insert(_ledger).values(
        [
            {
                "Id": _p(id_),
                "AccountId": _p(account),
                "Type": type_.value,
                "Amount": _p("amount"),
                "Status": TransactionStatus.COMPLETED.value,
                "RecipientAzureTag": recipient,
                "CounterpartyAccountId": _p(counterparty),
                "CreatedAt": _p("now"),
            }
            for id_, account, type_, counterparty, recipient in (
                ("transaction_id", "sender_id", TransactionType.TRANSFER_OUT, "receiver_id", tag),
                ("transfer_in_id", "receiver_id", TransactionType.TRANSFER_IN, "sender_id", None),
            )
        ]
    )
    spend = (
        update(_authorizations)
        .where(
            _authorizations.c.Id == _p("authorization_id"),
            _authorizations.c.Status == AuthorizationStatus.PENDING.value,
            _authorizations.c.ExpiresAt > _p("now"),
        )
        .values(
            Status=AuthorizationStatus.SPENT.value,
            SpentAt=_p("now"),
            TransactionId=_p("transaction_id"),
        )
    )
    audit = insert(_audit).values(
        {column.name: _p(name) for name, column, _ in _BOUND if column.table is _audit}
    )
    tail = (
        update(_tail)
        .where(_tail.c.Id == TAIL_ID)
        .values(LastSequence=_p("audit_sequence"), LastHash=_p("audit_row_hash"))
    )
    # The row this transaction's claim inserted: nobody else can see it, so no guard.
    stored = (
        update(_records)
        .where(_records.c.Id == _p("record_id"))
        .values(
            State=IdempotencyState.COMPLETED.value,
            ResponseStatus=_p("response_status"),
            ResponseBody=_p("response_body"),
            CompletedAt=_p("completed_at"),
        )
    )
    return (
        ("first_balance", _balance("first"), True),
        ("second_balance", _balance("second"), True),
        ("ledger", ledger, False),
        ("spend", spend, True),
        ("audit", audit, False),
        ("tail", tail, False),
        ("stored", stored, False),
    )


@prebuilt
def postgresql_transfer_write() -> Select[tuple[int, int]]:
    """PostgreSQL: one statement. Each sub-statement of a WITH runs once; a conditional UPDATE
    that meets a row another transaction changed re-checks its WHERE against the committed row
    (READ COMMITTED), as a standalone UPDATE would. The balances come first, in lock order."""
    ctes = {
        name: (write.returning(literal_column("1")) if judged else write).cte(name)
        for name, write, judged in _writes()
    }

    def count(name: str) -> Any:
        return select(func.count()).select_from(ctes[name]).scalar_subquery()

    return select(
        (count("first_balance") + count("second_balance")).label("balances"),
        count("spend").label("spent"),
    ).add_cte(*ctes.values())


# The enums' values and the tail's row (tail_sql.TAIL_ID) as literals: the compile tests hold them.
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


@prebuilt
def mssql_transfer_write() -> TextClause:
    """SQL Server: one batch. SET NOCOUNT ON leaves the final SELECT as its only result set; an
    error in any statement reaches the driver before that result, so the caller rolls back."""
    return text(_MSSQL_WRITES).bindparams(*(_p(name) for name in _TYPED))


def _round_trip(session: Session, statement: Executable, writes: TransferWrites) -> WriteOutcome:
    balances, spent = session.execute(statement, parameters(writes)).one()
    return WriteOutcome(int(balances), int(spent))


def one_statement_per_write(session: Session, writes: TransferWrites) -> WriteOutcome:
    """SQLite's form (and the bench's baseline on a server): each write its own statement,
    stopping at the first conditional write that matched nothing."""
    values = parameters(writes)
    matched = {"first_balance": 0, "second_balance": 0, "spend": 0}
    for name, write, judged in _writes():
        if not judged:
            session.execute(write, values)
        elif rows_matched(session, cast(Update, write), values) == 1:
            matched[name] = 1
        else:
            break
    return WriteOutcome(matched["first_balance"] + matched["second_balance"], matched["spend"])


_WRITERS: dict[DialectName, TransferWriter] = {
    "postgresql": lambda session, writes: _round_trip(session, postgresql_transfer_write(), writes),
    "mssql": lambda session, writes: _round_trip(session, mssql_transfer_write(), writes),
    "sqlite": one_statement_per_write,
}


def write_transfer(session: Session, writes: TransferWrites) -> WriteOutcome:
    """Every write after the tail lock, in one round trip where the server allows it."""
    return for_dialect(session, _WRITERS, what="transfer write")(session, writes)
