"""The rows `azurebank users add` writes, on SQLite and PostgreSQL: the full Identity row the
.NET API reads (normalized names, confirmed email, fresh stamps, lockout enabled, no failures, the
password hashed at the iteration count given), one open EUR account per requested account
("Main", then "Account 2", …) at the given balance and the clock's instant (one empty "Main"
unless told otherwise), and a refusal for an email or AzureTag already taken, in any case."""

from __future__ import annotations

import base64
import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from sqlalchemy import select

from shared.db.engine import get_engine
from shared.db.schema import Account, AspNetUser
from shared.db.uow import unit_of_work
from shared.identity import users
from shared.identity.passwords import verify_secret
from tests.support.clock import FakeClock

NOW = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


def _add(url: str, email: str, tag: str, **options: object) -> users.NewUser:
    with unit_of_work(get_engine(url)) as session:
        new = users.add_user(
            session,
            FakeClock(NOW),
            email=email,
            password="correct horse battery staple",
            azure_tag=tag,
            hash_iterations=1,
            **options,  # type: ignore[arg-type]
        )
        session.commit()
        return new


def test_a_new_user_is_the_full_identity_row_the_api_reads(db_url: str) -> None:
    new = _add(db_url, "Ada.Lovelace@example.test", "ada-1")
    with unit_of_work(get_engine(db_url)) as session:
        row = session.get_one(AspNetUser, new.user_id)
        assert row.Id == str(uuid.UUID(row.Id))
        assert (row.UserName, row.NormalizedUserName) == (
            "Ada.Lovelace@example.test",
            "ADA.LOVELACE@EXAMPLE.TEST",
        )
        assert (row.Email, row.NormalizedEmail) == (
            "Ada.Lovelace@example.test",
            "ADA.LOVELACE@EXAMPLE.TEST",
        )
        assert (row.EmailConfirmed, row.PhoneNumberConfirmed, row.TwoFactorEnabled) == (
            True,
            False,
            False,
        )
        assert (row.LockoutEnabled, row.AccessFailedCount, row.PinAccessFailedCount) == (
            True,
            0,
            0,
        )
        assert re.fullmatch(r"[0-9A-F]{32}", row.SecurityStamp or "")
        assert str(uuid.UUID(row.ConcurrencyStamp or "")) == row.ConcurrencyStamp
        assert (row.AzureTag, row.PinHash, row.PinLockoutEnd) == ("ada-1", None, None)
        assert verify_secret(row.PasswordHash, "correct horse battery staple")
        # The V3 layout: format byte, PRF, then the iteration count (uint32, big-endian).
        assert base64.b64decode(row.PasswordHash or "")[5:9] == (1).to_bytes(4, "big")


def test_each_account_is_open_in_eur_named_in_order_at_the_balance_and_instant(
    db_url: str,
) -> None:
    new = _add(db_url, "grace@example.test", "grace-1", balance=Decimal("12.34"), accounts=3)
    with unit_of_work(get_engine(db_url)) as session:
        rows = {
            a.Id: a for a in session.scalars(select(Account).where(Account.UserId == new.user_id))
        }
    assert sorted(rows) == sorted(new.account_ids)
    made = [rows[i] for i in new.account_ids]
    assert [a.Name for a in made] == ["Main", "Account 2", "Account 3"]
    assert {(a.Balance, a.Currency, a.IsDeleted, a.CreatedAt, a.Version) for a in made} == {
        (Decimal("12.34"), "EUR", False, NOW, 1)
    }


def test_a_user_added_without_a_count_or_balance_has_one_empty_main_account(db_url: str) -> None:
    new = _add(db_url, "hopper@example.test", "hopper-1")
    with unit_of_work(get_engine(db_url)) as session:
        rows = list(session.scalars(select(Account).where(Account.UserId == new.user_id)))
    assert [(a.Id, a.Name, a.Balance) for a in rows] == [(new.account_ids[0], "Main", Decimal(0))]
    assert len(new.account_ids) == 1


@pytest.mark.parametrize(
    ("email", "tag"),
    [("TAKEN@EXAMPLE.TEST", "fresh-1"), ("fresh@example.test", "TAKEN-1")],
    ids=["email", "tag"],
)
def test_an_email_or_tag_already_taken_in_any_case_is_refused(
    db_url: str, email: str, tag: str
) -> None:
    _add(db_url, "taken@example.test", "taken-1")
    with pytest.raises(users.UserExists):
        _add(db_url, email, tag)
