"""`commit_unit` (shared/db/uow.py) on real PostgreSQL behind the suite's fault proxy: a connection
lost before the COMMIT was sent (the unit's pending writes are flushed first) is
DatabaseUnavailable, and nothing was written; a COMMIT whose reply is lost is the writer's
CommitOutcomeUnknown (503 COMMIT_OUTCOME_UNKNOWN), never "nothing changed", for the server had
committed. Neither fault carries the driver's error down its chain."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, select

from shared.db.engine import get_engine
from shared.db.schema import AuthorizationStatus, TransferAuthorization
from shared.db.uow import commit_unit, unit_of_work, writing_unit_of_work
from shared.errors import CommitOutcomeUnknown, DatabaseUnavailable
from shared.money.refusals import MintOutcomeUnknown
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.users import User, make_user

pytestmark = pytest.mark.postgres


def _authorization(user: User) -> TransferAuthorization:
    now = datetime.now(UTC)
    return TransferAuthorization(
        Id=uuid.uuid4(),
        UserId=user.user_id,
        AccountId=user.primary,
        RecipientAzureTag="nobody",
        Amount=Decimal(10),
        Status=AuthorizationStatus.PENDING.value,
        CreatedAt=now,
        ExpiresAt=now + timedelta(minutes=5),
    )


def _stored(db_url: str, authorization_id: uuid.UUID) -> bool:
    with unit_of_work(get_engine(db_url)) as session:
        found = session.scalar(
            select(TransferAuthorization.Id).where(TransferAuthorization.Id == authorization_id)
        )
    return found is not None


def test_a_connection_lost_before_the_commit_is_unavailable_and_nothing_was_written(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    pending = _authorization(make_user(postgres_url))
    with (
        pytest.raises(DatabaseUnavailable) as raised,
        writing_unit_of_work(proxied_engine) as session,
    ):
        session.add(pending)  # written by commit_unit's flush, on a connection cut just before
        postgres_proxy.set_mode(Mode.RESET)
        commit_unit(session, unknown=MintOutcomeUnknown)
    postgres_proxy.set_mode(Mode.PASS)
    assert type(raised.value) is DatabaseUnavailable
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert "nothing changed" in raised.value.title
    assert not _stored(postgres_url, pending.Id)


def test_a_commit_whose_reply_is_lost_is_the_writers_outcome_unknown_and_may_have_committed(
    postgres_url: str, postgres_proxy: FaultProxy, proxied_engine: Engine
) -> None:
    pending = _authorization(make_user(postgres_url))
    with (
        pytest.raises(CommitOutcomeUnknown) as raised,
        writing_unit_of_work(proxied_engine) as session,
    ):
        session.add(pending)
        postgres_proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
        commit_unit(session, unknown=MintOutcomeUnknown)
    assert postgres_proxy.count("commit_cut") == 1
    assert type(raised.value) is MintOutcomeUnknown
    assert (raised.value.status, raised.value.error_code) == (503, "COMMIT_OUTCOME_UNKNOWN")
    assert raised.value.headers == {"Retry-After": "5"}
    assert "not known" in raised.value.title and "nothing" not in raised.value.title.lower()
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert _stored(postgres_url, pending.Id), "the server had committed"
