"""A JWKS document on a real local HTTP server (the production fetch path), which counts the
fetches it answers and whose keys and status the test changes while it runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


def public_jwk(key: PublicKey, kid: str) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPublicKey):
        jwk, alg = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key)), "RS256"
    else:
        jwk, alg = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key)), "ES256"
    return {**jwk, "kid": kid, "use": "sig", "alg": alg}


class JwksServer:
    def __init__(self) -> None:
        self.keys: dict[str, PublicKey] = {}
        self.status = 200
        # When set, served as it is instead of `keys` (a document the test writes by hand).
        self.document: object | None = None
        self._hits = 0
        self._lock = threading.Lock()
        self.url = ""

    @property
    def hits(self) -> int:
        with self._lock:
            return self._hits

    def _answer(self) -> tuple[int, bytes]:
        with self._lock:
            self._hits += 1
            keys = [public_jwk(key, kid) for kid, key in self.keys.items()]
            document = {"keys": keys} if self.document is None else self.document
            return self.status, json.dumps(document).encode()


@contextmanager
def jwks_server(keys: dict[str, PublicKey]) -> Iterator[JwksServer]:
    """Serves `keys` (by kid) until the block ends; `state.keys` and `state.status` may change."""
    state = JwksServer()
    state.keys.update(keys)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = state._answer()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # keep the test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
