"""The initial schema: every table, in the API's EF names (docs/database.md).

Create Date: 2026-11-29 20:55:16.773536
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mssql

revision = "0001"
down_revision = None

# The column types of shared/db/types.py as this revision created them, each spelled once.
LONG_TEXT = sa.Text().with_variant(mssql.NVARCHAR(), "mssql")
UTC = sa.DateTime().with_variant(mssql.DATETIME2(precision=7), "mssql")
HASH32 = sa.LargeBinary(length=32).with_variant(mssql.VARBINARY(32), "mssql")
MONEY = sa.Numeric(precision=18, scale=4).with_variant(sa.BigInteger(), "sqlite")


def _fk(table: str, column: str, to: str, ondelete: str | None = None) -> sa.ForeignKeyConstraint:
    """`table`.`column` referring to `to`.Id, named as the naming convention names it."""
    name = op.f(f"FK_{table}_{to}_{column}")
    return sa.ForeignKeyConstraint([column], [f"{to}.Id"], name=name, ondelete=ondelete)


def upgrade() -> None:
    """Every table, index and constraint: long, as the schema's one list of DDL, a table a call."""
    op.create_table(
        "AspNetUsers",
        sa.Column("Id", sa.Unicode(length=450), nullable=False),
        sa.Column("UserName", sa.Unicode(length=256), nullable=True),
        sa.Column("NormalizedUserName", sa.Unicode(length=256), nullable=True),
        sa.Column("Email", sa.Unicode(length=256), nullable=True),
        sa.Column("NormalizedEmail", sa.Unicode(length=256), nullable=True),
        sa.Column("EmailConfirmed", sa.Boolean(), nullable=False),
        sa.Column("PasswordHash", LONG_TEXT, nullable=True),
        sa.Column("SecurityStamp", LONG_TEXT, nullable=True),
        sa.Column("ConcurrencyStamp", LONG_TEXT, nullable=True),
        sa.Column("PhoneNumber", LONG_TEXT, nullable=True),
        sa.Column("PhoneNumberConfirmed", sa.Boolean(), nullable=False),
        sa.Column("TwoFactorEnabled", sa.Boolean(), nullable=False),
        sa.Column("LockoutEnd", UTC, nullable=True),
        sa.Column("LockoutEnabled", sa.Boolean(), nullable=False),
        sa.Column("AccessFailedCount", sa.Integer(), nullable=False),
        sa.Column("AzureTag", sa.Unicode(length=64), nullable=False),
        sa.Column("PinHash", LONG_TEXT, nullable=True),
        sa.Column("PinAccessFailedCount", sa.Integer(), server_default="0", nullable=False),
        sa.Column("PinLockoutEnd", UTC, nullable=True),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_AspNetUsers")),
        sa.UniqueConstraint("AzureTag", name=op.f("UQ_AspNetUsers_AzureTag")),
        sa.UniqueConstraint("NormalizedUserName", name=op.f("UQ_AspNetUsers_NormalizedUserName")),
    )
    op.create_index(op.f("IX_AspNetUsers_NormalizedEmail"), "AspNetUsers", ["NormalizedEmail"])

    op.create_table(
        "AuditChainTail",
        sa.Column("Id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("LastSequence", sa.BigInteger(), nullable=False),
        sa.Column("LastHash", HASH32, nullable=False),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_AuditChainTail")),
    )
    # The tail row every append locks (shared/audit/tail_sql.py): it exists before the first
    # append, so concurrent first appends never race to create it. Genesis: Sequence 0, zero hash.
    # A binary literal per dialect, so the offline script (`--sql`) renders it too.
    zeros = "00" * 32
    literal = {"postgresql": f"'\\x{zeros}'::bytea", "mssql": f"0x{zeros}", "sqlite": f"X'{zeros}'"}
    genesis = literal[op.get_context().dialect.name]
    insert_tail = 'INSERT INTO "AuditChainTail" ("Id", "LastSequence", "LastHash") VALUES (1, 0, '
    op.execute(insert_tail + genesis + ")")  # constants only: no input reaches this text
    op.create_table(
        "AuditEvents",
        sa.Column("Id", sa.Uuid(), nullable=False),
        sa.Column("Sequence", sa.BigInteger(), nullable=False),
        sa.Column("PayloadVersion", sa.Integer(), nullable=False),
        sa.Column("ActorUserId", sa.Unicode(length=450), nullable=True),
        sa.Column("Event", sa.Unicode(length=64), nullable=False),
        sa.Column("OccurredAt", UTC, nullable=False),
        sa.Column("Details", LONG_TEXT, nullable=True),
        sa.Column("PreviousHash", HASH32, nullable=False),
        sa.Column("RowHash", HASH32, nullable=False),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_AuditEvents")),
        sa.UniqueConstraint("Sequence", name=op.f("UQ_AuditEvents_Sequence")),
    )
    op.create_index("IX_AuditEvents_ActorUserId_Event", "AuditEvents", ["ActorUserId", "Event"])

    op.create_table(
        "IdempotencyRecords",
        sa.Column("Id", sa.Uuid(), nullable=False),
        sa.Column("UserId", sa.Unicode(length=450), nullable=False),
        sa.Column("Operation", sa.Unicode(length=64), nullable=False),
        sa.Column("Key", sa.Unicode(length=255), nullable=False),
        sa.Column("RequestHash", sa.Unicode(length=64), nullable=False),
        sa.Column("State", sa.Unicode(length=16), nullable=False),
        sa.Column("ResponseStatus", sa.Integer(), nullable=True),
        sa.Column("ResponseBody", LONG_TEXT, nullable=True),
        sa.Column("CreatedAt", UTC, nullable=False),
        sa.Column("CompletedAt", UTC, nullable=True),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_IdempotencyRecords")),
        sa.UniqueConstraint(
            "UserId", "Operation", "Key", name=op.f("UQ_IdempotencyRecords_UserId_Operation_Key")
        ),
    )
    op.create_table(
        "Accounts",
        sa.Column("Id", sa.Uuid(), nullable=False),
        sa.Column("UserId", sa.Unicode(length=450), nullable=False),
        sa.Column("Name", sa.Unicode(length=100), nullable=False),
        sa.Column("Balance", MONEY, nullable=False),
        sa.Column("Currency", sa.Unicode(length=3), nullable=False),
        sa.Column("IsDeleted", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("CreatedAt", UTC, nullable=False),
        sa.Column("Version", sa.Integer(), server_default="1", nullable=False),
        _fk("Accounts", "UserId", "AspNetUsers"),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_Accounts")),
    )
    op.create_index(op.f("IX_Accounts_UserId"), "Accounts", ["UserId"])

    op.create_table(
        "SubscriberNotices",
        sa.Column("Id", sa.Uuid(), nullable=False),
        sa.Column("UserId", sa.Unicode(length=450), nullable=False),
        sa.Column("Kind", sa.Unicode(length=32), nullable=False),
        sa.Column("CreatedAt", UTC, nullable=False),
        sa.Column("DeliveredAt", UTC, nullable=True),
        sa.Column("DeliveryReceipt", sa.Unicode(length=400), nullable=True),
        sa.Column("LeasedUntil", UTC, nullable=True),
        sa.Column("LeasedBy", sa.Unicode(length=200), nullable=True),
        sa.Column("AuditEventId", sa.Uuid(), nullable=True),
        # ADR-0048 D2: both lease columns or neither; column expressions so each dialect
        # quotes the names its own way (SQL Server needs no QUOTED_IDENTIFIER for it).
        sa.CheckConstraint(
            sa.or_(
                sa.and_(sa.column("LeasedUntil").is_(None), sa.column("LeasedBy").is_(None)),
                sa.and_(sa.column("LeasedUntil").is_not(None), sa.column("LeasedBy").is_not(None)),
            ),
            name=op.f("CK_SubscriberNotices_Lease"),
        ),
        _fk("SubscriberNotices", "UserId", "AspNetUsers", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_SubscriberNotices")),
    )
    op.create_index("IX_SubscriberNotices_AuditEventId", "SubscriberNotices", ["AuditEventId"])
    op.create_index("IX_SubscriberNotices_LeasedBy", "SubscriberNotices", ["LeasedBy"])
    op.create_index(
        "IX_SubscriberNotices_Owed_CreatedAt",
        "SubscriberNotices",
        ["CreatedAt"],
        postgresql_where=sa.text('"DeliveredAt" IS NULL'),
        sqlite_where=sa.text('"DeliveredAt" IS NULL'),
        mssql_where=sa.text("[DeliveredAt] IS NULL"),
    )
    op.create_index(op.f("IX_SubscriberNotices_UserId"), "SubscriberNotices", ["UserId"])

    op.create_table(
        "Transactions",
        sa.Column("Id", sa.Uuid(), nullable=False),
        sa.Column("AccountId", sa.Uuid(), nullable=False),
        sa.Column("Type", sa.Unicode(length=16), nullable=False),
        sa.Column("Amount", MONEY, nullable=False),
        sa.Column("Status", sa.Unicode(length=16), nullable=False),
        sa.Column("RecipientAzureTag", sa.Unicode(length=64), nullable=True),
        sa.Column("CounterpartyAccountId", sa.Uuid(), nullable=True),
        sa.Column("CreatedAt", UTC, nullable=False),
        _fk("Transactions", "AccountId", "Accounts"),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_Transactions")),
    )
    by_day = ["AccountId", "Type", "CreatedAt"]  # the daily sum's seek
    op.create_index("IX_Transactions_AccountId_Type_CreatedAt", "Transactions", by_day)

    op.create_table(
        "TransferAuthorizations",
        sa.Column("Id", sa.Uuid(), nullable=False),
        sa.Column("UserId", sa.Unicode(length=450), nullable=False),
        sa.Column("AccountId", sa.Uuid(), nullable=False),
        sa.Column("RecipientAzureTag", sa.Unicode(length=64), nullable=False),
        sa.Column("Amount", MONEY, nullable=False),
        sa.Column("Status", sa.Unicode(length=16), nullable=False),
        sa.Column("CreatedAt", UTC, nullable=False),
        sa.Column("ExpiresAt", UTC, nullable=False),
        sa.Column("SpentAt", UTC, nullable=True),
        sa.Column("TransactionId", sa.Uuid(), nullable=True),
        _fk("TransferAuthorizations", "AccountId", "Accounts"),
        _fk("TransferAuthorizations", "UserId", "AspNetUsers"),
        sa.PrimaryKeyConstraint("Id", name=op.f("PK_TransferAuthorizations")),
    )
    op.create_index(op.f("IX_TransferAuthorizations_UserId"), "TransferAuthorizations", ["UserId"])


def downgrade() -> None:
    # Upgrade's tables in reverse, each table's indexes (IX_<table>_<suffix>) before it.
    for table, indexes in (
        ("TransferAuthorizations", ["UserId"]),
        ("Transactions", ["AccountId_Type_CreatedAt"]),
        ("SubscriberNotices", ["UserId", "Owed_CreatedAt", "LeasedBy", "AuditEventId"]),
        ("Accounts", ["UserId"]),
        ("IdempotencyRecords", []),
        ("AuditEvents", ["ActorUserId_Event"]),
        ("AuditChainTail", []),
        ("AspNetUsers", ["NormalizedEmail"]),
    ):
        for index in indexes:
            op.drop_index(op.f(f"IX_{table}_{index}"), table_name=table)
        op.drop_table(table)
