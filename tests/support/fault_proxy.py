"""A TCP fault injector of the suite's own, between the app and its database server.

`FaultProxy` listens on a local port and relays every connection to the upstream server (by
default PostgreSQL on 127.0.0.1:5432); `proxy.url(database_url)` is the same SQLAlchemy URL
through it. The mode is switched at runtime (`proxy.set_mode(...)`, from any thread), and
applies to the connections open at the switch and to every new one:

    PASS               relay both ways (the default)
    SLOW               relay both ways, each chunk `delay` seconds late
    BLACK_HOLE         accept and keep every connection, relay nothing either way (the kernel
                       still ACKs, so the peers see a server that stopped answering, not a close)
    RESET              RST every open connection now, and every new one as soon as it is accepted
    REFUSE             stop listening: a new connection is refused (ECONNREFUSED); the open
                       ones are relayed as before
    HALF_OPEN          cut the app's side of every open connection now (RST), and keep the
                       server's side open with nothing sent on it: the server's session lives on,
                       holding whatever it holds, until the server ends it itself (a timeout, a
                       keepalive); a new connection is cut the same way once accepted
    COMMIT_REPLY_LOST  relay both ways; when the app sends a message holding a COMMIT, send it to
                       the server, wait for the server's reply, drop it, and cut both sides: the
                       transaction committed and the app never heard. `once=True` returns the
                       proxy to PASS after the first cut; `after=b"..."` cuts only the COMMIT of a
                       transaction that sent those bytes (`b'INSERT INTO "SubscriberNotices"'`), so
                       the request's earlier commits pass.
    HALF_OPEN_AT_COMMIT  relay both ways; when the app sends a message holding a COMMIT, withhold
                       it, cut the app's side (RST) and keep the server's side open: the
                       transaction stays open on the server, holding every lock it took, with
                       its app gone (the app's side of a half-open connection died mid-work).
                       `once=True` and `after` as above.

In-process: `with FaultProxy() as proxy:` (threads; stopped on exit). From a subprocess test,
`python -m tests.support.fault_proxy --upstream 127.0.0.1:5432` prints `listening PORT`, then
reads one command a line from stdin: a mode's name, optionally followed by the delay in seconds
(`slow 0.5`) or by `once` (`commit_reply_lost once`); it answers `ok MODE` per command.
"""

from __future__ import annotations

import argparse
import enum
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress

from sqlalchemy.engine import make_url

# How often an idle relay looks at the mode again: the latency of a switch to a cut.
_TICK = 0.02
# How long COMMIT_REPLY_LOST waits for the server's reply it drops.
_REPLY_WAIT = 10.0
# A COMMIT statement as PostgreSQL's wire protocol carries it: the query text ends with NUL.
COMMIT_MARKERS = (b"COMMIT\x00", b"commit\x00", b"COMMIT;", b"commit;")


class Mode(enum.Enum):
    PASS = "pass"
    SLOW = "slow"
    BLACK_HOLE = "black_hole"
    RESET = "reset"
    REFUSE = "refuse"
    HALF_OPEN = "half_open"
    COMMIT_REPLY_LOST = "commit_reply_lost"
    HALF_OPEN_AT_COMMIT = "half_open_at_commit"


def _rst(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN (linger on, zero seconds)."""
    with suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with suppress(OSError):
        sock.close()


class _Pair:
    """One relayed connection: the app's socket, the server's socket, and the thread between."""

    def __init__(self, proxy: FaultProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client: socket.socket | None = client
        self.upstream: socket.socket | None = None
        self.cut: Mode | None = None  # a cut the relay thread applies at its next tick
        # The app sent the proxy's `after` bytes since its last COMMIT: that COMMIT may be cut.
        self.armed = False
        self.applied = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="fault-proxy-pair")

    # --- cuts, applied by the pair's own thread (a socket is closed by the thread using it) ---

    def request_cut(self, mode: Mode) -> None:
        self.applied.clear()
        self.cut = mode

    def _apply_cut(self) -> None:
        mode, self.cut = self.cut, None
        if mode is Mode.RESET:
            self._close_all(rst=True)
        elif mode is Mode.HALF_OPEN and self.client is not None:
            _rst(self.client)
            self.client = None
            self.proxy._count("half_open")
        self.applied.set()

    def _close_all(self, *, rst: bool) -> None:
        for sock in (self.client, self.upstream):
            if sock is not None:
                if rst:
                    _rst(sock)
                else:
                    with suppress(OSError):
                        sock.close()
        self.client = self.upstream = None

    # --- the relay ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._relay()
        except OSError:
            pass
        finally:
            self._close_all(rst=False)
            self.applied.set()
            self.done.set()
            self.proxy._forget(self)

    def _relay(self) -> None:
        assert self.client is not None
        self.upstream = socket.create_connection(self.proxy.upstream, timeout=10)
        self.upstream.settimeout(None)
        while not self.proxy.closed:
            if self.cut is not None:
                self._apply_cut()
            if self.upstream is None:
                return
            mode = self.proxy.mode
            if self.client is None:
                # Half-open: the server's side stays open; read and drop until the server ends it.
                if not self._drain_upstream():
                    return
                continue
            if mode is Mode.BLACK_HOLE:
                time.sleep(_TICK)
                continue
            socks = [self.client, self.upstream]
            readable, _, _ = select.select(socks, [], [], _TICK)
            for sock in readable:
                if not self._forward(sock):
                    return
                if self.client is None or self.upstream is None:
                    break

    def _drain_upstream(self) -> bool:
        assert self.upstream is not None
        readable, _, _ = select.select([self.upstream], [], [], _TICK)
        if readable and not self.upstream.recv(65536):
            self.proxy._count("server_closed_half_open")
            return False
        return True

    def _forward(self, sock: socket.socket) -> bool:
        assert self.client is not None and self.upstream is not None
        data = sock.recv(65536)
        if not data:
            return False
        mode = self.proxy.mode
        if mode is Mode.BLACK_HOLE:
            # The switch came between select and recv: hold the bytes until the stall ends.
            while self.proxy.mode is Mode.BLACK_HOLE and not self.proxy.closed:
                time.sleep(_TICK)
            mode = self.proxy.mode
        if mode is Mode.SLOW:
            time.sleep(self.proxy.delay)
        from_client = sock is self.client
        other = self.upstream if from_client else self.client
        after = self.proxy.after
        if from_client and after is not None and after in data:
            self.armed = True
        commit = from_client and any(m in data for m in COMMIT_MARKERS)
        aimed = after is None or self.armed
        if commit:
            self.armed = False
        if commit and aimed and mode is Mode.COMMIT_REPLY_LOST:
            self._lose_commit_reply(data)
            return False
        if commit and aimed and mode is Mode.HALF_OPEN_AT_COMMIT:
            # Counted before the cut, so whoever sees the app's error sees the count too.
            self.proxy._count("half_open")
            self.proxy._commit_cut()
            _rst(self.client)
            self.client = None
            return True
        other.sendall(data)
        return True

    def _lose_commit_reply(self, data: bytes) -> None:
        assert self.client is not None and self.upstream is not None
        self.upstream.sendall(data)
        readable, _, _ = select.select([self.upstream], [], [], _REPLY_WAIT)
        if readable:
            self.upstream.recv(65536)  # the server's answer to COMMIT, which the app never hears
        # Counted before the cut, so whoever sees the app's error sees the count too.
        self.proxy._commit_cut()
        _rst(self.client)
        self.client = None
        with suppress(OSError):
            self.upstream.close()
        self.upstream = None


class FaultProxy:
    """A local TCP proxy to `upstream` whose faults are switched at runtime (module docstring)."""

    def __init__(
        self, upstream: tuple[str, int] = ("127.0.0.1", 5432), *, host: str = "127.0.0.1"
    ) -> None:
        self.upstream = upstream
        self.host = host
        self.port = 0
        self.mode = Mode.PASS
        self.delay = 0.0
        self.once = False
        self.after: bytes | None = None
        self.closed = False
        self.counts: dict[str, int] = {}
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    @classmethod
    def in_front_of(cls, database_url: str) -> FaultProxy:
        """A proxy to the server `database_url` names (not started: `with` starts it)."""
        upstream = make_url(database_url)
        return cls((upstream.host or "127.0.0.1", upstream.port or 5432))

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._listen()
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="fault-proxy")
        self._acceptor.start()
        return self

    def close(self) -> None:
        self.closed = True
        with self._lock:
            listener, self._listener = self._listener, None
            pairs = list(self._pairs)
        if listener is not None:
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for pair in pairs:
            pair.done.wait(2)
        if self._acceptor is not None:
            self._acceptor.join(2)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def url(self, database_url: str) -> str:
        """`database_url` with its host and port replaced by this proxy's."""
        parsed = make_url(database_url).set(host=self.host, port=self.port)
        return parsed.render_as_string(hide_password=False)

    # --- switching ---------------------------------------------------------------------------

    def set_mode(
        self, mode: Mode, *, delay: float = 0.0, once: bool = False, after: bytes | None = None
    ) -> None:
        """Switch every open and new connection to `mode`; a cut (RESET, HALF_OPEN) of the open
        connections has happened when this returns. `after`: the bytes a transaction sends
        before the COMMIT a cut at COMMIT aims at (the module docstring)."""
        with self._lock:
            self.delay = delay
            self.once = once
            self.after = after
            self.mode = mode
            pairs = list(self._pairs)
        if mode in (Mode.RESET, Mode.HALF_OPEN):
            for pair in pairs:
                pair.request_cut(mode)
            for pair in pairs:
                pair.applied.wait(2)
        if mode is Mode.REFUSE:
            self._unlisten()
        elif self._listener is None and not self.closed:
            self._listen()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def count(self, event: str) -> int:
        """How many times `event` happened: `accepted`, `half_open`, `commit_cut`,
        `server_closed_half_open` (the server ended a session whose app side was cut); a cut
        at a COMMIT counts as `commit_cut` too."""
        with self._lock:
            return self.counts.get(event, 0)

    def wait_count(self, event: str, at_least: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.count(event) < at_least:
            if time.monotonic() > deadline:
                return False
            time.sleep(_TICK)
        return True

    # --- internals ---------------------------------------------------------------------------

    def _count(self, event: str) -> None:
        with self._lock:
            self.counts[event] = self.counts.get(event, 0) + 1

    def _commit_cut(self) -> None:
        self._count("commit_cut")
        if self.once:
            with self._lock:
                self.mode = Mode.PASS
                self.once = False

    def _forget(self, pair: _Pair) -> None:
        with self._lock:
            self._pairs.discard(pair)

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener

    def _unlisten(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            # A socket closed while the acceptor's select holds it keeps listening until that
            # select returns; shut down first, so a connect from now on is refused.
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
            time.sleep(2 * _TICK)

    def _accept(self) -> None:
        while not self.closed:
            with self._lock:
                listener = self._listener
            if listener is None:
                time.sleep(_TICK)
                continue
            try:
                readable, _, _ = select.select([listener], [], [], _TICK)
                if not readable:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):
                continue  # the listener closed under us (REFUSE, close)
            self._count("accepted")
            mode = self.mode
            if mode is Mode.RESET:
                _rst(client)
                continue
            pair = _Pair(self, client)
            if mode is Mode.HALF_OPEN:
                pair.request_cut(Mode.HALF_OPEN)
            with self._lock:
                self._pairs.add(pair)
            pair.thread.start()


def _commands(proxy: FaultProxy, lines: Iterator[str]) -> None:
    for line in lines:
        words = line.split()
        if not words:
            continue
        mode = Mode(words[0].lower())
        rest = words[1:]
        once = "once" in rest
        delays = [float(w) for w in rest if w != "once"]
        proxy.set_mode(mode, delay=delays[0] if delays else 0.0, once=once)
        print(f"ok {mode.value}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fault_proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default="127.0.0.1:5432", help="HOST:PORT to relay to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free)")
    args = parser.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    proxy = FaultProxy((host, int(port)))
    proxy.port = args.port
    with proxy:
        print(f"listening {proxy.port}", flush=True)
        _commands(proxy, iter(sys.stdin))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
