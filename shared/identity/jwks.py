"""The identity provider's signing keys (`Auth__JwksUrl`), fetched on the injected clock at most
once per `REFETCH_SECONDS` whatever asks, since a token's `kid` is the caller's to choose
(docs/security.md#jwks-refresh-bound)."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

import jwt

from shared.clock import Clock

log = logging.getLogger("azurebank.auth")


class JwksKeys:
    """The signing keys of one JWKS document, by `kid`; a failed fetch keeps the keys held."""

    MAX_AGE_SECONDS = 300
    REFETCH_SECONDS = 60
    TIMEOUT_SECONDS = 10

    def __init__(self, url: str, clock: Clock) -> None:
        self._clock = clock
        # The set is cached here, on the injected clock, not in PyJWKClient (time.monotonic).
        self._client = jwt.PyJWKClient(
            url, cache_jwk_set=False, cache_keys=False, timeout=self.TIMEOUT_SECONDS
        )
        self._lock = threading.Lock()
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: datetime | None = None
        self._tried_at: datetime | None = None

    def key(self, kid: str) -> jwt.PyJWK | None:
        with self._lock:
            now = self._clock.now()
            fresh = _within(self._fetched_at, now, self.MAX_AGE_SECONDS) and kid in self._keys
            if not fresh and not _within(self._tried_at, now, self.REFETCH_SECONDS):
                self._fetch(now)
            return self._keys.get(kid)

    def _fetch(self, now: datetime) -> None:
        self._tried_at = now
        try:
            keys = _signing_keys(self._client.fetch_data())
        except (jwt.PyJWTError, ValueError, OSError) as exc:
            # The type only: the message may carry the URL or the endpoint's answer.
            log.warning(
                "JWKS fetch failed (%s); keeping %d known keys; next try in %d s at the earliest",
                type(exc).__name__,
                len(self._keys),
                self.REFETCH_SECONDS,
            )
            return
        self._keys = keys
        self._fetched_at = now


def _signing_keys(document: object) -> dict[str, jwt.PyJWK]:
    """The usable signing keys of a JWKS document, by kid. A document with an empty `keys` is
    an answer (every key withdrawn), not a failure; one that is not a JWKS document is."""
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError("not a JWKS document")
    keys: dict[str, jwt.PyJWK] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        kid = entry.get("kid")
        try:
            key = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue  # a key type or curve this host does not verify with
        if isinstance(kid, str) and kid:
            keys[kid] = key
    return keys


def _within(since: datetime | None, now: datetime, seconds: int) -> bool:
    """True when `since` is at most `seconds` before `now` (a clock set back counts as not)."""
    return since is not None and 0 <= (now - since).total_seconds() < seconds
