"""Real `azurebank` processes for the e2e tests, started one way: this checkout's code (cwd and
PYTHONPATH are the repository root), an environment without the developer's app settings, a
free port, a bounded wait until the server is ready, and a stop that always happens (SIGINT,
then kill after a timeout). The server's stdout and stderr go to a log file, readable while it
runs and after it stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.checkout import REPO
from tests.support.connections import unused_port
from tests.support.hosts import CHAIN_KEY, setting_keys
from tests.support.leak_watch import assert_no_secret_shapes

CLI = (sys.executable, "-m", "azurebank_cli")
WAIT = 60.0  # seconds: a bound on a slow shared machine, not a speed claim
# Every section the app reads (`Database__Url`, `Notices:Runner`, ...), compared lower-case.
_SECTIONS = frozenset(key.split("__")[0].lower() for key in setting_keys())


def clean_environ(database_url: str, **settings: str) -> dict[str, str]:
    """This process's environment without any app setting, then PYTHONPATH, the database, a
    chain key, and `settings` (which win)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.replace(":", "__").split("__")[0].lower() not in _SECTIONS
    }
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "Database__Url": database_url,
            "Audit__ChainKey": CHAIN_KEY,
            **settings,
        }
    )
    return env


def run_cli(env: dict[str, str], *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """One `azurebank` command run to its end, output captured as text."""
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> float:
    """Poll `condition` until it holds; the seconds it took, or AssertionError after `timeout`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)
    return time.monotonic() - started


@dataclass
class ServedProcess:
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path
    health: httpx.Response | None = field(default=None)  # the first 200 from /api/health

    def output(self) -> str:
        """Everything the server wrote to stdout and stderr so far (all of it after stop)."""
        return self.log.read_text()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def answers_health(self) -> bool:
        try:
            self.health = httpx.get(f"{self.base_url}/api/health", timeout=5)
        except httpx.TransportError:
            return False
        return self.health.status_code == 200

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=WAIT)


@contextmanager
def served(
    env: dict[str, str],
    log: Path,
    *,
    port: int | None = None,
    cwd: Path = REPO,
    program: Sequence[str] = CLI,
    ready: Callable[[ServedProcess], bool] = ServedProcess.answers_health,
) -> Iterator[ServedProcess]:
    """`<program> serve --port <port>` (a free port unless given), its output in `log`; yielded
    once `ready` holds (by default, GET /api/health answers 200), always stopped on the way out.
    A server that exits before it is ready fails the test with its output; one whose output
    holds the shape of a secret (a token, a test address, a suite key) fails it after the stop."""
    port = unused_port() if port is None else port
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*program, "serve", "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = ServedProcess(process, f"http://127.0.0.1:{port}", log)
    try:
        wait_for(lambda: ready(server) or process.poll() is not None, f"{log.name} to be ready")
        assert process.poll() is None, f"serve exited {process.returncode}:\n{server.output()}"
        yield server
    finally:
        server.stop()
    # The suite's leak watch over every real server's whole output.
    assert_no_secret_shapes(f"the output of {log.name}", server.output())
