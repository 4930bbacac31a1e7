"""Contract audit of docs/cli.md, on real `azurebank` processes: a database that is
unreachable, unmigrated or needs a driver this install lacks, and a port already taken, each get
a clear message naming what to fix and a documented exit code, never a traceback, and never the
URL's password or an address; long work shows progress on a terminal only, not when the output
is piped."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from azurebank_cli import exits
from shared.db.engine import build_engine
from tests.e2e.serve_process import CLI, ROOT, run_cli
from tests.integration.notices.conftest import CONTACT, owed_notices
from tests.support import CHAIN_KEY

pytestmark = pytest.mark.e2e

PASSWORD = "hunter2-in-the-url"
# Port 1 on the loopback: nothing listens there, so the connection is refused at once.
UNREACHABLE = f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:1/azurebank"
EMAIL = "audit.person@example.test"


def _run(database_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        {**os.environ, "PYTHONPATH": str(ROOT), "Database__Url": database_url, **env}, *args
    )


def _says_what_to_fix(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert "Database__Url" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert EMAIL not in done.stdout + done.stderr


ADD = ("users", "add", "--email", EMAIL, "--password", "pw-123456", "--azure-tag", "audit")


@pytest.mark.parametrize("args", [("db", "upgrade"), ADD, ("notices", "status")])
def test_an_unreachable_database_exits_1_with_a_line_naming_database_url(
    args: tuple[str, ...],
) -> None:
    done = _run(UNREACHABLE, *args)
    assert done.returncode == exits.FAILURE
    _says_what_to_fix(done)


@pytest.mark.parametrize("args", [ADD, ("notices", "status")])
def test_an_unmigrated_database_exits_1_and_points_at_db_upgrade(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    done = _run(f"sqlite:///{tmp_path}/empty.db", *args)
    assert done.returncode == exits.FAILURE
    _says_what_to_fix(done)
    assert "azurebank db upgrade" in done.stderr


def test_users_add_prints_exactly_the_user_id_and_the_account_ids(sqlite_url: str) -> None:
    """docs/cli.md: `{"userId": …, "accountIds": […]}` and nothing else, for another program."""
    done = _run(sqlite_url, *ADD, "--accounts", "2", "--balance", "10.10")
    assert done.returncode == exits.OK, done.stderr
    printed = json.loads(done.stdout)
    assert list(printed) == ["userId", "accountIds"]
    assert str(uuid.UUID(printed["userId"])) == printed["userId"]
    assert [str(uuid.UUID(a)) for a in printed["accountIds"]] == printed["accountIds"]
    assert len(printed["accountIds"]) == 2
    assert done.stdout == json.dumps(printed) + "\n"


def test_a_database_driver_this_install_lacks_is_refused_settings_exit_78() -> None:
    # pg8000 is a real SQLAlchemy dialect whose driver is not installed here.
    done = _run(f"postgresql+pg8000://postgres:{PASSWORD}@127.0.0.1/x", "notices", "status")
    assert done.returncode == exits.CONFIG
    _says_what_to_fix(done)
    assert "Fix:" in done.stderr


def test_serve_on_a_port_already_taken_exits_1_not_uvicorns_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run(
            f"sqlite:///{tmp_path}/x.db", "serve", "--port", str(port), Audit__ChainKey=CHAIN_KEY
        )
    assert done.returncode == exits.FAILURE
    assert "Traceback" not in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr


# --- progress: on a terminal only -------------------------------------------------------------


def _notify(sqlite_url: str, pickup: Path, *, piped: bool) -> tuple[subprocess.Popen[bytes], int]:
    """`azurebank notify` with stderr on a new terminal and stdout on it too, or on a pipe when
    `piped`; the process and the terminal's end this test reads."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [*CLI, "notify"],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "Database__Url": sqlite_url,
            "Notices__PickupDirectory": str(pickup),
            "Notices__Contact": CONTACT,
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if piped else secondary,
        stderr=secondary,
    )
    os.close(secondary)
    return process, primary


def _owe(sqlite_url: str, n: int) -> None:
    engine = build_engine(sqlite_url)
    try:
        owed_notices(engine, n)
    finally:
        engine.dispose()


def _read_all(fd: int) -> bytes:
    """Everything written to the terminal until the child closes it (EIO or EOF)."""
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every holder of the terminal's other end has closed it
            break
        if not chunk:
            break
        out += chunk
    return out


def test_notify_shows_progress_on_a_terminal(sqlite_url: str, pickup: Path) -> None:
    _owe(sqlite_url, 3)
    process, primary = _notify(sqlite_url, pickup, piped=False)
    try:
        seen = _read_all(primary).decode(errors="replace")
    finally:
        os.close(primary)
        process.wait(timeout=60)
    assert process.returncode == exits.OK, seen
    assert "notify: sweep 1:" in seen


def test_notify_shows_no_progress_when_its_output_is_piped(sqlite_url: str, pickup: Path) -> None:
    """Not when output is piped, even with stderr still on the terminal
    (`azurebank notify | tee run.log`)."""
    _owe(sqlite_url, 3)
    process, primary = _notify(sqlite_url, pickup, piped=True)
    try:
        on_terminal = _read_all(primary).decode(errors="replace")
        assert process.stdout is not None
        with process.stdout:
            piped = process.stdout.read().decode()
    finally:
        os.close(primary)
        process.wait(timeout=60)
    assert process.returncode == exits.OK, on_terminal
    assert "notify: delivered 3" in piped
    assert "notify: sweep" not in on_terminal + piped
