"""A cold instance's one-time build with the cyclic garbage collector paused, then frozen.

Building the app imports a few hundred modules and defines thousands of classes and functions,
all of them alive for the process. The generational collector runs every 700 allocations and,
every so often, walks every object the process holds (the worker's, the frameworks', the app's):
on a cold start that was 60-100 ms of CPU spent finding nothing to free (bench/cold_start.py).
Paused for the build and frozen after it (`gc.freeze`: the objects move to a generation the
collector never walks), the build allocates without the walks and later collections walk only
what requests allocate. What the build leaves unreachable stays allocated: a few hundred objects
(measured), once per process."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def long_lived_build() -> Iterator[None]:
    """Run a one-time build without collections; freeze what exists after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
