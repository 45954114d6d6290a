"""SIGTERM handled like Ctrl-C, and cleanup that a second signal cannot cut short.

SIGTERM is what CI cancellation, `timeout` and deleting a Kubernetes Job send. Without a handler Python
dies on the spot: no `finally` runs, the probe's GPU-requesting pods stay and no report is written.
Raising `Terminated` (a KeyboardInterrupt) lets pytest end the run exactly as it does for Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread; pytest treats it as an interruption (exit code 2)."""


_previous: Any = None
_installed = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated("SIGTERM")


def install_sigterm() -> None:
    """Make SIGTERM raise Terminated (main thread only; idempotent; re-asserts itself over later handlers)."""
    global _previous, _installed
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm:
        return
    if not _installed:
        _previous = current
        _installed = True
    signal.signal(signal.SIGTERM, _on_sigterm)


def restore_sigterm() -> None:
    global _installed
    if _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)
        _installed = False


def interruption(exc: BaseException) -> str:
    """How a KeyboardInterrupt came about, in the words the report uses."""
    return "interrupted by SIGTERM" if isinstance(exc, Terminated) else "interrupted (Ctrl-C)"


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Run a cleanup to its end: SIGINT/SIGTERM arriving meanwhile are recorded, not raised."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in saved:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
