"""The suite's leak watch: no password, PIN, token, key or address in any log line or error body.

`LeakWatch` holds the secrets a test used and everything it saw: every log record captured at
DEBUG on the root logger and on uvicorn's own loggers (which do not propagate to the root once
uvicorn configures them: its access line and its error log), every response (status line,
headers, body), and any other text handed to it, such as a real server process's whole output.
`assert_clean` fails naming the kind of secret and where it was, never its value.

`assert_no_secret_shapes` needs no list of secrets: it finds what has a recognisable shape (a
JWT, an address of the suite's test domain, one of the suite's fixed keys). `served()` runs it
over every real server's output, and `secret_shapes_in_logs` (tests/conftest.py) over every
test's captured log records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from tests.support.hosts import CHAIN_KEY, SIGNING_KEY

# uvicorn's dictConfig sets propagate=False on "uvicorn" and "uvicorn.access": a watch on the
# root logger alone never sees the access line or "Exception in ASGI application".
SERVER_LOGGERS = ("uvicorn.access", "uvicorn.error")

# Azurite's published development key (tests/conftest.py): not a secret, but a key all the same,
# and no log line has any reason to carry it.
_AZURITE_KEY_HEAD = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"
SECRET_SHAPES: dict[str, re.Pattern[str]] = {
    "token": re.compile(r"eyJ[\w-]{4,}\.eyJ[\w-]{4,}\.[\w-]*"),
    "address": re.compile(r"[\w.+-]+@example\.test\b"),
    "signing key": re.compile(re.escape(SIGNING_KEY)),
    "chain key": re.compile(re.escape(CHAIN_KEY)),
    "storage key": re.compile(re.escape(_AZURITE_KEY_HEAD)),
}


def secret_shapes_in(text: str) -> list[str]:
    """The kinds of secret whose shape `text` holds (never the values)."""
    return [kind for kind, shape in SECRET_SHAPES.items() if shape.search(text)]


def assert_no_secret_shapes(where: str, text: str) -> None:
    found = secret_shapes_in(text)
    assert found == [], f"{', '.join(found)} in {where}"


def record_text(record: logging.LogRecord) -> str:
    """Everything a handler could write of a record: message, arguments, exception text."""
    parts = [record.getMessage(), repr(record.args), record.exc_text or ""]
    if record.exc_info and record.exc_info[1] is not None:
        parts.append(repr(record.exc_info[1]))
    return " ".join(parts)


class RecordCollector(logging.Handler):
    """Keeps every record it is handed (caplog's handler is replaced at each test phase, so
    one attached to other loggers at setup would miss the call's records)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class LeakWatch:
    caplog: pytest.LogCaptureFixture
    server_records: RecordCollector = field(default_factory=RecordCollector)
    secrets: dict[str, str] = field(default_factory=dict)  # value -> kind
    responses: list[httpx.Response] = field(default_factory=list)
    other_texts: list[tuple[str, str]] = field(default_factory=list)  # (where, text)

    def secret(self, kind: str, value: str) -> str:
        self.secrets[value] = kind
        return value

    def start(self) -> None:
        """Forget what setup logged (it writes users, emails included, through the engine's
        DEBUG log); from here on every record counts."""
        self.caplog.clear()
        self.server_records.records.clear()

    def saw(self, response: httpx.Response) -> httpx.Response:
        self.responses.append(response)
        return response

    def saw_text(self, where: str, text: str) -> str:
        """Any other text the secrets must not reach: a server's output, a Function's body."""
        self.other_texts.append((where, text))
        return text

    def records(self) -> Iterator[logging.LogRecord]:
        # A record of a uvicorn logger that still propagates (uvicorn never configured logging
        # in this process) reaches both caplog and the collector: count each once.
        seen: set[int] = set()
        for record in [*self.caplog.records, *self.server_records.records]:
            if id(record) not in seen:
                seen.add(id(record))
                yield record

    def texts(self) -> list[tuple[str, str]]:
        out = [
            (f"log record {record.name}:{record.levelname}", record_text(record))
            for record in self.records()
        ]
        for response in self.responses:
            headers = " ".join(f"{k}: {v}" for k, v in response.headers.items())
            out.append((f"response {response.status_code}", headers + " " + response.text))
        out.extend(self.other_texts)
        return out

    def assert_clean(self) -> None:
        assert self.secrets, "a leak watch with no secrets proves nothing"
        leaks = [
            f"{self.secrets[value]} in {where}"
            for where, text in self.texts()
            for value in self.secrets
            if value in text
        ]
        assert leaks == [], leaks


@contextmanager
def watching_server_loggers(names: Iterable[str] = SERVER_LOGGERS) -> Iterator[RecordCollector]:
    """Every record of uvicorn's loggers, for as long as the context is open."""
    collector = RecordCollector()
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addHandler(collector)
    try:
        yield collector
    finally:
        for logger in loggers:
            logger.removeHandler(collector)


@pytest.fixture
def leak_watch(caplog: pytest.LogCaptureFixture) -> Iterator[LeakWatch]:
    """Every log record at DEBUG on the root logger and on uvicorn's loggers, and every
    response or text the test hands to `saw`/`saw_text`, checked by `assert_clean` for the
    secrets the test names."""
    caplog.set_level(logging.DEBUG)
    for name in SERVER_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    with watching_server_loggers() as server_records:
        yield LeakWatch(caplog, server_records)
