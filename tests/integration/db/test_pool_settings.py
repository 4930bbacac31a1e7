"""`Database__PoolSize` and `Database__MaxOverflow` size the host's pool: the engine a host opens
from its settings holds at most their sum of connections to the real server at once."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from sqlalchemy import text

from shared.bootstrap import open_services
from shared.settings import load_settings
from tests.support.hosts import host_environ

pytestmark = pytest.mark.postgres


def test_the_hosts_engine_is_pooled_as_its_settings_say(postgres_url: str) -> None:
    settings = load_settings(
        host_environ(postgres_url, Database__PoolSize="2", Database__MaxOverflow="1")
    )
    engine = open_services(settings).engine
    pool = engine.pool
    assert (pool.size(), pool._max_overflow) == (2, 1)  # type: ignore[attr-defined]
    with ExitStack() as held:
        pids = {
            held.enter_context(engine.connect()).execute(text("SELECT pg_backend_pid()")).scalar()
            for _ in range(3)
        }
        assert len(pids) == 3
        assert pool.checkedout() == 3  # type: ignore[attr-defined]
    assert pool.checkedin() == 2  # type: ignore[attr-defined]  # the overflow one was closed
