"""Every column compared with outside input gives the same answer
on every dialect. SQL Server's default collation ignores case and trailing spaces; PostgreSQL and
SQLite do neither, so each rule is decided once and pinned here on each database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from shared.db.schema import AspNetUser, NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.identity.users import UserExists, add_user
from shared.money.idempotency import (
    Answer,
    HeldKey,
    IdempotencyClaim,
    claim_key,
    store_success,
)
from shared.money.payees import resolve_payee
from shared.notices.claim import NoticeClaim
from tests.support.clock import FakeClock
from tests.support.money import TRANSFER, open_bank, unique_key
from tests.support.tokens import bearer
from tests.support.users import FAST_HASH, make_user

T0 = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


# --- Idempotency-Key: exact, case-sensitive ---------------------------------------------------


def test_keys_differing_only_in_case_are_two_keys(engine: Engine) -> None:
    user, key = str(uuid.uuid4()), "abc-" + uuid.uuid4().hex
    lower, upper = (
        IdempotencyClaim(user, "transfer", k, "h", 201, str) for k in (key, key.upper())
    )
    with writing_unit_of_work(engine, wait_seconds=5) as session:
        first = claim_key(session, lower, T0)
        second = claim_key(session, upper, T0)
        assert isinstance(first, HeldKey) and isinstance(second, HeldKey)
        assert first.record_id != second.record_id
        store_success(session, first.success("A", T0))
        store_success(session, second.success("B", T0))
        session.commit()
    # The lookup finds each key exactly, by its own spelling: its own stored answer.
    with writing_unit_of_work(engine, wait_seconds=5) as session:
        assert claim_key(session, lower, T0) == Answer(201, "A", replayed=True)
        assert claim_key(session, upper, T0) == Answer(201, "B", replayed=True)


def test_a_key_with_a_surrounding_space_is_a_400_naming_the_header(db_url: str) -> None:
    with open_bank(db_url) as bank:
        payer, payee = bank.customer(balance=100), bank.customer()
        auth = bank.authorize(payer, 1, payee)
        for key in (unique_key() + " ", " " + unique_key()):
            sent = bank.client.post(
                TRANSFER,
                json={
                    "accountId": str(payer.primary),
                    "recipientAzureTag": payee.tag,
                    "amount": 1,
                    "authorizationId": auth,
                },
                headers={**bank.headers(payer), "Idempotency-Key": key},
            )
            assert sent.status_code == 400, sent.text
            assert sent.json()["errorCode"] == "VALIDATION_FAILED"
            assert [e["field"] for e in sent.json()["errors"]] == ["Idempotency-Key"]


# --- AzureTag: case-insensitive, like a user name ---------------------------------------------


def test_tags_differing_only_in_case_are_one_payee(db_url: str, engine: Engine) -> None:
    tag = "bob-" + uuid.uuid4().hex[:8]
    bob = make_user(db_url, tag=tag)
    caller = make_user(db_url)
    with unit_of_work(engine) as session:
        for spelling in (tag, tag.upper(), tag.capitalize()):
            assert resolve_payee(session, caller.user_id, spelling).user_id == bob.user_id


def test_a_second_user_cannot_take_a_tag_in_another_case(db_url: str, engine: Engine) -> None:
    tag = "bob-" + uuid.uuid4().hex[:8]
    make_user(db_url, tag=tag)
    with unit_of_work(engine) as session, pytest.raises(UserExists):
        add_user(
            session,
            FakeClock(T0),
            email=f"other-{tag}@example.test",
            password="pw",
            azure_tag=tag.upper(),
            hash_iterations=FAST_HASH,
        )


def test_the_unique_index_refuses_a_tag_in_another_case_on_its_own(
    db_url: str, engine: Engine
) -> None:
    """Not only the writer's check: the database's unique index folds case as the lookup does."""
    tag = "bob-" + uuid.uuid4().hex[:8]
    make_user(db_url, tag=tag)
    row = {
        "Id": str(uuid.uuid4()),
        "AzureTag": tag.upper(),
        "EmailConfirmed": False,
        "PhoneNumberConfirmed": False,
        "TwoFactorEnabled": False,
        "LockoutEnabled": False,
        "AccessFailedCount": 0,
    }
    with unit_of_work(engine) as session, pytest.raises(IntegrityError):
        session.execute(insert(AspNetUser).values(row))
        session.commit()


def test_the_normalized_tag_is_computed_by_the_database(db_url: str, engine: Engine) -> None:
    """Rows the .NET API inserts (it never names NormalizedAzureTag) are found too."""
    tag = "Bob-" + uuid.uuid4().hex[:8]
    user = make_user(db_url, tag=tag)
    with unit_of_work(engine) as session:
        stored = session.scalar(
            select(AspNetUser.NormalizedAzureTag).where(AspNetUser.Id == user.user_id)
        )
    assert stored == tag.upper()


@pytest.mark.parametrize("tag", ["bob ", " bob", "bob\t"])
def test_a_tag_with_a_surrounding_space_is_a_400_naming_the_field(db_url: str, tag: str) -> None:
    with open_bank(db_url) as bank:
        payer = bank.customer(balance=100)
        sent = bank.mint(payer, 1, tag)
    assert sent.status_code == 400, sent.text
    assert sent.json()["errorCode"] == "VALIDATION_FAILED"
    assert [e["field"] for e in sent.json()["errors"]] == ["recipientAzureTag"]


def test_a_payment_to_the_tag_in_another_case_reaches_the_payee(db_url: str) -> None:
    with open_bank(db_url) as bank:
        payer, payee = bank.customer(balance=100), bank.customer()
        minted = bank.mint(payer, 1, payee.tag.upper())
        assert minted.status_code == 201, minted.text
        spent = bank.transfer(payer, 1, payee.tag.upper(), minted.json()["authorizationId"])
        assert spent.status_code == 201, spent.text


# --- AspNetUsers.Id from a token: exact ---------------------------------------------------------


@pytest.mark.parametrize("spell", [str.upper, lambda s: s + " "], ids=["upper", "trailing-space"])
def test_a_token_naming_the_user_in_another_spelling_is_not_the_user(
    db_url: str, spell: object
) -> None:
    with open_bank(db_url) as bank:
        who = bank.customer(balance=1)
        other = spell(who.user_id)  # type: ignore[operator]
        assert other != who.user_id
        answer = bank.client.get("/api/accounts", headers=bearer(bank.settings, bank.clock, other))
    assert answer.status_code == 401, answer.text


# --- LeasedBy: exact, case-sensitive ------------------------------------------------------------


def _owed(
    engine: Engine, user_id: str, created_at: datetime, notice_id: uuid.UUID | None = None
) -> uuid.UUID:
    notice_id = notice_id or uuid.uuid4()
    with unit_of_work(engine) as session:
        session.add(
            SubscriberNotice(
                Id=notice_id,
                UserId=user_id,
                Kind=NoticeKind.PIN_ENROLLED.value,
                CreatedAt=created_at,
            )
        )
        session.commit()
    return notice_id


def test_runner_names_differing_only_in_case_hold_different_leases(
    db_url: str, engine: Engine
) -> None:
    user = make_user(db_url)
    owed = _owed(engine, user.user_id, T0)
    lower = NoticeClaim("api/host/1/abcdef01", lease_seconds=60, batch_size=10)
    upper = NoticeClaim("API/HOST/1/ABCDEF01", lease_seconds=60, batch_size=10)
    with unit_of_work(engine) as session:
        taken = lower.take(session, T0)
        session.commit()
    assert owed in taken.claimed_ids
    with unit_of_work(engine) as session:
        assert [n.id for n in upper.held(session)] == []
        assert upper.renew(session, T0 + timedelta(minutes=5)) == frozenset()
        assert [n.id for n in lower.held(session)] == [owed]


# --- instants: DATETIME2 precision, CreatedAt first and Id only a tiebreak ----------------------


def test_a_lease_lapses_at_its_microsecond_on_every_dialect(db_url: str, engine: Engine) -> None:
    """The claim's `LeasedUntil <= now` compares microseconds as written: PostgreSQL's timestamp
    and SQL Server's DATETIME2(7) keep them, SQLite's text keeps them."""
    user = make_user(db_url)
    owed = _owed(engine, user.user_id, T0)
    first = NoticeClaim("api/host/1/00000001", lease_seconds=60, batch_size=10)
    second = NoticeClaim("api/host/2/00000002", lease_seconds=60, batch_size=10)
    start = T0 + timedelta(microseconds=123457)
    with unit_of_work(engine) as session:
        lease_until = first.take(session, start).lease_until
        session.commit()
    with unit_of_work(engine) as session:
        held = first.held(session)
        assert [n.leased_until for n in held] == [lease_until]
        early = lease_until - timedelta(microseconds=1)
        assert owed not in second.claim(session, now=early, lease_until=early, limit=10)
        assert owed in second.claim(session, now=lease_until, lease_until=lease_until, limit=10)


def test_the_claim_takes_the_oldest_first_whatever_the_ids(db_url: str, engine: Engine) -> None:
    """CreatedAt decides, one microsecond apart; the Id only breaks ties (its order differs on
    SQL Server, docs/database.md), so a later row with a smaller Id still waits."""
    user = make_user(db_url)
    older = _owed(engine, user.user_id, T0 + timedelta(microseconds=1), uuid.UUID(int=2**128 - 1))
    _owed(engine, user.user_id, T0 + timedelta(microseconds=2), uuid.UUID(int=1))
    runner = NoticeClaim("api/host/1/0000000a", lease_seconds=60, batch_size=1)
    with unit_of_work(engine) as session:
        later = T0 + timedelta(hours=1)
        assert runner.claim(session, now=later, lease_until=later, limit=1) == [older]
