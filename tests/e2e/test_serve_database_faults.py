"""A real `azurebank serve` on PostgreSQL behind the suite's fault proxy: every wait on the
database is bounded, so a database that stalls, black-holes, drops or refuses its connections,
or a dead session that holds the audit chain's tail, is answered within the configured bounds
with a 503 and Retry-After, never a 500 and never after the fault ends; and the server recovers
once the database does. The bounds are short here (seconds), set through the settings an
operator sets (BOUNDS)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from shared.clock import SystemClock
from shared.identity.tokens import issue_token
from shared.settings import load_settings
from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.hosts import SIGNING_KEY
from tests.support.served import ServedProcess, clean_environ, served, wait_for
from tests.support.users import PASSWORD, PIN, User, enrol_pin, make_user

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

BOUNDS = {
    "Database__ConnectTimeoutSeconds": "2",
    "Database__StatementTimeoutSeconds": "3",
    "Database__LockTimeoutSeconds": "1",
    "Database__PoolTimeoutSeconds": "1",
    "Database__KeepaliveSeconds": "2",
    "Database__PoolSize": "2",
    "Database__MaxOverflow": "1",
    "DailyLimit__LockTimeoutSeconds": "2",
    "Health__ReadyTimeoutSeconds": "1",
}
# The longest a request may take on a stalled database: its pooled connection's check (the
# statement bound, 3 s, and the client's grace second), then a new connection's (2 s); and a
# slow shared machine's margin.
REQUEST_BOUND = 3 + 1 + 2 + 2.5
READY_BOUND = 1 + 1.5
LOCK_BOUND = 1 + 2.5
# What an HTTP client here waits at most: past every bound, short of any fault's end.
CLIENT_TIMEOUT = REQUEST_BOUND + 4


@dataclass
class Faulty:
    server: ServedProcess
    proxy: FaultProxy
    db_url: str  # the database itself, not through the proxy
    user: User
    headers: dict[str, str]

    def get(self, path: str) -> httpx.Response:
        return httpx.get(
            f"{self.server.base_url}{path}", headers=self.headers, timeout=CLIENT_TIMEOUT
        )

    def send(self, method: str, path: str, body: dict[str, object]) -> httpx.Response:
        headers = {**self.headers, "Idempotency-Key": uuid.uuid4().hex}
        return httpx.request(
            method,
            f"{self.server.base_url}{path}",
            json=body,
            headers=headers,
            timeout=CLIENT_TIMEOUT,
        )


@pytest.fixture
def faulty(fresh_postgres_url: str, tmp_path: Path) -> Iterator[Faulty]:
    user = make_user(fresh_postgres_url, balance=100, accounts=2)
    enrol_pin(fresh_postgres_url, user.user_id)
    token = issue_token(
        load_settings({"Auth__SigningKey": SIGNING_KEY}), SystemClock(), user.user_id
    )
    with FaultProxy.in_front_of(fresh_postgres_url) as proxy:
        env = clean_environ(proxy.url(fresh_postgres_url), Auth__SigningKey=SIGNING_KEY, **BOUNDS)
        with served(env, tmp_path / "serve.log") as server:
            faulty = Faulty(
                server, proxy, fresh_postgres_url, user, {"Authorization": f"Bearer {token}"}
            )
            assert faulty.get("/api/accounts").status_code == 200  # the pool is warm
            assert faulty.get("/api/health/ready").status_code == 200
            yield faulty
            proxy.set_mode(Mode.PASS)
    assert server.returncode == 0, server.output()
    assert "Traceback" not in server.output()


def _timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def _assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["errorCode"] == "DATABASE_UNAVAILABLE", response.text
    assert int(response.headers["Retry-After"]) >= 1


def _recovers(faulty: Faulty) -> None:
    wait_for(lambda: faulty.get("/api/accounts").status_code == 200, "accounts again", 15)
    wait_for(lambda: faulty.get("/api/health/ready").status_code == 200, "ready again", 15)


@pytest.mark.parametrize(
    ("mode", "delay"),
    [pytest.param(Mode.BLACK_HOLE, 0.0, id="black-hole"), pytest.param(Mode.SLOW, 6.0, id="slow")],
)
def test_a_stalled_database_answers_503_within_the_bounds_and_readiness_within_its_own(
    faulty: Faulty, mode: Mode, delay: float
) -> None:
    faulty.proxy.set_mode(mode, delay=delay)
    with ThreadPoolExecutor(2) as calls:
        ready = calls.submit(_timed, lambda: faulty.get("/api/health/ready"))
        accounts = calls.submit(_timed, lambda: faulty.get("/api/accounts"))
        (ready_answer, ready_took), (accounts_answer, accounts_took) = (
            ready.result(),
            accounts.result(),
        )
    assert ready_answer.status_code == 503, ready_answer.text
    assert ready_answer.json()["checks"]["database"] == "failing"
    assert ready_took < READY_BOUND, ready_took
    _assert_unavailable(accounts_answer)
    assert accounts_took < REQUEST_BOUND, accounts_took
    faulty.proxy.set_mode(Mode.PASS)
    _recovers(faulty)
    assert "Database unavailable: OperationalError" in faulty.server.output()


@pytest.mark.parametrize(
    "modes",
    [pytest.param((Mode.RESET,), id="reset"), pytest.param((Mode.RESET, Mode.REFUSE), id="refuse")],
)
def test_a_dropped_or_refused_database_answers_503_not_500_and_the_server_recovers(
    faulty: Faulty, modes: tuple[Mode, ...]
) -> None:
    for mode in modes:
        faulty.proxy.set_mode(mode)
    accounts, took = _timed(lambda: faulty.get("/api/accounts"))
    _assert_unavailable(accounts)
    assert took < REQUEST_BOUND, took
    assert faulty.get("/api/health/ready").status_code == 503
    faulty.proxy.set_mode(Mode.PASS)
    _recovers(faulty)


def test_pool_exhaustion_during_a_stall_answers_503_with_retry_after_and_no_500(
    faulty: Faulty,
) -> None:
    """Eight readers against three connections (PoolSize 2, MaxOverflow 1): the five with no
    connection wait Database__PoolTimeoutSeconds (1 s) and hear 503 at once."""
    faulty.proxy.set_mode(Mode.BLACK_HOLE)
    with ThreadPoolExecutor(8) as calls:
        answers = list(calls.map(lambda _: _timed(lambda: faulty.get("/api/accounts")), range(8)))
    for response, took in answers:
        _assert_unavailable(response)
        assert took < REQUEST_BOUND, took
    quick = [took for _r, took in answers if took < 1 + 2.5]
    assert len(quick) >= 5, sorted(took for _r, took in answers)
    faulty.proxy.set_mode(Mode.PASS)
    _recovers(faulty)
    assert "Database unavailable: TimeoutError" in faulty.server.output()


def _tail_held_by_a_dead_session(faulty: Faulty) -> None:
    """Cut the app's side of a PIN enrolment's connection at its COMMIT (its only one: the
    audit row, the PIN and the notice in one transaction): the server's session stays idle in
    that transaction, holding the chain's tail lock."""
    newcomer = make_user(faulty.db_url)
    settings = load_settings({"Auth__SigningKey": SIGNING_KEY})
    token = issue_token(settings, SystemClock(), newcomer.user_id)
    faulty.proxy.set_mode(Mode.HALF_OPEN_AT_COMMIT, once=True)
    cut = httpx.post(
        f"{faulty.server.base_url}/api/pin",
        json={"password": PASSWORD, "pin": PIN},
        headers={"Authorization": f"Bearer {token}"},
        timeout=CLIENT_TIMEOUT,
    )
    # The COMMIT never reached the server, but the app cannot tell that from a lost reply: it
    # says the outcome is not known, never "nothing changed".
    assert cut.status_code == 503, cut.text
    assert cut.json()["errorCode"] == "COMMIT_OUTCOME_UNKNOWN", cut.text
    assert int(cut.headers["Retry-After"]) >= 1
    assert faulty.proxy.count("commit_cut") == 1
    db = make_url(faulty.db_url)
    with psycopg.connect(
        f"host={db.host} port={db.port or 5432} user={db.username} dbname={db.database}",
        autocommit=True,
    ) as direct:
        holders = direct.execute(
            "SELECT a.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE c.relname = 'AuditChainTail' AND l.mode = 'RowShareLock' "
            "AND a.state = 'idle in transaction'"
        ).fetchall()
    assert len(holders) == 1, holders


def test_a_dead_session_holding_the_audit_tail_holds_pin_changes_and_transfers_to_the_lock_bound(
    faulty: Faulty,
) -> None:
    _tail_held_by_a_dead_session(faulty)
    accounts = faulty.user.account_ids
    transfer = {"fromAccountId": str(accounts[0]), "toAccountId": str(accounts[1]), "amount": 5}
    pins = [PIN, "602817"]  # the current PIN first; a change that goes through swaps them

    def change_pin() -> httpx.Response:
        answer = faulty.send("PUT", "/api/pin", {"currentPin": pins[0], "newPin": pins[1]})
        if answer.status_code == 200:
            pins.reverse()
        return answer

    def move() -> httpx.Response:
        return faulty.send("POST", "/api/transactions/internal-transfer", transfer)

    for attempt, ok in ((change_pin, 200), (move, 201)):
        answer, took = _timed(attempt)
        assert took < LOCK_BOUND, (attempt.__name__, took)
        if answer.status_code != ok:  # not yet: the dead session still holds the tail
            assert answer.status_code == 503, answer.text
            assert answer.json()["errorCode"] == "LOCK_TIMEOUT", answer.text
            assert int(answer.headers["Retry-After"]) >= 1
    # The server ends the dead session itself (idle in its transaction longer than the statement
    # bound), and with it the lock: the app's next attempts go through.
    assert faulty.proxy.wait_count("server_closed_half_open", 1, timeout=10)
    changed = change_pin()
    assert changed.status_code == 200, changed.text
    moved = move()
    assert moved.status_code == 201, moved.text
