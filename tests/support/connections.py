"""What a test sees of connections: a local port nothing listens on, and every database
connection an engine tries to open."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


def unused_port() -> int:
    """A local TCP port nothing listens on: bound, read, released (nothing else on 127.0.0.1
    takes it in the moment between). A server starts on it, or a client finds it refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def connection_attempts() -> Iterator[list[str]]:
    """Every database connection any engine tries to open inside the block, by dialect (psycopg
    connects through libpq, so a socket watch would not see it; SQLAlchemy's hook does)."""
    attempts: list[str] = []

    def record(dialect: Any, _record: Any, _cargs: Any, _cparams: Any) -> None:
        attempts.append(str(dialect.name))

    event.listen(Engine, "do_connect", record)
    try:
        yield attempts
    finally:
        event.remove(Engine, "do_connect", record)
