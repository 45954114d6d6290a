"""The run's long-lived objects and CPython's cyclic garbage collector.

A run holds a few million small objects for its whole length: the decoded LISTs of the snapshot, the findings,
the report dicts. None of them is ever garbage before the run ends, yet the collector's full passes walk every one
of them again: a full pass follows each 25 % growth of the tracked objects (about ten while the snapshot is
decoded), and pytest's unraisableexception plugin forces two more at exit. Measured on a whole read-only run of
1,000 GPU nodes (factory data): full passes took about half the run's CPU (4.3 s of CPU before, 2.0 s after).

So the read runs with the automatic passes off (decoded JSON holds no reference cycles: its objects are freed by
their reference counts), and what a phase leaves behind is moved out of the collector's sight (gc.freeze) once it
is built. `release()` gives everything back to the collector when the session ends, so an in-process session
(pytester) leaves no frozen objects behind in its host process.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic full passes while the block allocates; what it built is frozen after it (see module doc)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Frozen before the passes resume: the first allocation after gc.enable() would otherwise start a full
        # pass over everything the block allocated (its counts kept growing while the passes were off).
        settle()
        if was_enabled:
            gc.enable()


def settle() -> None:
    """What exists now lives until the run ends: later passes need not walk it again."""
    gc.freeze()


def release() -> None:
    """Give the frozen objects back to the collector (the run is over; what is garbage by then is collected)."""
    gc.unfreeze()
