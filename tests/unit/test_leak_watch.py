"""The leak watch of issue 5's acceptance 5 can fail: a secret in a log record or in a body is
found and named by its kind."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.leak_watch import LeakWatch


def test_a_secret_in_a_log_record_is_found(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    watch = LeakWatch(caplog)
    watch.secret("PIN", "739154")
    logging.getLogger("anything").debug("verifying %s", "739154")
    with pytest.raises(AssertionError, match="PIN in log record anything:DEBUG"):
        watch.assert_clean()


def test_a_secret_in_a_response_body_or_header_is_found(caplog: pytest.LogCaptureFixture) -> None:
    watch = LeakWatch(caplog)
    watch.secret("address", "someone@example.test")
    watch.saw(httpx.Response(400, headers={"X-Who": "someone@example.test"}, text="{}"))
    with pytest.raises(AssertionError, match="address in response 400"):
        watch.assert_clean()


def test_a_clean_run_passes(caplog: pytest.LogCaptureFixture) -> None:
    watch = LeakWatch(caplog)
    watch.secret("password", "hunter2-but-longer")
    watch.saw(httpx.Response(401, text='{"errorCode":"INVALID_PASSWORD"}'))
    watch.assert_clean()
