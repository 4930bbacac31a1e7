"""The transfer's pre-check reads without a lock, so nothing it saw is authoritative: under the
application lock the transfer reads the accounts and the day's sum again and refuses on what it
finds there. On SQLite and PostgreSQL, another request commits between the two (in the tests'
lock, just before the unit of work under the lock opens); the transfer refuses by what that
request did, and moves nothing. A refusal the pre-check can already make comes before the lock,
so it waits on nobody; a transfer whose writes lose every race gives up after the last attempt,
waiting longer after each; and a completed transfer's audit row records what moved."""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from shared.bootstrap import Services, bootstrap
from shared.db.engine import get_engine
from shared.db.schema import Account, AuditEvent
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.errors import DomainError
from shared.money import idempotency
from shared.money.applock_sql import DailyLimitLock, take_daily_limit_lock
from shared.money.idempotency import Answer
from shared.money.mint import MintRequest
from shared.money.transfer_write_sql import TransferWrites, WriteOutcome
from shared.money.transfers import TRANSFER_COMPLETED, TransferOrder
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed
from tests.support.users import PIN, enrol_pin, make_user

pytestmark = pytest.mark.adr("0050", "D4.1")

START = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)
LIMIT = Decimal(100)
REFUSED_BY_THE_LIMIT = "Daily limit refused %s for user %s: used %s of %s"


@dataclass(frozen=True)
class _LockAfter(DailyLimitLock):
    """The application lock, after `meanwhile` ran once: what another request commits between
    this transfer's pre-check and its unit of work under the lock."""

    meanwhile: list[Callable[[], object]] | None = None

    def unit_of_work(self, engine: Engine) -> AbstractContextManager[Session]:
        if self.meanwhile:
            self.meanwhile.pop()()
        return super().unit_of_work(engine)


class Scene:
    """Alice (200 in one account) and Bob (one empty account) on a bank whose day's limit is
    100; `meanwhile` runs once, between a transfer's pre-check and its lock."""

    def __init__(self, url: str, **collaborators: object) -> None:
        self.clock = FakeClock(START)
        self.meanwhile: list[Callable[[], object]] = []
        settings = load_settings(
            {"Database__Url": url, "Audit__ChainKey": CHAIN_KEY, "DailyLimit__Amount": str(LIMIT)}
        )
        self.services: Services = bootstrap(
            settings,
            get_engine(url),
            self.clock,
            daily_limit_lock=_LockAfter(1, self.meanwhile),
            **collaborators,  # type: ignore[arg-type]
        )
        self.alice = make_user(url, self.clock, balance=200)
        self.bob = make_user(url, self.clock)
        enrol_pin(url, self.alice.user_id)

    def order(self, amount: int) -> TransferOrder:
        """An authorized transfer of `amount` from Alice to Bob, minted now."""
        alice = self.alice
        request = MintRequest(alice.primary, self.bob.tag, Decimal(amount), PIN)
        grant = self.services.mint.mint(alice.user_id, request)
        return TransferOrder(alice.primary, self.bob.tag, Decimal(amount), grant.authorization_id)

    def pay(self, order: TransferOrder) -> Answer:
        return self.services.transfers.transfer(keyed(self.alice.user_id), order)

    def refusal(self, order: TransferOrder) -> tuple[int, str]:
        with pytest.raises(DomainError) as refused:
            self.pay(order)
        return refused.value.status, refused.value.error_code

    def close(self, account_id: uuid.UUID) -> None:
        with unit_of_work(self.services.engine) as session:
            session.execute(update(Account).where(Account.Id == account_id).values(IsDeleted=True))
            session.commit()

    def balances(self) -> tuple[Decimal, Decimal]:
        with unit_of_work(self.services.engine) as session:
            read = [session.get_one(Account, who.primary).Balance for who in (self.alice, self.bob)]
        return read[0], read[1]


def _refused_by_the_limit(caplog: pytest.LogCaptureFixture) -> list[tuple[object, ...]]:
    """The figures of every daily-limit refusal logged: requested, user, used, limit."""
    return [
        tuple(record.args or ())
        for record in caplog.records
        if record.name == "azurebank.money" and record.msg == REFUSED_BY_THE_LIMIT
    ]


@pytest.mark.parametrize(
    ("closed", "refusal"),
    [("payer", (401, "AUTHORIZATION_INVALID")), ("payee", (422, "PAYEE_INVALID"))],
)
def test_an_account_closed_after_the_pre_check_refuses_the_transfer(
    db_url: str, closed: str, refusal: tuple[int, str]
) -> None:
    """The paying account closed cannot pay; the payee's only account closed is no payee."""
    scene = Scene(db_url)
    order = scene.order(10)
    account = {"payer": scene.alice, "payee": scene.bob}[closed].primary
    scene.meanwhile.append(functools.partial(scene.close, account))
    assert scene.refusal(order) == refusal
    assert scene.balances() == (Decimal(200), Decimal(0))


def test_a_spend_committed_after_the_pre_check_counts_against_the_day(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Two authorizations of 60 minted while the day was empty: the first transfer commits
    between the second's pre-check (which saw nothing spent) and its lock, which sees 60."""
    scene = Scene(db_url)
    first, second = scene.order(60), scene.order(60)
    scene.meanwhile.append(functools.partial(scene.pay, first))
    with caplog.at_level(logging.INFO, logger="azurebank.money"):
        assert scene.refusal(second) == (422, "DAILY_LIMIT_EXCEEDED")
    assert _refused_by_the_limit(caplog) == [(Decimal(60), scene.alice.user_id, Decimal(60), LIMIT)]
    assert scene.balances() == (Decimal(140), Decimal(60))


@contextmanager
def _lock_held_elsewhere(scene: Scene) -> Iterator[None]:
    """Alice's application lock held by another transaction (on SQLite, the write lock)."""
    with writing_unit_of_work(scene.services.engine) as holder:
        if holder.get_bind().dialect.name == "sqlite":
            holder.connection()  # BEGIN IMMEDIATE: the write lock is held
        else:
            take_daily_limit_lock(holder, scene.alice.user_id, 1)
        yield


def test_a_transfer_the_day_already_refuses_answers_before_the_lock(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The pre-check sees the day's 60 and refuses the second 60 without waiting on the lock
    another transaction holds (waiting, the transfer would answer 503 LOCK_TIMEOUT)."""
    scene = Scene(db_url)
    first, second = scene.order(60), scene.order(60)
    scene.pay(first)
    with _lock_held_elsewhere(scene), caplog.at_level(logging.INFO, logger="azurebank.money"):
        assert scene.refusal(second) == (422, "DAILY_LIMIT_EXCEEDED")
    assert _refused_by_the_limit(caplog) == [(Decimal(60), scene.alice.user_id, Decimal(60), LIMIT)]


def test_a_completed_transfer_audits_what_moved_from_where_to_whom(db_url: str) -> None:
    scene = Scene(db_url)
    order = scene.order(10)
    receipt = json.loads(scene.pay(order).body)
    with unit_of_work(scene.services.engine) as session:
        details = session.scalars(
            select(AuditEvent.Details).where(
                AuditEvent.ActorUserId == scene.alice.user_id,
                AuditEvent.Event == TRANSFER_COMPLETED,
            )
        ).all()
    assert [json.loads(d or "null") for d in details] == [
        {
            "transactionId": receipt["transactionId"],
            "accountId": str(scene.alice.primary),
            "recipientAzureTag": scene.bob.tag,
            "amount": "10",
        }
    ]


def test_a_transfer_that_loses_every_race_gives_up_after_the_last_attempt_backing_off_longer(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that match no row every time (a token moved each attempt): each attempt runs once,
    each but the last followed by a pause drawn from a bound that grows with the attempt, then
    503 CONCURRENCY_CONFLICT at once, one Warning saying so, and nothing moved."""
    written: list[TransferWrites] = []

    def always_lost(_session: Session, writes: TransferWrites) -> WriteOutcome:
        written.append(writes)
        return WriteOutcome(balances=1, spent=0)

    bounds: list[tuple[float, float]] = []

    def at_the_bound(low: float, high: float) -> float:
        bounds.append((low, high))
        return high

    waits: list[float] = []
    # The money module's own view of the two modules, so nothing else in the process is touched.
    monkeypatch.setattr("shared.money.idempotency.random", SimpleNamespace(uniform=at_the_bound))
    monkeypatch.setattr("shared.money.idempotency.time", SimpleNamespace(sleep=waits.append))
    scene = Scene(db_url, transfer_writes=always_lost)
    order = scene.order(10)
    with caplog.at_level(logging.INFO, logger="azurebank.money"):
        assert scene.refusal(order) == (503, "CONCURRENCY_CONFLICT")
    # A pause and a "retrying" line between attempts only: none after the last, which refuses.
    retries = range(1, idempotency.MAX_ATTEMPTS)
    assert len(written) == idempotency.MAX_ATTEMPTS
    assert waits == [pytest.approx(waits[0] * n) for n in retries] and waits[0] > 0
    assert [low for low, _ in bounds] == [0] * (idempotency.MAX_ATTEMPTS - 1)
    retried = [
        record.args
        for record in caplog.records
        if record.msg == "Money transaction lost a race (attempt %d of %d); retrying"
    ]
    assert retried == [(n, idempotency.MAX_ATTEMPTS) for n in retries]
    assert [(r.levelno, r.getMessage()) for r in caplog.records if "on each of its" in r.msg] == [
        (
            logging.WARNING,
            f"Money transaction lost a race on each of its {idempotency.MAX_ATTEMPTS} attempts",
        )
    ]
    assert scene.balances() == (Decimal(200), Decimal(0))
