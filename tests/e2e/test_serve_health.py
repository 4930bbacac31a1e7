"""Issue 2: `azurebank serve` serves GET /api/health on localhost from a migrated SQLite file,
and stops cleanly when asked."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(database_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.replace(":", "__").split("__")[0].lower()
        not in {"database", "notices", "auth", "audit", "dailylimit", "pin", "transfers"}
    }
    env["PYTHONPATH"] = str(ROOT)
    env["Database__Url"] = database_url
    return env


@pytest.mark.e2e
def test_serve_answers_health_200_and_stops_cleanly(tmp_path: Path) -> None:
    env = _env(f"sqlite:///{tmp_path / 'azurebank.db'}")
    cli = [sys.executable, "-m", "shared.cli"]
    upgrade = subprocess.run(
        [*cli, "db", "upgrade"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert upgrade.returncode == 0, upgrade.stderr

    port = _free_port()
    server = subprocess.Popen(
        [*cli, "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        response = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert response is not None, "serve never answered"
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}
    finally:
        server.send_signal(signal.SIGINT)
        try:
            output, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            output, _ = server.communicate()
    assert server.returncode == 0, output
    assert "Traceback" not in output
