"""A cold instance's one-time builds with the cyclic garbage collector paused, then frozen.

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
import threading
from collections.abc import Iterator

# Builds may overlap (two first requests on the worker's threads): the collector is paused by the
# first to start and set back by the last to end, never by one while another still builds.
_lock = threading.Lock()
_building = 0
_was_enabled = False


@contextlib.contextmanager
def long_lived_build() -> Iterator[None]:
    """Run a one-time build without collections; freeze what exists once the last build ends."""
    global _building, _was_enabled
    with _lock:
        if _building == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _building += 1
    try:
        yield
    finally:
        with _lock:
            _building -= 1
            if _building == 0:
                gc.freeze()
                if _was_enabled:
                    gc.enable()
