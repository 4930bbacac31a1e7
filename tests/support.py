"""Helpers for tests that go through HTTP: settings for a test host, users, tokens, a client.

Each test makes its own users with unique keys, so tests never depend on order or on each other.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from api_funcs.app import create_app
from api_funcs.context import AppContext
from shared.clock import Clock, FakeClock
from shared.db.engine import get_engine
from shared.db.uow import unit_of_work
from shared.identity.tokens import issue_token
from shared.identity.users import NewUser, add_user
from shared.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[1]
SIGNING_KEY = "test-signing-key-" + "x" * 32
CHAIN_KEY = base64.b64encode(b"k" * 32).decode()
# PBKDF2 at the production 100,000 iterations costs ~0.1 s a hash; tests that make many users
# use one iteration. Verification reads the count from the hash, so both verify the same way.
FAST_HASH = 1
# The Notices__Contact every test host uses (ADR-0048 D6: mandatory content of a notice).
CONTACT = "AzureBank support, +1 555 0100"


def host_environ(db_url: str, **overrides: str) -> dict[str, str]:
    """A complete, valid app-settings environment for a test host."""
    env = {
        "Database__Url": db_url,
        "Auth__SigningKey": SIGNING_KEY,
        "Audit__ChainKey": CHAIN_KEY,
    }
    env.update(overrides)
    return env


def host_settings(db_url: str, **overrides: str) -> Settings:
    return load_settings(host_environ(db_url, **overrides))


def make_user(
    db_url: str,
    clock: Clock | None = None,
    *,
    balance: Decimal | int | str = 0,
    accounts: int = 1,
    password: str = "correct horse battery staple",
    tag: str | None = None,
) -> NewUser:
    """A committed user with `accounts` accounts holding `balance` each, unique tag and email."""
    tag = tag or f"user-{uuid.uuid4().hex[:12]}"
    with unit_of_work(get_engine(db_url)) as session:
        user = add_user(
            session,
            clock or FakeClock(),
            email=f"{tag}@example.test",
            password=password,
            azure_tag=tag,
            balance=Decimal(balance),
            accounts=accounts,
            hash_iterations=FAST_HASH,
        )
        session.commit()
    return user


def bearer(settings: Settings, clock: Clock, user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(settings, clock, user_id)}"}


@contextmanager
def api_client(
    db_url: str, clock: Clock, environ: Mapping[str, str] | None = None
) -> Iterator[TestClient]:
    """The one FastAPI app over `db_url`, on `clock`, without a server process."""
    settings = load_settings(dict(environ) if environ is not None else host_environ(db_url))
    app = create_app(AppContext(settings, clock=clock, database_url=db_url))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def served_routes() -> list[tuple[str, str]]:
    """Every (method, path) the app serves, HEAD aside: each operation and the document."""
    app = create_app(AppContext(load_settings({}), database_url="sqlite://"))
    # FastAPI 0.16x resolves included routers lazily: walk the contexts, not app.routes.
    return sorted(
        (method, context.path)
        for context in iter_route_contexts(app.routes)
        if context.path
        for method in (context.methods or {"GET"}) - {"HEAD"}
    )


def unique_key() -> str:
    return uuid.uuid4().hex + os.urandom(2).hex()


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released): an unreachable database."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_python(
    *args: str,
    settings: Mapping[str, str] | None = None,
    check: bool = False,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a fresh interpreter on this checkout's code, with the test's environment
    (hermetic_settings has already removed the developer's app settings) plus `settings`."""
    env = {**os.environ, **(settings or {}), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )
