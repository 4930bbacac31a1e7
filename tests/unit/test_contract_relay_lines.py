"""Contract audit, docs/operations.md: the announcement line of each hosted runner, character for
character with the defaults of docs/settings.md, and with the target by its key, never its path."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from api_funcs.served import build_served_app
from shared.bootstrap import Host
from shared.settings import Settings, load_settings
from tests.support import CHAIN_KEY

RELAY_LOGGER = "azurebank.notices.relay"
NAME = r"[^/\s]+/\d+/[0-9a-f]{8}"
TARGET = r"pickup directory \(Notices__PickupDirectory\)"


def _settings(tmp_path: Path, runner: str) -> Settings:
    pickup = tmp_path / "pickup"
    pickup.mkdir()
    return load_settings(
        {
            # Nothing connects at start; the URL is never used here.
            "Database__Url": "postgresql+psycopg://nobody@127.0.0.1:1/nothing",
            "Audit__ChainKey": CHAIN_KEY,
            "Notices__Runner": runner,
            "Notices__PickupDirectory": str(pickup),
            "Notices__Contact": "AzureBank support, +1 555 0100",
        }
    )


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == RELAY_LOGGER]


def test_the_function_runner_announces_schedule_lease_batch_and_target_with_the_defaults(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        Host("function", _settings(tmp_path, "Function"))
    (line,) = _lines(caplog)
    assert re.fullmatch(
        rf"Notice relay: live as function/{NAME}, schedule 0 \*/1 \* \* \* \*, lease 120s, "
        rf"batch 100, into {TARGET}",
        line,
    ), line
    assert str(tmp_path) not in line


def test_the_api_runner_announces_its_period_lease_batch_and_target_with_the_defaults(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = build_served_app(_settings(tmp_path, "Api")).state.notice_relay

    async def scenario() -> None:
        service.start()
        await service.stop()

    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        asyncio.run(scenario())
    line = _lines(caplog)[0]
    assert re.fullmatch(
        rf"Notice relay: live as api/{NAME}, every 15s, lease 120s, batch 100, into {TARGET}",
        line,
    ), line
    assert str(tmp_path) not in "\n".join(_lines(caplog))
