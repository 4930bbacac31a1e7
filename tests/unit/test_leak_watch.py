"""The suite's leak watch can fail: a secret in a log record (the root's or uvicorn's own, which
do not propagate), in a body or in a server's output is found and named by its kind."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from tests.support.leak_watch import LeakWatch, assert_no_secret_shapes, secret_shapes_in

# A JWT's shape (header.payload.signature, base64url); not signed by any key of the suite.
PLANTED_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlLW5vdC1jaGVja2Vk"


@pytest.fixture
def uvicorn_configured() -> Iterator[None]:
    """uvicorn's own logging as `uvicorn.run` configures it: "uvicorn" and "uvicorn.access"
    have their handlers and do not propagate to the root logger (where caplog listens)."""
    saved = {}
    for name in ("uvicorn", "uvicorn.access"):
        logger = logging.getLogger(name)
        saved[name] = (logger.propagate, logger.level)
        logger.propagate = False
        logger.setLevel(logging.INFO)
    yield
    for name, (propagate, level) in saved.items():
        logging.getLogger(name).propagate = propagate
        logging.getLogger(name).setLevel(level)


def test_a_secret_in_a_log_record_is_found(leak_watch: LeakWatch) -> None:
    leak_watch.secret("PIN", "739154")
    logging.getLogger("anything").debug("verifying %s", "739154")
    with pytest.raises(AssertionError, match="PIN in log record anything:DEBUG"):
        leak_watch.assert_clean()


@pytest.mark.plants_secrets
@pytest.mark.usefixtures("uvicorn_configured")
def test_a_token_in_uvicorns_access_line_is_found_though_the_logger_does_not_propagate(
    leak_watch: LeakWatch,
) -> None:
    leak_watch.secret("token", PLANTED_TOKEN)
    leak_watch.start()
    # uvicorn's h11/httptools protocols write exactly this record (method, path with query).
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:50000",
        "GET",
        f"/api/accounts?access_token={PLANTED_TOKEN}",
        "1.1",
        401,
    )
    with pytest.raises(AssertionError, match=r"token in log record uvicorn\.access:INFO"):
        leak_watch.assert_clean()


@pytest.mark.plants_secrets
@pytest.mark.usefixtures("uvicorn_configured")
def test_an_address_in_an_exception_uvicorn_logs_is_found(leak_watch: LeakWatch) -> None:
    leak_watch.secret("address", "someone@example.test")
    leak_watch.start()
    try:
        raise LookupError("no ledger for someone@example.test")
    except LookupError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    with pytest.raises(AssertionError, match=r"address in log record uvicorn\.error:ERROR"):
        leak_watch.assert_clean()


def test_a_secret_in_a_response_body_or_header_is_found(leak_watch: LeakWatch) -> None:
    leak_watch.secret("address", "someone@example.test")
    leak_watch.saw(httpx.Response(400, headers={"X-Who": "someone@example.test"}, text="{}"))
    with pytest.raises(AssertionError, match="address in response 400"):
        leak_watch.assert_clean()


def test_a_secret_in_a_servers_output_is_found(leak_watch: LeakWatch) -> None:
    leak_watch.secret("password", "hunter2-but-longer")
    leak_watch.saw_text("serve output", "INFO azurebank.api: hunter2-but-longer\n")
    with pytest.raises(AssertionError, match="password in serve output"):
        leak_watch.assert_clean()


def test_a_clean_run_passes(leak_watch: LeakWatch) -> None:
    leak_watch.secret("password", "hunter2-but-longer")
    leak_watch.saw(httpx.Response(401, text='{"errorCode":"INVALID_PASSWORD"}'))
    leak_watch.assert_clean()


def test_the_shapes_of_a_token_an_address_and_the_suites_keys_are_found_without_a_list() -> None:
    line = f'"GET /api/accounts?access_token={PLANTED_TOKEN} HTTP/1.1" 401 for a@example.test'
    assert secret_shapes_in(line) == ["token", "address"]
    with pytest.raises(AssertionError, match="token, address in access line"):
        assert_no_secret_shapes("access line", line)
    assert_no_secret_shapes("access line", '"GET /api/accounts HTTP/1.1" 401')
