"""The one-time builds' collector pause (api_funcs/long_lived.py): overlapping builds keep the
collector paused until the last one ends, and it is set back as it was found."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from api_funcs.long_lived import long_lived_build


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """The collector on, as a process starts; after the test, on and nothing left frozen, so the
    rest of the suite's process collects as before."""
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()


def test_a_build_still_running_keeps_the_collector_paused_when_an_overlapping_one_ends() -> None:
    first, second = long_lived_build(), long_lived_build()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.isenabled() is False
    second.__exit__(None, None, None)
    assert gc.isenabled() is True


def test_a_build_leaves_a_paused_collector_paused() -> None:
    gc.disable()
    with long_lived_build():
        pass
    assert gc.isenabled() is False


def test_a_build_that_raises_sets_the_collector_back_and_freezes_what_it_built() -> None:
    frozen = gc.get_freeze_count()
    with pytest.raises(RuntimeError), long_lived_build():
        kept = [object() for _ in range(10)]
        raise RuntimeError(len(kept))
    assert gc.isenabled() is True
    assert gc.get_freeze_count() > frozen
