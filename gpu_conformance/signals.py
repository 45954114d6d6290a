"""SIGTERM and SIGHUP handled like Ctrl-C, and cleanup that a second signal cannot cut short.

SIGTERM is what CI cancellation, `timeout` and deleting a Kubernetes Job send; SIGHUP what a closed terminal
or a dropped ssh session sends. Without a handler Python dies on the spot: no `finally` runs, the probe's
GPU-requesting pods stay and no report is written. Raising `Terminated` (a KeyboardInterrupt) lets pytest end
the run exactly as it does for Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread; pytest treats it as an interruption (exit code 2)."""


# The signals that end a run like Ctrl-C does (SIGINT itself is Python's KeyboardInterrupt already).
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_previous: dict[int, Any] = {}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signal.Signals(signum).name)


def install_sigterm() -> None:
    """Make SIGTERM and SIGHUP raise Terminated (main thread only; idempotent; re-asserts itself over later
    handlers, e.g. the simulated cluster's)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in ENDING_SIGNALS:
        current = signal.getsignal(s)
        if current is _on_signal:
            continue
        _previous.setdefault(s, current)
        signal.signal(s, _on_signal)


def restore_sigterm() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for s, handler in list(_previous.items()):
        signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        del _previous[s]


def interruption(exc: BaseException) -> str:
    """How a KeyboardInterrupt came about, in the words the report uses."""
    if isinstance(exc, Terminated):
        return f"interrupted by {exc.args[0] if exc.args else 'SIGTERM'}"
    return "interrupted (Ctrl-C)"


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Run a cleanup to its end: SIGINT/SIGTERM/SIGHUP arriving meanwhile are recorded, not raised."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, *ENDING_SIGNALS)}
    for s in saved:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
