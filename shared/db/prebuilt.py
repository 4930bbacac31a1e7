"""Statements built once and run many times: the one place that says which, and why.

Building a SQLAlchemy statement (and its compiled-cache key) costs client CPU each time; on these
paths it costs more than running the statement costs the server, so they are built once, every
value that varies a named bind parameter bound at execution:

- the transfer's reads (the pre-check's one read with the day's sum, the locked re-read of the
  sum, the two parties): built once they took client CPU from about 12 to 9 ms a transfer
  (bench/README.md, "before the pre-check was one read", runs D to F);
- the transfer's writes, sent under the audit chain's tail lock: their build takes about 1 ms of
  CPU (PostgreSQL's, measured in-process), against the tail's 4.5 ms hold with one client
  (bench/README.md, Transfers), and every transfer of the bank waits out that hold;
- the relay's statements, once per runner (`shared.notices.claim.NoticeClaim`; the other runners'
  leases in `shared.notices.status`): the claim's build cost about 3.5 ms a sweep and the mark's
  0.7 ms a row (bench/README.md, "the sweep's per-sweep cost").

Every other statement is built where it runs: nothing shows its build matters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

P = ParamSpec("P")
T = TypeVar("T")


def prebuilt(build: Callable[P, T]) -> Callable[P, T]:
    """`build` called once per distinct (hashable) arguments, its statement kept and reused; at
    most 64 argument sets are kept, the least recently used dropped."""
    return cast(Callable[P, T], functools.lru_cache(maxsize=64)(build))
