"""ADR-0051: the Function runner's host logic (the HostedRelay shared.bootstrap.Host composes),
which the timer trigger only feeds with each tick's `past_due`. The end-to-end invocation of the
real user code is in tests/integration/hosts/test_notice_relay_function.py; here, the host's own
guarantees."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from shared.bootstrap import Host
from shared.notices.hosted import HostedRelay
from shared.settings import Settings, SettingsError, load_settings
from tests.support.connections import connection_attempts, unused_port
from tests.support.hosts import CHAIN_KEY, hosted, relay_environ

RELAY_LOGGER = "azurebank.notices.relay"


def _settings(tmp_path: Path, runner: str = "Function", **extra: str) -> Settings:
    pickup = tmp_path / "pickup"
    pickup.mkdir(exist_ok=True)
    url = f"postgresql+psycopg://nobody@127.0.0.1:{unused_port()}/nothing"
    return load_settings(relay_environ(url, pickup, runner, **extra))


def test_the_announcement_names_the_runner_schedule_lease_batch_and_target(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ADR-0051: the start line names the runner, schedule, lease, batch and target."""
    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        host = Host(
            "function",
            _settings(tmp_path, Notices__Schedule="30 */5 * * * *", Notices__BatchSize="25"),
        ).relay
    (line,) = [r.getMessage() for r in caplog.records if r.name == RELAY_LOGGER]
    assert host.runner is not None
    assert line == (
        f"Notice relay: live as {host.runner}, schedule 30 */5 * * * *, lease 120s, "
        "batch 25, into pickup directory (Notices__PickupDirectory)"
    )
    # `function/{host}/{pid}/{8 hex}`, the name a reader matches against LeasedBy.
    assert re.fullmatch(r"function/[^/\s]+/\d+/[0-9a-f]{8}", host.runner)
    assert str(tmp_path) not in line  # the target by its key, never its path


def test_start_opens_nothing_and_the_first_tick_connects(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ADR-0051: starting the host opens no connection; the first tick does."""
    with connection_attempts() as attempts:
        host = Host("function", _settings(tmp_path)).relay
        assert attempts == []
        with caplog.at_level(logging.INFO):
            host.tick(past_due=False)  # the database is down: an Error, never an exception
            host.tick(past_due=False)
    assert attempts  # it did try, on the ticks
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert all("DatabaseUnavailable" in r.getMessage() and r.exc_info is None for r in errors)


class Counting:
    """Stands in for the sweep's work; counts the ticks that ran it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return "summary"


@pytest.mark.adr("0051", "D1")
def test_a_late_tick_is_a_warning_and_still_sweeps_once_and_a_tick_on_time_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ADR-0051: a past-due tick is a Warning and still sweeps once."""
    sweep = Counting()
    host = hosted("function", _settings(tmp_path), sweep)
    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        host.tick()  # on time: nothing to say
        host.tick(past_due=True)
    assert sweep.calls == 2
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == "Notice relay: this tick is late (past due); sweeping now"


@pytest.mark.adr("0051", "D4")
@pytest.mark.parametrize("runner", ["None", "Api"])
def test_not_named_every_tick_returns_at_once(
    runner: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ADR-0051 D4: when the flag does not name the Function, every tick returns at once."""
    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        host: HostedRelay = Host("function", _settings(tmp_path, runner=runner)).relay
        results = [host.tick(past_due=p) for p in (True, False, False)]
    assert results == [None, None, None] and not host.delivers
    assert [r.getMessage() for r in caplog.records] == [
        f"Notice relay: Notices__Runner is {runner}; this process delivers nothing"
    ]


@pytest.mark.adr("0051", "D3")
def test_the_host_refuses_a_partial_set_itself(tmp_path: Path) -> None:
    """ADR-0051 D3: the Function host refuses a partial Notices set itself."""
    settings = load_settings(
        {
            "Database__Url": "sqlite:///unused.db",
            "Audit__ChainKey": CHAIN_KEY,
            "Notices__Runner": "Function",
        }
    )
    with pytest.raises(SettingsError) as refused:
        Host("function", settings)
    assert "Notices__PickupDirectory" in str(refused.value)
    assert "Notices__Contact" in str(refused.value)


@pytest.mark.parametrize("given", ["a name", "a sweep"])
def test_a_hosted_runner_with_a_name_and_no_sweep_or_a_sweep_and_no_name_is_refused(
    tmp_path: Path, given: str
) -> None:
    settings = _settings(tmp_path)
    parts: dict[str, Any] = (
        {"runner": "function/h/1/0000aaaa"} if given == "a name" else {"sweep": lambda: None}
    )
    with pytest.raises(ValueError) as refused:
        HostedRelay("function", settings, **parts)
    assert str(refused.value) == "a hosted runner has both a name and a sweep, or neither"
