"""What a real `azurebank serve` writes, read whole (stdout and stderr): an unexpected exception
is one Error line (its type, the traceId of the 500, the frames as file:line:function) and
never its message or a traceback; the access line keeps method, path, status and duration and
never the query string; a trailing slash is 404, never a redirect built from the Host header."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

import httpx
import pytest

from shared.clock import SystemClock
from shared.identity.tokens import issue_token
from shared.settings import load_settings
from tests.support.hosts import SIGNING_KEY, served_routes
from tests.support.leak_watch import LeakWatch
from tests.support.served import ServedProcess, clean_environ, served
from tests.support.users import make_user

pytestmark = pytest.mark.e2e

ADDRESS = "someone.private@example.test"
# `azurebank serve` with one collaborator of a real route made to fail: the accounts listing
# raises an exception whose message holds an address, as a driver's or a bug's text can.
FAULTY_SERVE = f"""
import sys
import api_funcs.routes.accounts as accounts
from azurebank_cli.main import main

def _fail(session, user_id):
    raise LookupError("no ledger for {ADDRESS}")

accounts.list_accounts = _fail
sys.exit(main(sys.argv[1:]))
"""


def _token_for_a_new_user(sqlite_url: str) -> str:
    user = make_user(sqlite_url)
    settings = load_settings({"Auth__SigningKey": SIGNING_KEY})
    return issue_token(settings, SystemClock(), user.user_id)


def _raw(server: ServedProcess, request: str) -> tuple[int, str]:
    """One request over a socket as the client wrote it (no client library normalises the
    target or the Host header, or logs the URL); the status and the whole answer."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(request.encode("latin-1"))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks).decode("latin-1")
    return int(answer.split(" ", 2)[1]), answer


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("ERROR")]


def test_an_unexpected_exception_is_one_error_line_with_type_trace_and_frames_never_its_message(
    sqlite_url: str, tmp_path: Path, leak_watch: LeakWatch
) -> None:
    token = leak_watch.secret("token", _token_for_a_new_user(sqlite_url))
    leak_watch.secret("address", ADDRESS)
    env = clean_environ(sqlite_url, Auth__SigningKey=SIGNING_KEY)
    leak_watch.start()
    with served(
        env, tmp_path / "serve.log", program=(sys.executable, "-c", FAULTY_SERVE)
    ) as server:
        response = leak_watch.saw(
            httpx.get(
                f"{server.base_url}/api/accounts",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
        )
    output = leak_watch.saw_text("serve output", server.output())
    assert response.status_code == 500, response.text
    problem = response.json()
    assert problem["errorCode"] == "INTERNAL_ERROR"
    for leak in ("Traceback", "no ledger", ADDRESS, "Exception in ASGI application"):
        assert leak not in output, f"{leak!r} in:\n{output}"
    errors = _error_lines(output)
    assert len(errors) == 1, output
    (line,) = errors
    assert "LookupError" in line
    assert problem["traceId"] in line
    # The frames, innermost first: the collaborator that raised, then the route that called it.
    assert re.search(r"<string>:\d+:_fail < api_funcs/routes/accounts\.py:\d+:accounts", line)
    assert server.returncode == 0, output
    leak_watch.assert_clean()


def test_the_access_line_keeps_method_path_status_and_duration_never_the_query_string(
    sqlite_url: str, tmp_path: Path, leak_watch: LeakWatch
) -> None:
    token = leak_watch.secret("token", _token_for_a_new_user(sqlite_url))
    env = clean_environ(sqlite_url, Auth__SigningKey=SIGNING_KEY)
    leak_watch.start()
    with served(env, tmp_path / "serve.log") as server:
        status, answer = _raw(
            server,
            f"GET /api/accounts?access_token={token} HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
    leak_watch.saw_text("the answer", answer)
    output = leak_watch.saw_text("serve output", server.output())
    # A token in the query string is no credential here (docs/http.md: the Authorization header).
    assert status == 401, answer
    assert token not in output
    assert "access_token" not in output
    access = [line for line in output.splitlines() if "/api/accounts" in line]
    assert len(access) == 1, output
    assert re.fullmatch(r"INFO azurebank\.access: GET /api/accounts 401 \d+\.\d ms", access[0])
    assert server.returncode == 0, output
    leak_watch.assert_clean()


def test_a_trailing_slash_is_404_on_every_route_never_a_redirect_built_from_the_host_header(
    sqlite_url: str, tmp_path: Path
) -> None:
    env = clean_environ(sqlite_url, Auth__SigningKey=SIGNING_KEY)
    with served(env, tmp_path / "serve.log") as server:
        answers = {
            f"{method} {path}/": _raw(
                server,
                f"{method} {path}/ HTTP/1.1\r\nHost: evil.example\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n",
            )
            for method, path in served_routes()
        }
    assert len(answers) >= 10
    for request, (status, answer) in answers.items():
        assert status == 404, f"{request}: {answer}"
        assert "evil.example" not in answer, f"{request}: {answer}"
        assert "\r\nlocation:" not in answer.lower(), f"{request}: {answer}"
    assert server.returncode == 0, server.output()
