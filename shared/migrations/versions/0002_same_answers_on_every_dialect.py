"""The same answers on every dialect (docs/database.md): the payee's tag looked up
case-insensitively through NormalizedAzureTag, and the Idempotency-Key and LeasedBy compared
exactly on SQL Server too (its default collation ignores case; PostgreSQL and SQLite do not).

Create Date: 2026-12-01 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mssql

revision = "0002"
down_revision = "0001"

# shared/db/types.py MSSQL_EXACT_COLLATION, spelled out: a migration does not move with the code.
BIN2 = "Latin1_General_100_BIN2"
# 0001's check on the lease: both columns or neither.
LEASE_CHECK = sa.or_(
    sa.and_(sa.column("LeasedUntil").is_(None), sa.column("LeasedBy").is_(None)),
    sa.and_(sa.column("LeasedUntil").is_not(None), sa.column("LeasedBy").is_not(None)),
)


def _collate(table: str, column: str, length: int, *, nullable: bool, to: str | None) -> None:
    existing, new = mssql.NVARCHAR(length), mssql.NVARCHAR(length, collation=to)
    op.alter_column(table, column, existing_type=existing, type_=new, existing_nullable=nullable)


def _mssql_collations(collation: str | None) -> None:
    """SQL Server only: ALTER COLUMN refuses a column an index, a unique constraint or a check
    names, so each is dropped around the change and made again as 0001 made it."""
    unique_key = op.f("UQ_IdempotencyRecords_UserId_Operation_Key")
    op.drop_constraint(unique_key, "IdempotencyRecords", type_="unique")
    _collate("IdempotencyRecords", "Key", 255, nullable=False, to=collation)
    op.create_unique_constraint(unique_key, "IdempotencyRecords", ["UserId", "Operation", "Key"])
    lease = op.f("CK_SubscriberNotices_Lease")
    op.drop_index("IX_SubscriberNotices_LeasedBy", table_name="SubscriberNotices")
    op.drop_constraint(lease, "SubscriberNotices", type_="check")
    _collate("SubscriberNotices", "LeasedBy", 200, nullable=True, to=collation)
    op.create_check_constraint(lease, "SubscriberNotices", LEASE_CHECK)
    op.create_index("IX_SubscriberNotices_LeasedBy", "SubscriberNotices", ["LeasedBy"])


def upgrade() -> None:
    with op.batch_alter_table("AspNetUsers", schema=None) as batch_op:
        upper_tag = sa.Computed(sa.func.upper(sa.column("AzureTag")), persisted=True)
        tag = sa.Column("NormalizedAzureTag", sa.Unicode(length=64), upper_tag, nullable=True)
        batch_op.add_column(tag)
        unique_tag = op.f("UQ_AspNetUsers_NormalizedAzureTag")
        batch_op.create_unique_constraint(unique_tag, ["NormalizedAzureTag"])
    if op.get_context().dialect.name == "mssql":
        _mssql_collations(BIN2)


def downgrade() -> None:
    if op.get_context().dialect.name == "mssql":
        _mssql_collations(None)  # back to the database's default, as 0001 left them
    with op.batch_alter_table("AspNetUsers", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("UQ_AspNetUsers_NormalizedAzureTag"), type_="unique")
        batch_op.drop_column("NormalizedAzureTag")
