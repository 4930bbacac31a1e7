"""The app as Azure runs it: the real Python worker indexes function_app.py from the deployed
package, loads every Function and answers the stand-in host's invocations, HTTP requests shaped
as the host shapes them and timer ticks carrying the host's TimerInfo."""

from __future__ import annotations

import json
import shutil
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from api_funcs.functions import OPERATIONS, PAGES
from shared.clock import SystemClock
from shared.settings import load_settings
from tests.support.functions_host import WorkerFailed, WorkerSession
from tests.support.hosts import SIGNING_KEY, relay_environ
from tests.support.leak_watch import assert_no_secret_shapes
from tests.support.notices import just_now, notice_row, owed_notices
from tests.support.tokens import bearer
from tests.support.users import make_user
from tests.worker.conftest import StartWorker

pytestmark = pytest.mark.worker

DEPOSIT = "/api/transactions/deposit"


@pytest.fixture(scope="module")
def bank(_sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The app settings of the module's worker: a migrated SQLite file, the relay named as the
    Function with a pickup directory of its own, and a local signing key."""
    folder = tmp_path_factory.mktemp("bank")
    shutil.copyfile(_sqlite_template, folder / "azurebank.db")
    (folder / "pickup").mkdir()
    env = relay_environ(f"sqlite:///{folder / 'azurebank.db'}", folder / "pickup", "Function")
    return {**env, "Auth__SigningKey": SIGNING_KEY}


@pytest.fixture(scope="module")
def worker(bank: dict[str, str], start_module_worker: StartWorker) -> WorkerSession:
    session = start_module_worker(bank)
    session.start()
    return session


def test_indexing_yields_exactly_the_http_operations_and_the_relay_timer_with_their_bindings(
    worker: WorkerSession,
) -> None:
    expected = {
        op.name: {
            "req": {
                "direction": "IN",
                "type": "httpTrigger",
                "name": "req",
                "methods": list(op.methods),
                "authLevel": op.auth_level.name,
                "route": op.route,
            },
            "$return": {"direction": "OUT", "type": "http", "name": "$return"},
        }
        for op in (*OPERATIONS, *PAGES)
    }
    expected["notice_relay"] = {
        "timer": {
            "direction": "IN",
            "type": "timerTrigger",
            "name": "timer",
            "schedule": "%Notices__Schedule%",
            "useMonitor": True,
        }
    }
    assert {name: fn.bindings for name, fn in worker.functions.items()} == expected
    assert {fn.metadata.script_file for fn in worker.functions.values()} == {"function_app.py"}


def test_a_request_with_a_bearer_an_idempotency_key_and_a_body_reaches_its_route_and_answers(
    worker: WorkerSession, bank: dict[str, str]
) -> None:
    user = make_user(bank["Database__Url"], balance="10.00")
    headers = {
        **bearer(load_settings(bank), SystemClock(), user.user_id),
        "Idempotency-Key": uuid.uuid4().hex,
        "Content-Type": "application/json",
    }
    body = json.dumps({"accountId": str(user.primary), "amount": 12.34}).encode()

    first = worker.http("POST", DEPOSIT, headers, body)
    replay = worker.http("POST", DEPOSIT, headers, body)
    other_body = worker.http("POST", DEPOSIT, headers, body.replace(b"12.34", b"12.35"))
    unsigned = worker.http("POST", DEPOSIT, {**headers, "Authorization": "Bearer x"}, body)

    assert first.status == 201, first.body
    assert first.headers["content-type"] == "application/json"
    assert "idempotency-replayed" not in {k.lower() for k in first.headers}
    receipt = first.json()
    assert receipt["accountId"] == str(user.primary)
    assert Decimal(str(receipt["amount"])) == Decimal("12.34")
    assert Decimal(str(receipt["balance"])) == Decimal("22.34")
    # The key came through: the same key and body replay the first answer, byte for byte...
    assert (replay.status, replay.body) == (201, first.body)
    assert {k.lower(): v for k, v in replay.headers.items()}["idempotency-replayed"] == "true"
    # ...and the body came through: the same key with another amount is refused.
    assert other_body.status == 422, other_body.body
    assert other_body.json()["errorCode"] == "IDEMPOTENCY_KEY_REUSED"
    # The Authorization header came through: a bad bearer is refused before the money.
    assert unsigned.status == 401, unsigned.body
    logged = "\n".join(line.message for line in worker.log_lines()) + worker.stderr()
    assert headers["Authorization"].split()[1] not in logged
    assert_no_secret_shapes("the worker's log", logged)


def test_an_anonymous_route_answers_without_a_key_and_an_unknown_asset_is_not_found(
    worker: WorkerSession,
) -> None:
    health = worker.http("GET", "/api/health")
    page = worker.http("GET", "/api/docs/swagger-ui.css")  # ApiDocs off on the Functions host
    assert (health.status, health.json()) == (200, {"status": "ok"})
    assert page.status == 404


@pytest.mark.parametrize(("runner", "delivers"), [("Function", True), ("None", False)])
def test_a_timer_tick_delivers_an_owed_notice_only_where_notices_runner_names_the_function(
    runner: str,
    delivers: bool,
    sqlite_url: str,
    pickup: Path,
    start_worker: StartWorker,
) -> None:
    session = start_worker(relay_environ(sqlite_url, pickup, runner))
    session.start()
    owed = owed_notices(sqlite_url, start=just_now())[0]

    session.tick("notice_relay", past_due=False)

    delivered = notice_row(sqlite_url, owed.id).DeliveredAt is not None
    files = sorted(p.name for p in pickup.iterdir())
    assert (delivered, len(files)) == ((True, 1) if delivers else (False, 0)), files
    announced = [line.message for line in session.log_lines() if "Notice relay" in line.message]
    assert announced, "the host's start announces what its relay does"


def test_indexing_fails_naming_the_key_when_a_required_setting_is_missing(
    sqlite_url: str, pickup: Path, start_worker: StartWorker
) -> None:
    settings = relay_environ(sqlite_url, pickup, "Function")
    del settings["Database__Url"]
    session = start_worker(settings)
    session.initialize()
    with pytest.raises(WorkerFailed) as refused:
        session.index()
    assert "Database__Url" in str(refused.value)
    assert "SettingsError" in str(refused.value)
