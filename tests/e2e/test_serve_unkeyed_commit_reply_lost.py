"""A write with no Idempotency-Key (a PIN change, the mint of a transfer authorization) whose
COMMIT reached PostgreSQL and committed, but whose reply never reached `azurebank serve` (the
suite's fault proxy cuts both sides right after the server answered that COMMIT; the request's
earlier commits, the PIN check's, pass). The app cannot know whether the change happened, so it
must not say "nothing changed": it answers 503 COMMIT_OUTCOME_UNKNOWN, whose title says the
outcome is not known and how the caller finds out or carries on, and that advice holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from shared.db.engine import get_engine
from shared.db.schema import AspNetUser, TransferAuthorization
from shared.db.uow import unit_of_work
from shared.identity.passwords import verify_secret
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.hosts import SIGNING_KEY
from tests.support.money import MINT
from tests.support.served import clean_environ, served
from tests.support.served_money import Customer, customer
from tests.support.users import PIN

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

NEW_PIN = "2468"
PIN_PATH = "/api/pin"


@pytest.fixture
def proxy(fresh_postgres_url: str) -> Iterator[FaultProxy]:
    parsed = make_url(fresh_postgres_url)
    with FaultProxy((parsed.host or "127.0.0.1", parsed.port or 5432)) as running:
        yield running


def _mint(base_url: str, payer: Customer, payee: Customer, pin: str) -> httpx.Response:
    body = {
        "accountId": str(payer.user.primary),
        "recipientAzureTag": payee.user.tag,
        "amount": 10,
        "pin": pin,
    }
    return httpx.post(f"{base_url}{MINT}", json=body, headers=payer.auth, timeout=60)


def _user_row(db_url: str, user_id: str) -> tuple[str | None, int]:
    engine = get_engine(db_url)
    with unit_of_work(engine) as session:
        pin_hash, failed = session.execute(
            select(AspNetUser.PinHash, AspNetUser.PinAccessFailedCount).where(
                AspNetUser.Id == user_id
            )
        ).one()
    return pin_hash, int(failed)


def _authorizations(db_url: str, user_id: str) -> int:
    engine = get_engine(db_url)
    with unit_of_work(engine) as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(TransferAuthorization)
                .where(TransferAuthorization.UserId == user_id)
            )
            or 0
        )


def _assert_outcome_unknown(response: httpx.Response) -> str:
    assert response.status_code == 503, response.text
    problem = response.json()
    assert problem["errorCode"] == "COMMIT_OUTCOME_UNKNOWN", response.text
    title = str(problem["title"])
    assert "not known" in title
    assert "nothing" not in title.lower()
    assert int(response.headers["Retry-After"]) >= 1
    return title


def test_a_pin_change_whose_commit_reply_is_lost_says_the_outcome_is_unknown_and_the_new_pin_works(
    fresh_postgres_url: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    url = fresh_postgres_url
    alice, bob = customer(url, balance=100), customer(url, pin=False)
    env = clean_environ(proxy.url(url), Auth__SigningKey=SIGNING_KEY)
    with served(env, tmp_path / "serve.log") as server:
        proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True, after=b'INSERT INTO "SubscriberNotices"')
        changed = httpx.put(
            f"{server.base_url}{PIN_PATH}",
            json={"currentPin": PIN, "newPin": NEW_PIN},
            headers=alice.auth,
            timeout=60,
        )
        assert proxy.count("commit_cut") == 1, "the proxy never cut the PIN change's COMMIT"
        # The title's advice: the new PIN says whether the change happened.
        minted = _mint(server.base_url, alice, bob, NEW_PIN)
    title = _assert_outcome_unknown(changed)
    assert "new PIN" in title
    pin_hash, failed = _user_row(url, alice.user.user_id)
    assert verify_secret(pin_hash, NEW_PIN), "the lost COMMIT had changed the PIN"
    assert minted.status_code == 201, minted.text
    assert failed == 0


def test_a_mint_whose_commit_reply_is_lost_says_the_outcome_is_not_known_and_a_new_mint_is_granted(
    fresh_postgres_url: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    url = fresh_postgres_url
    alice, bob = customer(url, balance=100), customer(url, pin=False)
    env = clean_environ(proxy.url(url), Auth__SigningKey=SIGNING_KEY)
    with served(env, tmp_path / "serve.log") as server:
        proxy.set_mode(
            Mode.COMMIT_REPLY_LOST, once=True, after=b'INSERT INTO "TransferAuthorizations"'
        )
        lost = _mint(server.base_url, alice, bob, PIN)
        assert proxy.count("commit_cut") == 1, "the proxy never cut the mint's COMMIT"
        again = _mint(server.base_url, alice, bob, PIN)
    title = _assert_outcome_unknown(lost)
    assert "authorization" in title and "expires" in title
    assert again.status_code == 201, again.text
    # The lost COMMIT had landed: two authorizations, the unused one left to expire.
    assert _authorizations(url, alice.user.user_id) == 2
    assert _user_row(url, alice.user.user_id)[1] == 0
