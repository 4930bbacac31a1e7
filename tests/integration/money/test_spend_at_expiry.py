"""An authorization that expires between the transfer's pre-check and its spend, on SQLite and
PostgreSQL: the spend loses and the answer is 401 AUTHORIZATION_EXPIRED (at the expiry instant
itself too), not INVALID; nothing moves and the authorization stays unspent."""

from __future__ import annotations

import base64
import functools
import uuid
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from shared.audit.chain import AuditChain
from shared.db.engine import get_engine
from shared.db.schema import Account, AspNetUser, TransferAuthorization
from shared.db.uow import unit_of_work
from shared.identity.pins import verify_pin
from shared.money.applock_sql import DailyLimitLock
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.mint import MintRequest, TransferMint
from shared.money.refusals import AuthorizationExpired
from shared.money.transfer_write_sql import write_transfer
from shared.money.transfers import TransferOrder, TransferService
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed
from tests.support.users import PIN, enrol_pin, make_user

LIFETIME = 300


class ExpiresDuringTheTransfer(FakeClock):
    """The pre-check's reading of the clock is the mint's instant; every later one is `then`."""

    def __init__(self, start: datetime, then: datetime) -> None:
        super().__init__(start)
        self._then = then
        self._read = False

    def now(self) -> datetime:
        if self._read:
            return self._then
        self._read = True
        return super().now()


def _mint(engine: Engine, clock: FakeClock, payer: str, account: uuid.UUID, tag: str) -> uuid.UUID:
    limit = DailyOutflowLimit(Decimal(1000), clock)
    pins = functools.partial(verify_pin, engine, clock, PinSettings())
    mint = TransferMint(engine, clock, limit, pins, authorization_seconds=LIFETIME)
    return mint.mint(payer, MintRequest(account, tag, Decimal(10), PIN)).authorization_id


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=1)], ids=["at", "after"])
def test_an_authorization_that_expires_before_its_spend_is_expired(
    db_url: str, late: timedelta
) -> None:
    engine, minted_at = get_engine(db_url), FakeClock().now()
    payer, payee = make_user(db_url, balance=100), make_user(db_url)
    enrol_pin(db_url, payer.user_id)
    with unit_of_work(engine) as session:
        tag = session.get_one(AspNetUser, payee.user_id).AzureTag
    authorization = _mint(engine, FakeClock(minted_at), payer.user_id, payer.primary, tag)
    clock = ExpiresDuringTheTransfer(minted_at, minted_at + timedelta(seconds=LIFETIME) + late)
    transfers = TransferService(
        engine,
        clock,
        DailyOutflowLimit(Decimal(1000), clock),
        DailyLimitLock(10),
        AuditChain(base64.b64decode(CHAIN_KEY)),
        write_transfer,
    )
    order = TransferOrder(payer.primary, tag, Decimal(10), authorization)
    with pytest.raises(AuthorizationExpired):
        transfers.transfer(keyed(payer.user_id), order)
    with unit_of_work(engine) as session:
        assert session.get_one(Account, payer.primary).Balance == Decimal(100)
        assert session.get_one(TransferAuthorization, authorization).Status == "Pending"
