"""DailyOutflowLimit (ADR-0050 D1–D3) against real rows: what counts, over which accounts, in
which window; and (beyond the ADR: docs/decisions.md#beyond-the-decisions) that PostgreSQL answers
the sum with a seek on the user's day, not a scan of the ledger."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import text, update

from shared.db.engine import get_engine
from shared.db.schema import Account, Transaction, TransactionStatus, TransactionType
from shared.db.uow import unit_of_work
from shared.money.accounts import post_entry
from shared.money.daily_limit import DailyOutflowLimit, daily_outflow_statement
from shared.money.refusals import DailyLimitExceeded
from tests.support.clock import FakeClock
from tests.support.users import make_user

DAY = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
MIDNIGHT = datetime(2026, 9, 7, tzinfo=UTC)
NEXT_MIDNIGHT = MIDNIGHT + timedelta(days=1)


def _row(
    db_url: str,
    account_id: uuid.UUID,
    amount: str,
    at: datetime,
    *,
    type_: TransactionType = TransactionType.TRANSFER_OUT,
    tag: str | None = "payee",
    status: TransactionStatus = TransactionStatus.COMPLETED,
) -> None:
    with unit_of_work(get_engine(db_url)) as session:
        post_entry(
            session,
            account_id=account_id,
            type_=type_,
            amount=Decimal(amount),
            created_at=at,
            recipient_azure_tag=tag,
        )
        session.flush()
        if status is not TransactionStatus.COMPLETED:
            session.execute(
                update(Transaction)
                .where(Transaction.AccountId == account_id)
                .values(Status=status.value)
            )
        session.commit()


def _used(db_url: str, user_id: str, at: datetime = DAY) -> Decimal:
    limit = DailyOutflowLimit(Decimal(5000), FakeClock(at))
    with unit_of_work(get_engine(db_url)) as session:
        return limit.used(session, user_id, at)


@pytest.mark.adr("0050", "D2")
def test_only_external_transfer_outs_count(db_url: str) -> None:
    """D2: a TransferOut with a RecipientAzureTag counts; the internal one (no tag), inflows,
    deposits and withdrawals (ADR-0056) do not."""
    user = make_user(db_url)
    account = user.account_ids[0]
    _row(db_url, account, "10.25", DAY)
    _row(db_url, account, "1000", DAY, tag=None)  # internal transfer
    _row(db_url, account, "1000", DAY, type_=TransactionType.TRANSFER_IN, tag=None)
    _row(db_url, account, "1000", DAY, type_=TransactionType.DEPOSIT, tag=None)
    _row(db_url, account, "1000", DAY, type_=TransactionType.WITHDRAWAL, tag=None)
    assert _used(db_url, user.user_id) == Decimal("10.25")


@pytest.mark.adr("0050", "D3")
def test_only_completed_rows_count(db_url: str) -> None:
    user = make_user(db_url)
    _row(db_url, user.account_ids[0], "300", DAY, status=TransactionStatus.PENDING)
    assert _used(db_url, user.user_id) == 0
    _row(db_url, user.account_ids[0], "200", DAY)
    assert _used(db_url, user.user_id) == 200


@pytest.mark.adr("0050", "D3")
def test_the_sum_spans_every_account_of_the_user_closed_ones_included_and_no_one_elses(
    db_url: str,
) -> None:
    user = make_user(db_url, accounts=3)
    other = make_user(db_url)
    for account, amount in zip(user.account_ids, ("100", "200.50", "300.25"), strict=True):
        _row(db_url, account, amount, DAY)
    _row(db_url, other.account_ids[0], "999", DAY)
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(
            update(Account).where(Account.Id == user.account_ids[2]).values(IsDeleted=True)
        )
        session.commit()
    assert _used(db_url, user.user_id) == Decimal("600.75")


@pytest.mark.adr("0050", "D1")
def test_the_window_is_the_utc_day_start_inclusive_next_midnight_exclusive(
    db_url: str,
) -> None:
    user = make_user(db_url)
    account = user.account_ids[0]
    _row(db_url, account, "1", MIDNIGHT - timedelta(microseconds=1))  # yesterday
    _row(db_url, account, "10", MIDNIGHT)  # today's first instant
    _row(db_url, account, "100", NEXT_MIDNIGHT - timedelta(microseconds=1))  # today's last
    _row(db_url, account, "1000", NEXT_MIDNIGHT)  # tomorrow
    assert _used(db_url, user.user_id, DAY) == 110
    assert _used(db_url, user.user_id, MIDNIGHT) == 110
    assert _used(db_url, user.user_id, NEXT_MIDNIGHT) == 1000
    # D1: the day comes from the injected clock's instant, whatever its zone.
    evening_in_new_york = datetime.fromisoformat("2026-09-07T21:00:00-04:00")  # 01:00Z on the 8th
    assert _used(db_url, user.user_id, evening_in_new_york) == 1000


@pytest.mark.adr("0050", "D7")
def test_check_refuses_above_the_limit_inclusive_with_its_figures(db_url: str) -> None:
    """ADR-0050 D7: the check allows exactly the limit and refuses above it, with the figures."""
    user = make_user(db_url)
    _row(db_url, user.account_ids[0], "4000", DAY)
    limit = DailyOutflowLimit(Decimal(5000), FakeClock(DAY))
    with unit_of_work(get_engine(db_url)) as session:
        limit.check(session, user.user_id, Decimal(1000), DAY)  # exactly the limit: allowed
        with pytest.raises(DailyLimitExceeded) as refused:
            limit.check(session, user.user_id, Decimal("1000.01"), DAY)
    assert refused.value.members == {
        "limit": Decimal(5000),
        "used": Decimal("4000"),
        "requested": Decimal("1000.01"),
        "resetsAt": "2026-09-08T00:00:00Z",
    }
    assert refused.value.status == 422 and refused.value.title == "Daily transfer limit exceeded."


@pytest.mark.postgres
def test_the_daily_sum_is_an_index_seek_on_the_users_day_on_postgresql(
    fresh_postgres_url: str,
) -> None:
    """With a ledger of other customers' history, the plan reaches Transactions
    through IX_Transactions_AccountId_Type_CreatedAt, never a sequential scan."""
    url = fresh_postgres_url
    user = make_user(url, accounts=2)
    others = make_user(url, accounts=50)
    engine = get_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO "Transactions" ("Id", "AccountId", "Type", "Amount", "Status", '
                '"RecipientAzureTag", "CreatedAt") '
                "SELECT gen_random_uuid(), (CAST(:accounts AS uuid[]))[1 + (g % 50)], "
                "CASE WHEN g % 3 = 0 THEN 'TransferOut' ELSE 'Deposit' END, 10, 'Completed', "
                "CASE WHEN g % 3 = 0 THEN 'someone' END, "
                "TIMESTAMP '2026-01-01' + (g || ' minutes')::interval "
                "FROM generate_series(1, 60000) AS g"
            ),
            {"accounts": [str(a) for a in others.account_ids]},
        )
        conn.execute(text('ANALYZE "Transactions"'))
        conn.execute(text('ANALYZE "Accounts"'))
    _row(url, user.account_ids[0], "5", DAY)
    query = daily_outflow_statement().params(
        user_id=user.user_id, day_start=MIDNIGHT, day_end=NEXT_MIDNIGHT
    )
    compiled = query.compile(engine, compile_kwargs={"literal_binds": True})
    with engine.connect() as conn:
        plan = "\n".join(row[0] for row in conn.execute(text(f"EXPLAIN {compiled}")))
    assert "IX_Transactions_AccountId_Type_CreatedAt" in plan, plan
    assert 'Seq Scan on "Transactions"' not in plan, plan
    assert _used(url, user.user_id) == 5
