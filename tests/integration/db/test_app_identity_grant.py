"""`azurebank db grant` on a real PostgreSQL: the role it creates does the app's work — a PIN
enrolled and changed, a mint, a transfer and its replay, the allowance, readiness, the notices
delivered — and nothing more: no DDL, no rewriting the audit chain or the schema's version."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError

from azurebank_cli import exits
from azurebank_cli.main import main
from shared.db.engine import dispose_engines
from shared.db.grant_sql import table_privileges
from tests.conftest import POSTGRES_ADMIN_URL
from tests.support.clock import FakeClock
from tests.support.hosts import CONTACT
from tests.support.money import open_bank, unique_key
from tests.support.users import PASSWORD, PIN, make_user

pytestmark = pytest.mark.postgres


@pytest.fixture
def app_role(fresh_postgres_url: str) -> Iterator[str]:
    """A role name of this test's own; whatever the test made of it is dropped afterwards
    (roles are the whole server's, not the database's)."""
    name = f"azurebank_app_{uuid.uuid4().hex[:10]}"
    yield name
    dispose_engines()
    for url in (fresh_postgres_url, POSTGRES_ADMIN_URL):
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                exists = conn.execute(
                    text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}
                ).first()
                if exists and url == fresh_postgres_url:
                    conn.execute(text(f'DROP OWNED BY "{name}"'))
                elif exists:
                    conn.execute(text(f'DROP ROLE "{name}"'))
        finally:
            admin.dispose()


def _grant(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *args: str
) -> tuple[int, str]:
    monkeypatch.setenv("Database__Url", url)
    code = main(["db", "grant", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out


def _as(role: str, url: str) -> str:
    return make_url(url).set(username=role, password=None).render_as_string(hide_password=False)


def test_the_granted_role_does_the_apps_work_on_postgresql(
    fresh_postgres_url: str,
    app_role: str,
    pickup: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _grant(monkeypatch, capsys, fresh_postgres_url, "--principal", app_role)
    assert code == exits.OK, out
    assert f"user {app_role} (postgresql): created" in out
    # The customers exist before the app serves them (the operator's `users add`, as admin).
    clock = FakeClock()
    payer = make_user(fresh_postgres_url, clock, balance=1000)
    payee = make_user(fresh_postgres_url, clock)
    role_url = _as(app_role, fresh_postgres_url)

    with open_bank(role_url, clock) as bank:
        headers = bank.headers(payer)
        enrolled = bank.client.post(
            "/api/pin", json={"password": PASSWORD, "pin": PIN}, headers=headers
        )
        assert enrolled.status_code == 201, enrolled.text
        changed = bank.client.put(
            "/api/pin", json={"currentPin": PIN, "newPin": PIN}, headers=headers
        )
        assert changed.status_code == 200, changed.text
        auth = bank.authorize(payer, 10, payee)
        key = unique_key()
        spent = bank.transfer(payer, 10, payee, auth, key=key)
        assert spent.status_code == 201, spent.text
        replayed = bank.transfer(payer, 10, payee, auth, key=key)
        assert replayed.status_code == 201 and replayed.content == spent.content
        assert replayed.headers["Idempotency-Replayed"] == "true"
        assert bank.allowance(payer)["used"] == 10
        ready = bank.client.get("/api/health/ready")
        assert ready.status_code == 200, ready.text

    # The relay's work as the same role: claim, deliver, mark delivered.
    for key_, value in {
        "Database__Url": role_url,
        "Notices__PickupDirectory": str(pickup),
        "Notices__Contact": CONTACT,
    }.items():
        monkeypatch.setenv(key_, value)
    assert main(["notify"]) == exits.OK
    capsys.readouterr()
    assert len(list(pickup.glob("*.eml"))) == 2  # PinEnrolled and PinChanged

    refused = [
        'CREATE TABLE "Intruder" (id int)',
        'ALTER TABLE "Accounts" ADD COLUMN "Extra" int',
        'DROP TABLE "IdempotencyRecords"',
        'UPDATE "AuditEvents" SET "Event" = \'forged\'',
        'DELETE FROM "AuditEvents"',
        "UPDATE alembic_version SET version_num = 'x'",
        'DELETE FROM "AuditChainTail"',
    ]
    role = create_engine(role_url)
    try:
        for statement in refused:
            with role.connect() as conn, pytest.raises(ProgrammingError) as caught:
                conn.execute(text(statement))
            # InsufficientPrivilege (42501): not a missing column or a syntax error.
            assert getattr(caught.value.orig, "sqlstate", None) == "42501", statement
    finally:
        role.dispose()


def test_granting_again_changes_nothing_and_says_the_user_was_there(
    fresh_postgres_url: str,
    app_role: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _grant(monkeypatch, capsys, fresh_postgres_url, "--principal", app_role)[0] == 0
    code, out = _grant(monkeypatch, capsys, fresh_postgres_url, "--principal", app_role, "--json")
    assert code == exits.OK
    report = json.loads(out)
    assert report["created"] is False
    assert report["privileges"] == {t: list(p) for t, p in table_privileges().items()}


def test_a_role_without_the_grant_cannot_read_the_apps_tables(
    fresh_postgres_url: str, app_role: str
) -> None:
    """The control: what the first test's role can do, the grant gave it."""
    admin = create_engine(fresh_postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE ROLE "{app_role}" LOGIN'))
    finally:
        admin.dispose()
    role = create_engine(_as(app_role, fresh_postgres_url))
    try:
        with role.connect() as conn, pytest.raises(ProgrammingError):
            conn.execute(text('SELECT count(*) FROM "Accounts"'))
    finally:
        role.dispose()


@pytest.mark.parametrize(
    "args",
    [
        ["--principal", "x; DROP TABLE y"],
        ["--principal", "app", "--object-id", "not-a-guid"],
        # An Entra object id means nothing to PostgreSQL.
        ["--principal", "app", "--object-id", str(uuid.uuid4())],
    ],
)
def test_a_bad_grant_command_line_exits_64(
    fresh_postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
) -> None:
    monkeypatch.setenv("Database__Url", fresh_postgres_url)
    try:
        code = main(["db", "grant", *args])
    except SystemExit as exc:  # argparse's own refusal, moved to 64
        code = int(exc.code or 0)
    assert code == exits.USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_a_grant_on_sqlite_is_refused_naming_database_url(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("Database__Url", sqlite_url)
    assert main(["db", "grant", "--principal", "app"]) == exits.CONFIG
    assert "Database__Url: sqlite has no database users" in capsys.readouterr().err
