"""The name a runner stamps into `LeasedBy`, `{kind}/{host}/{pid}/{8 hex}`, which an operator
matches against the announcement line (docs/operations.md#reading-the-start-lines); the random
suffix tells two processes apart when a pid is reused."""

from __future__ import annotations

import os
import re
import secrets
import socket
from typing import Literal

RunnerKind = Literal["api", "function", "verb"]

# LeasedBy is String(200); a host name longer than a DNS label says nothing more to a reader.
_HOST_MAX = 63


def make_runner_name(kind: RunnerKind) -> str:
    """A fresh runner name for this process, e.g. `verb/GURGANT/22280/2be449cb`."""
    if kind not in ("api", "function", "verb"):
        raise ValueError(f"unknown runner kind {kind!r}")
    return f"{kind}/{_host()}/{os.getpid()}/{secrets.token_hex(4)}"


def runner_kind(name: str) -> str:
    """The kind a runner name starts with (`verb/GURGANT/22280/2be449cb` → `verb`)."""
    return name.split("/", 1)[0]


def _host() -> str:
    # The first label only, with '/' and whitespace replaced, so the name splits into four parts.
    label = socket.gethostname().split(".")[0] or "unknown-host"
    return re.sub(r"[/\s]", "-", label)[:_HOST_MAX]
