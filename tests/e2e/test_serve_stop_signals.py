"""`azurebank serve` stopped by SIGTERM (what a platform or a container sends) or by SIGINT
(Ctrl-C) shuts down cleanly and exits 0, as docs/cli.md says."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.served import WAIT, clean_environ, served

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stopped_by_a_signal_shuts_down_cleanly_and_exits_0(
    sqlite_url: str, tmp_path: Path, stop: signal.Signals
) -> None:
    with served(clean_environ(sqlite_url), tmp_path / "serve.log") as server:
        server.process.send_signal(stop)
        try:
            server.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve did not stop on {stop.name}:\n{server.output()}")
    output = server.output()
    assert server.returncode == 0, output
    assert "Finished server process" in output  # uvicorn's last line of a clean shutdown
