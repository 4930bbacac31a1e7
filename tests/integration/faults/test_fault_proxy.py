"""The suite's fault injector (tests/support/fault_proxy.py) does what each mode says, against
the real PostgreSQL server: what the fault tests prove rests on it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.support.checkout import REPO
from tests.support.fault_proxy import FaultProxy, Mode

pytestmark = pytest.mark.postgres


def _conninfo(url: str) -> str:
    parsed = make_url(url)
    return (
        f"host={parsed.host} port={parsed.port or 5432} user={parsed.username} "
        f"dbname={parsed.database} connect_timeout=2"
    )


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.in_front_of(postgres_url) as running:
        yield running


@pytest.fixture
def through(proxy: FaultProxy, postgres_url: str) -> str:
    return _conninfo(proxy.url(postgres_url))


@pytest.fixture
def direct(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(_conninfo(postgres_url), autocommit=True) as conn:
        yield conn


def _one(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT 1").fetchone()
    assert row is not None
    return int(row[0])


def test_pass_relays_and_slow_delays_each_chunk(proxy: FaultProxy, through: str) -> None:
    with psycopg.connect(through, autocommit=True) as conn:
        assert _one(conn) == 1
        proxy.set_mode(Mode.SLOW, delay=0.3)
        started = time.monotonic()
        assert _one(conn) == 1
        assert time.monotonic() - started >= 0.5  # the query's chunk and the reply's, each late


def test_black_hole_holds_a_query_until_the_stall_ends_and_stalls_a_connect(
    proxy: FaultProxy, through: str
) -> None:
    with psycopg.connect(through, autocommit=True) as conn:
        proxy.set_mode(Mode.BLACK_HOLE)
        answers: list[int] = []
        worker = threading.Thread(target=lambda: answers.append(_one(conn)))
        worker.start()
        worker.join(0.7)
        assert worker.is_alive() and not answers, "a black-holed query answered"
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(through)  # connect_timeout=2: the proxy accepted, nobody answers
        assert time.monotonic() - started >= 1.5
        proxy.set_mode(Mode.PASS)
        worker.join(5)
        assert answers == [1]


def test_reset_breaks_open_and_new_connections_until_pass(proxy: FaultProxy, through: str) -> None:
    conn = psycopg.connect(through, autocommit=True)
    proxy.set_mode(Mode.RESET)
    with pytest.raises(psycopg.OperationalError):
        _one(conn)
    conn.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(through)
    proxy.set_mode(Mode.PASS)
    with psycopg.connect(through, autocommit=True) as again:
        assert _one(again) == 1


def test_refuse_refuses_new_connections_and_keeps_open_ones(
    proxy: FaultProxy, through: str
) -> None:
    with psycopg.connect(through, autocommit=True) as kept:
        proxy.set_mode(Mode.REFUSE)
        with pytest.raises(psycopg.OperationalError, match="refused"):
            psycopg.connect(through)
        assert _one(kept) == 1
        proxy.set_mode(Mode.PASS)
        with psycopg.connect(through, autocommit=True) as again:
            assert _one(again) == 1


def test_half_open_cuts_the_app_side_while_the_server_session_keeps_its_lock(
    proxy: FaultProxy, through: str, direct: psycopg.Connection
) -> None:
    key = int(uuid.uuid4().int % 2**31)
    holder = psycopg.connect(through)
    pid_row = holder.execute("SELECT pg_backend_pid()").fetchone()
    assert pid_row is not None
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
    proxy.set_mode(Mode.HALF_OPEN)
    proxy.set_mode(Mode.PASS)
    with pytest.raises(psycopg.OperationalError):
        _one(holder)
    holder.close()
    time.sleep(0.3)
    # The server's session lives on and keeps the lock: nobody told the server.
    taken = direct.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    assert taken == (False,)
    alive = direct.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid_row[0],)
    ).fetchone()
    assert alive == (1,)
    direct.execute("SELECT pg_terminate_backend(%s)", (pid_row[0],))
    assert proxy.wait_count("server_closed_half_open", 1, timeout=5)
    assert direct.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)


def test_commit_reply_lost_commits_on_the_server_and_the_app_never_hears(
    proxy: FaultProxy, through: str, direct: psycopg.Connection
) -> None:
    table = f"fault_proxy_{uuid.uuid4().hex[:8]}"
    direct.execute(f"CREATE TABLE {table} (n int)")
    try:
        writer = psycopg.connect(through)
        writer.execute(f"INSERT INTO {table} VALUES (1)")
        proxy.set_mode(Mode.COMMIT_REPLY_LOST, once=True)
        with pytest.raises(psycopg.OperationalError):
            writer.commit()
        writer.close()
        assert proxy.count("commit_cut") == 1
        assert proxy.mode is Mode.PASS
        assert direct.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)
    finally:
        direct.execute(f"DROP TABLE {table}")


def test_the_proxy_runs_as_a_process_switched_by_its_stdin(postgres_url: str) -> None:
    upstream = make_url(postgres_url)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.fault_proxy",
            "--upstream",
            f"{upstream.host}:{upstream.port or 5432}",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        port = int(process.stdout.readline().split()[1])
        through = _conninfo(
            make_url(postgres_url)
            .set(host="127.0.0.1", port=port)
            .render_as_string(hide_password=False)
        )
        with psycopg.connect(through, autocommit=True) as conn:
            assert _one(conn) == 1
        process.stdin.write("refuse\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "ok refuse"
        with pytest.raises(psycopg.OperationalError, match="refused"):
            psycopg.connect(through)
    finally:
        process.stdin.close()
        process.wait(10)
        process.stdout.close()
    assert process.returncode == 0


def test_half_open_at_commit_withholds_the_commit_and_leaves_the_transaction_open(
    proxy: FaultProxy, through: str, direct: psycopg.Connection
) -> None:
    table = f"fault_proxy_{uuid.uuid4().hex[:8]}"
    direct.execute(f"CREATE TABLE {table} (n int)")
    try:
        writer = psycopg.connect(through)
        pid_row = writer.execute("SELECT pg_backend_pid()").fetchone()
        assert pid_row is not None
        writer.execute(f"INSERT INTO {table} VALUES (1)")
        proxy.set_mode(Mode.HALF_OPEN_AT_COMMIT, once=True)
        with pytest.raises(psycopg.OperationalError):
            writer.commit()
        writer.close()
        assert proxy.mode is Mode.PASS
        state = direct.execute(
            "SELECT state FROM pg_stat_activity WHERE pid = %s", (pid_row[0],)
        ).fetchone()
        assert state == ("idle in transaction",)
        assert direct.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
        direct.execute("SELECT pg_terminate_backend(%s)", (pid_row[0],))
        assert proxy.wait_count("server_closed_half_open", 1, timeout=5)
    finally:
        direct.execute(f"DROP TABLE {table}")
