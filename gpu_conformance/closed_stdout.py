"""A terminal that goes away mid-run (`pytest --cluster | head`, a closed ssh session) must not end the run.

Without this, the first progress dot written after `head` exited raised BrokenPipeError inside a pytest hook:
INTERNALERROR, no conformance report, exit 1 ("not conformant") and an empty green junit.xml. The guard wraps
the terminal reporter's stream: the first failed write marks the stream gone, later writes are dropped, and fd 1
is pointed at /dev/null so the interpreter's own flush at exit does not fail either. The run goes on, cleans
up its probe and writes its reports; the plugin then exits 8 (output failure) with one line on stderr.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, TextIO


class GuardedStream:
    """A text stream whose writes never raise once the reader is gone; `gone` says whether it went."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except (BrokenPipeError, ValueError, OSError):
                self._went_away()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._went_away()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _went_away(self) -> None:
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)


def guard_terminal(terminalreporter: Any) -> GuardedStream | None:
    """Wrap the terminal reporter's stream (pytest's TerminalWriter writes only through `_file.write/flush`)."""
    writer = getattr(terminalreporter, "_tw", None)
    stream = getattr(writer, "_file", None)
    if stream is None:
        return None
    if isinstance(stream, GuardedStream):
        return stream
    guarded = GuardedStream(stream)
    writer._file = guarded
    return guarded
