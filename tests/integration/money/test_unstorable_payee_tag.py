"""A payee tag holding a NUL, handed to the money services directly (the HTTP body refuses one
before them): no row holds one and PostgreSQL refuses to compare one (a database error, a 500),
so the mint and the transfer answer 404 PAYEE_NOT_FOUND before any SQL, on every dialect."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from shared.bootstrap import bootstrap
from shared.db.engine import get_engine
from shared.errors import DomainError
from shared.money.mint import MintRequest
from shared.money.transfers import TransferOrder
from shared.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY
from tests.support.money import keyed
from tests.support.users import PIN, enrol_pin, make_user


@pytest.mark.parametrize("tag", ["\x00", "bob\x00", "\x00bob"], ids=["nul", "trailing", "leading"])
def test_a_tag_with_a_nul_is_no_payee_to_the_mint_nor_the_transfer(db_url: str, tag: str) -> None:
    clock = FakeClock(datetime(2026, 9, 7, 12, 0, tzinfo=UTC))
    settings = load_settings({"Database__Url": db_url, "Audit__ChainKey": CHAIN_KEY})
    services = bootstrap(settings, get_engine(db_url), clock)
    alice = make_user(db_url, clock, balance=100)
    enrol_pin(db_url, alice.user_id)
    calls = {
        "mint": lambda: services.mint.mint(
            alice.user_id, MintRequest(alice.primary, tag, Decimal(1), PIN)
        ),
        "transfer": lambda: services.transfers.transfer(
            keyed(alice.user_id), TransferOrder(alice.primary, tag, Decimal(1), uuid.uuid4())
        ),
    }
    for name, call in calls.items():
        with pytest.raises(DomainError) as refused:
            call()
        assert (refused.value.status, refused.value.error_code) == (404, "PAYEE_NOT_FOUND"), name
