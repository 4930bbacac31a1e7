"""One-time builds, the cyclic collector paused, then frozen (garbage and all): what they build
lives for the process, and walks over it freed nothing (60-100 ms, bench/cold_start.py)."""

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
