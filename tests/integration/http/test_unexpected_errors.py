"""An unexpected exception is answered 500 INTERNAL_ERROR and logged as exactly one Error line:
its type, the traceId of the 500's body, and the frames it passed through (file:line:function);
never its message, arguments or locals, and nothing re-raises it into the server that hosts the
app (uvicorn under `azurebank serve`, the Functions worker through func.AsgiMiddleware), which
would print it whole.

The fault is a route added to the app by the test only: the shipped app has no way to raise."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator

import azure.functions as func
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient

from tests.support.clock import FakeClock
from tests.support.hosts import host_settings, make_app
from tests.support.leak_watch import LeakWatch

ADDRESS = "someone.private@example.test"
FAULT = "/api/test-fault"


def _fail() -> None:
    raise LookupError(f"no ledger for {ADDRESS}")


def _app(sqlite_url: str) -> FastAPI:
    app = make_app(host_settings(sqlite_url), clock=FakeClock())
    app.add_api_route(FAULT, _fail, methods=["GET"])
    return app


@pytest.fixture
def strict_client(sqlite_url: str) -> Iterator[TestClient]:
    # raise_server_exceptions=True: an exception that leaves the app fails the request here, as
    # it would reach the server's error log in a served host.
    with TestClient(_app(sqlite_url), raise_server_exceptions=True) as client:
        yield client


def _assert_one_error_line(leak_watch: LeakWatch, trace_id: str) -> None:
    errors = [r for r in leak_watch.caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    (error,) = errors
    line = error.getMessage()
    assert line.startswith("Unhandled LookupError (trace "), line
    assert trace_id in line
    # The frames, innermost first: the route that raised, by file, line and function.
    assert re.search(r"tests/integration/http/test_unexpected_errors\.py:\d+:_fail", line), line
    assert error.exc_info is None and error.exc_text is None
    assert "no ledger" not in line
    assert ADDRESS not in str(error.args)


def test_an_unexpected_exception_is_a_500_problem_and_one_error_line_without_its_message(
    strict_client: TestClient, leak_watch: LeakWatch
) -> None:
    leak_watch.secret("address", ADDRESS)
    leak_watch.start()
    response = leak_watch.saw(strict_client.get(FAULT))
    assert response.status_code == 500, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["errorCode"] == "INTERNAL_ERROR"
    assert problem["type"].endswith("/internal-error")
    _assert_one_error_line(leak_watch, problem["traceId"])
    leak_watch.assert_clean()


def test_under_the_functions_host_the_exception_is_answered_and_never_reaches_the_worker(
    sqlite_url: str, leak_watch: LeakWatch
) -> None:
    """api_funcs.functions hands each request to the same app through func.AsgiMiddleware; an
    exception that left the app would reach the Python worker, which logs it whole."""
    leak_watch.secret("address", ADDRESS)
    host = func.AsgiMiddleware(_app(sqlite_url))
    leak_watch.start()
    request = func.HttpRequest("GET", f"http://localhost{FAULT}", body=b"")
    response = asyncio.run(host.handle_async(request, None))
    assert response.status_code == 500
    assert response.mimetype == "application/problem+json"
    body = response.get_body().decode()
    leak_watch.saw_text("Functions response 500", body)
    trace_id = re.search(r'"traceId":\s*"(\w+)"', body)
    assert trace_id is not None, body
    _assert_one_error_line(leak_watch, trace_id.group(1))
    leak_watch.assert_clean()


def test_an_exception_after_the_answer_began_is_one_error_line_and_is_not_re_raised(
    sqlite_url: str, leak_watch: LeakWatch
) -> None:
    """Once the status is sent no 500 can follow: the answer stops short (a served host closes
    the connection before the body ends), still with one Error line and nothing re-raised."""

    def chunks() -> Iterator[bytes]:
        yield b"first"
        _fail()

    app = _app(sqlite_url)
    app.add_api_route("/api/test-stream", lambda: StreamingResponse(chunks()), methods=["GET"])
    leak_watch.secret("address", ADDRESS)
    leak_watch.start()
    with TestClient(app, raise_server_exceptions=True) as client:
        response = leak_watch.saw(client.get("/api/test-stream"))
    assert response.content == b"first"
    errors = [r.getMessage() for r in leak_watch.caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert errors[0].startswith("Unhandled LookupError (trace ")
    assert re.search(r"test_unexpected_errors\.py:\d+:_fail < [^ ]+:\d+:\S*chunks", errors[0])
    leak_watch.assert_clean()
