"""ADR-0048 D1, ADR-0051 D4: `Notices__Runner` ∈ {None, Api, Function} × host ∈ {the Function
host, `serve`}. Exactly the named host delivers; the other logs the flag's value and delivers
nothing; None delivers nowhere.

Both hosts are driven in-process, as each starts: the Function host as `relay_func` builds it
(shared.bootstrap.Host) and one tick; `serve`'s app as `build_served_app` builds it, its relay
started, one sweep, stopped. Real SQLite and PostgreSQL, a real pickup directory under tmp_path
(outside any git tree).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest

from api_funcs.served import build_served_app
from shared.bootstrap import Host
from shared.notices.hosted import NoticeRelayService
from shared.settings import Settings, load_settings
from tests.support.connections import connection_attempts, unused_port
from tests.support.hosts import relay_environ
from tests.support.notices import just_now, notice_row, owed_notices

RELAY_LOGGER = "azurebank.notices.relay"


def _settings(db_url: str, pickup: Path, runner: str) -> Settings:
    # Both hosts' checks pass whatever the flag: the target and contact are set for both.
    return load_settings(relay_environ(db_url, pickup, runner))


def _drive_function_host(settings: Settings) -> None:
    Host("function", settings).relay.tick(past_due=False)


def _drive_serve(settings: Settings) -> None:
    relay = build_served_app(settings).state.notice_relay
    assert isinstance(relay, NoticeRelayService)

    async def one_sweep() -> None:
        relay.start()
        await relay.sweep_once()
        await relay.stop()

    asyncio.run(one_sweep())


HOSTS = {"function": _drive_function_host, "serve": _drive_serve}
NAMED = {"None": None, "Api": "serve", "Function": "function"}


def _delivered(db_url: str, pickup: Path, notice_id: uuid.UUID) -> bool:
    state = notice_row(db_url, notice_id)
    on_disk = (pickup / f"{notice_id}.eml").exists()
    assert on_disk == (state.DeliveredAt is not None), "file and row disagree"
    return on_disk


@pytest.mark.adr("0048", "D1")
@pytest.mark.parametrize("runner", ["None", "Api", "Function"])
def test_exactly_the_host_the_flag_names_delivers(
    runner: str, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pickup = tmp_path / "pickup"
    pickup.mkdir()
    settings = _settings(db_url, pickup, runner)
    delivered_by: dict[str, bool] = {}
    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        for host, drive in HOSTS.items():
            # A fresh owed notice before each host, so each host's effect is seen on its own.
            notice = owed_notices(db_url, start=just_now())[0].id
            caplog.clear()
            drive(settings)
            delivered_by[host] = _delivered(db_url, pickup, notice)
            lines = [r.getMessage() for r in caplog.records if r.name == RELAY_LOGGER]
            if NAMED[runner] == host:
                kind = "function" if host == "function" else "api"
                assert any(ln.startswith(f"Notice relay: live as {kind}/") for ln in lines)
            else:
                assert lines[0] == (
                    f"Notice relay: Notices__Runner is {runner}; this process delivers nothing"
                )
    assert delivered_by == {host: NAMED[runner] == host for host in HOSTS}
    if runner == "None":
        assert list(pickup.iterdir()) == []


@pytest.mark.parametrize(
    ("host", "runner"),
    [("function", "None"), ("function", "Api"), ("serve", "None"), ("serve", "Function")],
)
@pytest.mark.adr("0051", "D4")
def test_a_host_not_named_returns_at_once_without_touching_the_database(
    host: str,
    runner: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ADR-0051 D4: a host the flag does not name returns at once and opens no connection."""
    # A database nobody listens on: any attempt to use it would also be an Error line.
    url = f"postgresql+psycopg://nobody@127.0.0.1:{unused_port()}/nothing"
    pickup = tmp_path / "pickup"
    pickup.mkdir()
    with connection_attempts() as attempts, caplog.at_level(logging.INFO):
        for _ in range(3):
            HOSTS[host](_settings(url, pickup, runner))
    assert attempts == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
