"""PostgreSQL's bounds on every wait, as libpq and the server take them, set once per connection
when it opens (docs/database.md#connections-and-their-bounds and docs/settings.md list them). The
client's own bound makes a server that stops answering at all a dropped connection, not a hung
request.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors

# The server's own cancel arrives first: the client's bound is the statement timeout plus this.
CLIENT_GRACE_SECONDS = 1.0
# Keepalive probes before a silent peer is declared gone.
KEEPALIVE_PROBES = 3


def keepalive_interval(keepalive_seconds: int) -> int:
    return max(1, keepalive_seconds // KEEPALIVE_PROBES)


def user_timeout_ms(keepalive_seconds: int) -> int:
    """How long sent data may stay unacknowledged (and, with keepalives on, how long the probes
    run) before the kernel drops the connection: the idle time plus the probes."""
    return 1000 * (keepalive_seconds + KEEPALIVE_PROBES * keepalive_interval(keepalive_seconds))


def server_options(*, statement_timeout: int, lock_timeout: int, keepalive: int) -> str:
    """libpq's `options`: the server's settings for this session, each `-c name=value`."""
    settings = {
        "statement_timeout": f"{statement_timeout * 1000}",
        "lock_timeout": f"{lock_timeout * 1000}",
        # No unit of work pauses between statements for as long as one statement may run.
        "idle_in_transaction_session_timeout": f"{statement_timeout * 1000}",
        "tcp_keepalives_idle": f"{keepalive}",
        "tcp_keepalives_interval": f"{keepalive_interval(keepalive)}",
        "tcp_keepalives_count": f"{KEEPALIVE_PROBES}",
        "tcp_user_timeout": f"{user_timeout_ms(keepalive)}",
    }
    return " ".join(f"-c {name}={value}" for name, value in settings.items())


def connect_arguments(
    *,
    connect_timeout: int,
    statement_timeout: int,
    lock_timeout: int,
    keepalive: int,
    url_options: str | None,
) -> dict[str, Any]:
    """The libpq parameters of every connection. `options` the URL already carries come after
    ours, so an operator's URL can still override one setting."""
    options = server_options(
        statement_timeout=statement_timeout, lock_timeout=lock_timeout, keepalive=keepalive
    )
    return {
        "connect_timeout": connect_timeout,
        "keepalives": 1,
        "keepalives_idle": keepalive,
        "keepalives_interval": keepalive_interval(keepalive),
        "keepalives_count": KEEPALIVE_PROBES,
        "tcp_user_timeout": user_timeout_ms(keepalive),
        "options": f"{options} {url_options}" if url_options else options,
    }


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection that waits at most `answer_within` seconds for any answer (a
    statement, a commit, a rollback, the pool's ping), then closes itself and raises
    OperationalError: SQLAlchemy sees a closed connection, invalidates it, and the request is
    503 DATABASE_UNAVAILABLE (shared.db.faults)."""

    answer_within: float = 16.0

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        try:
            return super().wait(gen, interval=interval, timeout=timeout or self.answer_within)
        except errors._WaitTimeout:
            # Mid-protocol the connection is unusable: close it so nothing reuses it.
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the server did not answer within {timeout or self.answer_within:g}s; "
                "the connection was closed"
            ) from None


def bounded_connect(answer_within: float) -> Any:
    """A SQLAlchemy `do_connect` hook that opens a BoundedConnection."""

    def connect(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.answer_within = answer_within
        return connection

    return connect
