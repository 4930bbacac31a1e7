"""A mint whose COMMIT reply is lost (the suite's fault proxy drops it after the server
committed): the mint answers its own 503 COMMIT_OUTCOME_UNKNOWN, whose title says minting again
is safe, and the server holds the authorization it committed. In process, so a mutant of the
mint's commit meets it; the end-to-end tests stage the same through the served app."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, select

from shared.db.engine import get_engine
from shared.db.schema import AuthorizationStatus, TransferAuthorization
from shared.db.uow import unit_of_work
from shared.errors import CommitOutcomeUnknown
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.mint import MintRequest, TransferMint
from shared.money.refusals import MintOutcomeUnknown
from tests.support.clock import FakeClock
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.users import make_user

pytestmark = pytest.mark.postgres


def test_a_mint_whose_commit_reply_is_lost_is_unknown_and_the_authorization_was_issued(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    clock = FakeClock()
    alice, bob = make_user(postgres_url, clock, balance=100), make_user(postgres_url, clock)

    def pin_checked_then_cut(_user_id: str, _pin: str | None) -> None:
        # After the rungs' read and the PIN: only the authorization's COMMIT reply is lost.
        postgres_proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)

    limit = DailyOutflowLimit(Decimal(1000), clock)
    mint = TransferMint(
        proxied_engine, clock, limit, pin_checked_then_cut, authorization_seconds=60
    )
    with pytest.raises(CommitOutcomeUnknown) as raised:
        mint.mint(alice.user_id, MintRequest(alice.primary, bob.tag, Decimal(10), "4821"))
    error = raised.value
    assert type(error) is MintOutcomeUnknown
    assert (error.status, error.error_code) == (503, "COMMIT_OUTCOME_UNKNOWN")
    assert "Minting a new one is safe" in error.title
    assert postgres_proxy.count("commit_cut") == 1
    with unit_of_work(get_engine(postgres_url)) as session:
        issued = session.scalar(
            select(func.count()).where(
                TransferAuthorization.UserId == alice.user_id,
                TransferAuthorization.Status == AuthorizationStatus.PENDING.value,
            )
        )
    assert issued == 1, "the server had committed"
