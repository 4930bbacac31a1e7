"""Issue 5, acceptance 5: no password, PIN, token or address in any log record or error body.

`LeakWatch` holds the secrets a test used and every response it saw; `assert_clean` reads every
log record captured at DEBUG on the root logger (message, arguments, exception text) and every
response (status line, headers, body) and fails naming the kind of secret, never its value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import pytest


@dataclass
class LeakWatch:
    caplog: pytest.LogCaptureFixture
    secrets: dict[str, str] = field(default_factory=dict)  # value -> kind
    responses: list[httpx.Response] = field(default_factory=list)

    def secret(self, kind: str, value: str) -> str:
        self.secrets[value] = kind
        return value

    def start(self) -> None:
        """Forget what setup logged (it writes users, emails included, through the engine's
        DEBUG log); from here on every record counts."""
        self.caplog.clear()

    def saw(self, response: httpx.Response) -> httpx.Response:
        self.responses.append(response)
        return response

    def texts(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for record in self.caplog.records:
            parts = [record.getMessage(), repr(record.args), record.exc_text or ""]
            if record.exc_info and record.exc_info[1] is not None:
                parts.append(repr(record.exc_info[1]))
            out.append((f"log record {record.name}:{record.levelname}", " ".join(parts)))
        for response in self.responses:
            headers = " ".join(f"{k}: {v}" for k, v in response.headers.items())
            out.append((f"response {response.status_code}", headers + " " + response.text))
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
