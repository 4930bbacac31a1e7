"""ADR-0048 D1: the API's hosted loop, NoticeRelayService, with the sweep as a plain callable
(tests.support.hosts.hosted) where only the loop is under test.

The sweep itself (claim, delivery, transports) is the relay protocol's and is tested there and
in tests/integration/hosts/test_runner_matrix.py; here only the loop's shape is pinned: the first
look one full period after start, one sweep per period, the sweep's catch-all keeping the loop
alive, cancellation absorbed as shutdown, and sweeps off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api_funcs.served import attach_relay
from shared.bootstrap import Host
from shared.notices.hosted import NoticeRelayService
from shared.settings import Settings, load_settings
from tests.support.hosts import hosted, make_app, relay_environ

pytestmark = pytest.mark.adr("0048", "D1")

RELAY_LOGGER = "azurebank.notices.relay"
# Generous bounds: the machine is shared and slow; nothing here asserts speed.
WAIT = 20.0


def _settings(tmp_path: Path, runner: str = "Api", **extra: str) -> Settings:
    pickup = tmp_path / "pickup"
    pickup.mkdir(exist_ok=True)
    url = f"sqlite:///{tmp_path / 'unused.db'}"
    short = {"Notices__PeriodSeconds": "1", "Notices__LeaseSeconds": "3"}
    return load_settings(relay_environ(url, pickup, runner, **{**short, **extra}))


class RecordingSweep:
    """A sweep callable that records when and on which thread it ran."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.threads: list[int] = []

    def __call__(self) -> Any:
        self.calls.append(time.monotonic())
        self.threads.append(threading.get_ident())
        return None


async def _until(predicate: Any, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.05)


def test_the_first_look_is_one_full_period_after_start(tmp_path: Path) -> None:
    sweep = RecordingSweep()
    service = NoticeRelayService(hosted("api", _settings(tmp_path), sweep))

    async def scenario() -> float:
        started = time.monotonic()
        service.start()
        await _until(lambda: len(sweep.calls) >= 2)
        await service.stop()
        return started

    started = asyncio.run(scenario())
    # ADR-0048 D1: nothing at start; the first sweep one full period (1 s) later.
    assert sweep.calls[0] - started >= 0.95
    # One sweep per period, not back to back.
    assert sweep.calls[1] - sweep.calls[0] >= 0.5


def test_a_sweep_that_overruns_its_period_is_followed_by_the_next_at_once_not_a_period_later(
    tmp_path: Path,
) -> None:
    ends: list[float] = []
    starts: list[float] = []

    def overrunning_sweep() -> None:  # the period is 1 s; the first sweep takes 1.5 s
        starts.append(time.monotonic())
        if len(starts) == 1:
            time.sleep(1.5)
        ends.append(time.monotonic())

    service = NoticeRelayService(hosted("api", _settings(tmp_path), overrunning_sweep))

    async def scenario() -> None:
        service.start()
        await _until(lambda: len(starts) >= 2)
        await service.stop()

    asyncio.run(scenario())
    assert starts[1] - ends[0] < 0.9  # PeriodicTimer: at once, never a further period


def test_sweeps_run_off_the_event_loop_thread(tmp_path: Path) -> None:
    sweep = RecordingSweep()
    service = NoticeRelayService(hosted("api", _settings(tmp_path), sweep))

    async def scenario() -> int:
        await service.sweep_once()
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert sweep.threads and sweep.threads[0] != loop_thread


def test_a_sweep_that_fails_whole_is_logged_at_error_by_type_only_and_the_next_period_sweeps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A real sweep on a database file that cannot be opened: it fails as a whole every period.
    # The catch-all is the sweep's own (D1, D7); the loop around it has none and lives on.
    secret_dir = tmp_path / "someone-secret" / "missing"
    settings = _settings(tmp_path, Database__Url=f"sqlite:///{secret_dir / 'x.db'}")
    relay = Host("api", settings).relay
    service = NoticeRelayService(relay)
    errors: list[logging.LogRecord] = []

    def failures() -> list[logging.LogRecord]:
        errors[:] = [r for r in caplog.records if r.levelno == logging.ERROR]
        return errors

    async def scenario() -> None:
        service.start()
        await _until(lambda: len(failures()) >= 2)
        await service.stop()

    with caplog.at_level(logging.INFO):
        asyncio.run(scenario())

    assert len(errors) >= 2  # the loop lived on after the first failure
    assert all("DatabaseUnavailable" in r.getMessage() for r in errors)
    assert all(r.exc_info is None for r in errors)  # no traceback: a message can echo a path
    assert all("someone-secret" not in r.getMessage() for r in caplog.records)


def test_cancellation_is_absorbed_as_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = NoticeRelayService(
        hosted(
            "api",
            _settings(tmp_path, Notices__PeriodSeconds="60", Notices__LeaseSeconds="120"),
            RecordingSweep(),
        )
    )

    async def scenario() -> asyncio.Task[None]:
        service.start()
        task = service._task
        assert task is not None and task.get_name() == "notice-relay"
        await asyncio.sleep(0.1)
        await service.stop()
        assert task.done()  # stop returns once the loop has ended, not before
        return task

    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        task = asyncio.run(scenario())
    assert task.done() and not task.cancelled() and task.exception() is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(r.getMessage() == "Notice relay: stopped" for r in caplog.records)


def test_stopping_waits_for_a_sweep_already_on_its_thread(tmp_path: Path) -> None:
    # A file written and never marked would be refused on the next sweep (ADR-0048 D3).
    entered = threading.Event()
    finished = threading.Event()

    def slow_sweep() -> None:
        entered.set()
        time.sleep(0.5)
        finished.set()

    service = NoticeRelayService(hosted("api", _settings(tmp_path), slow_sweep))

    async def scenario() -> bool:
        service.start()
        await _until(entered.is_set)
        await service.stop()
        return finished.is_set()

    assert asyncio.run(scenario())  # finished by the time stop returned


def test_stopping_waits_for_a_sweep_on_its_thread_no_longer_than_the_lease_it_holds(
    tmp_path: Path,
) -> None:
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    def stuck_sweep() -> None:
        entered.set()
        release.wait(WAIT)
        finished.set()

    service = NoticeRelayService(hosted("api", _settings(tmp_path), stuck_sweep))  # lease 3 s

    async def scenario() -> tuple[float, bool]:
        service.start()
        await _until(entered.is_set)
        started = time.monotonic()
        try:
            await asyncio.wait_for(service.stop(), WAIT / 2)
            return time.monotonic() - started, finished.is_set()
        finally:
            release.set()

    waited, sweep_had_finished = asyncio.run(scenario())
    assert waited >= 2.5 and not sweep_had_finished


def test_stopping_a_loop_that_has_not_run_yet_is_a_quiet_shutdown(tmp_path: Path) -> None:
    sweep = RecordingSweep()
    service = NoticeRelayService(hosted("api", _settings(tmp_path), sweep))

    async def scenario() -> None:
        service.start()
        await service.stop()  # the loop's task is cancelled before its first step

    asyncio.run(scenario())
    assert sweep.calls == []


def test_the_api_loop_announces_its_runner_period_lease_batch_and_target(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    relay = hosted("api", _settings(tmp_path), RecordingSweep())
    service = NoticeRelayService(relay)

    async def scenario() -> None:
        service.start()
        await service.stop()

    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        asyncio.run(scenario())
    assert caplog.records[0].getMessage() == (
        f"Notice relay: live as {relay.runner}, every 1s, lease 3s, batch 100, into pickup "
        "directory (Notices__PickupDirectory)"
    )


@pytest.mark.parametrize("runner", ["None", "Function"])
def test_an_api_host_the_flag_does_not_name_logs_the_flag_and_never_sweeps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, runner: str
) -> None:
    sweep = RecordingSweep()
    service = NoticeRelayService(hosted("api", _settings(tmp_path, runner=runner), sweep))

    async def scenario() -> object:
        service.start()
        result = await service.sweep_once()
        await service.stop()
        return result

    with caplog.at_level(logging.INFO, logger=RELAY_LOGGER):
        assert asyncio.run(scenario()) is None
    assert sweep.calls == []
    assert not service.delivers
    lines = [r for r in caplog.records if r.name == RELAY_LOGGER]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (
            logging.INFO,
            f"Notice relay: Notices__Runner is {runner}; this process delivers nothing",
        )
    ]


def test_http_is_answered_while_a_sweep_is_delivering(tmp_path: Path) -> None:
    # The sweep blocks its thread until the test has had an HTTP answer: were the sweep on the
    # event loop, the request below could not be served and the test would time out.
    entered = threading.Event()
    release = threading.Event()

    def blocking_sweep() -> None:
        entered.set()
        release.wait(WAIT)

    settings = _settings(tmp_path)
    app = make_app(settings)
    service = NoticeRelayService(hosted("api", settings, blocking_sweep))
    attach_relay(app, service)
    try:
        with TestClient(app) as client:
            assert entered.wait(WAIT), "the loop never swept"
            answered = client.get("/api/health")
            still_sweeping = not release.is_set()
            release.set()
    finally:
        release.set()
    assert answered.status_code == 200
    assert still_sweeping
