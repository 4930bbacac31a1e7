"""PostgreSQL's bounds on every wait (docs/database.md#connections-and-their-bounds), set once per
connection as it opens; its own module, so a host on another dialect never imports psycopg."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors
from sqlalchemy.engine import URL

if TYPE_CHECKING:
    from shared.db.engine import EngineOptions

# The server's own cancel arrives first: the client's bound is the statement timeout plus this.
CLIENT_GRACE_SECONDS = 1.0
# Keepalive probes before a silent peer is declared gone.
KEEPALIVE_PROBES = 3


def connect_arguments(url: URL, options: EngineOptions) -> dict[str, Any]:
    """The libpq parameters of every connection. `options` the URL already carries come after
    ours, so an operator's URL can still override one setting."""
    keepalive, statement_ms = options.keepalive, options.statement_timeout * 1000
    interval = max(1, keepalive // KEEPALIVE_PROBES)
    # How long sent data may stay unacknowledged (with keepalives on, how long the probes run)
    # before the kernel drops the connection: the idle time plus the probes.
    user_timeout_ms = 1000 * (keepalive + KEEPALIVE_PROBES * interval)
    # The same keepalives on the client's end and the server's, in libpq's names and the server's.
    keepalives = {"idle": keepalive, "interval": interval, "count": KEEPALIVE_PROBES}
    server = {
        "statement_timeout": statement_ms,
        "lock_timeout": options.lock_timeout * 1000,
        # No unit of work pauses between statements for as long as one statement may run.
        "idle_in_transaction_session_timeout": statement_ms,
        **{f"tcp_keepalives_{name}": value for name, value in keepalives.items()},
        "tcp_user_timeout": user_timeout_ms,
    }
    ours = " ".join(f"-c {name}={value}" for name, value in server.items())
    theirs = url.query.get("options")
    return {
        "connect_timeout": options.connect_timeout,
        "keepalives": 1,
        **{f"keepalives_{name}": value for name, value in keepalives.items()},
        "tcp_user_timeout": user_timeout_ms,
        "options": f"{ours} {theirs}" if isinstance(theirs, str) and theirs else ours,
    }


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection that waits at most `answer_within` seconds for any answer (a statement,
    a commit, the pool's ping), then closes itself: OperationalError, 503 DATABASE_UNAVAILABLE."""

    answer_within: float = 16.0

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        bound = timeout or self.answer_within
        try:
            return super().wait(gen, interval=interval, timeout=bound)
        except errors._WaitTimeout:
            # Mid-protocol the connection is unusable: close it so nothing reuses it.
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the server did not answer within {bound:g}s; the connection was closed"
            ) from None


def bounded_connect(options: EngineOptions) -> Any:
    """A SQLAlchemy `do_connect` hook that opens a BoundedConnection."""

    def connect(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.answer_within = options.statement_timeout + CLIENT_GRACE_SECONDS
        return connection

    return connect
