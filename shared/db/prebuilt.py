"""Statements built once and run many times, where building one costs more client CPU than running
it costs the server (docs/database.md#statements-built-once lists them); all others are not."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

P = ParamSpec("P")
T = TypeVar("T")


def prebuilt(build: Callable[P, T]) -> Callable[P, T]:
    """`build`, run once per distinct (hashable) arguments; the 64 most recently used are kept."""
    return cast(Callable[P, T], functools.lru_cache(maxsize=64)(build))
