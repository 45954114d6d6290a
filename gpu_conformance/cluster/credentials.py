"""Client certificates, keys and CAs held in memory, never in $TMPDIR.

The kubernetes client writes ``client-key-data`` & co. to temp files (0600, in $TMPDIR) and removes them only at
interpreter exit, so SIGTERM or SIGKILL leave the kubeconfig's private key behind. Python's ssl module needs a
path to load a key, so each credential goes into an anonymous memory file (Linux ``memfd_create``) and the client
gets its ``/proc/self/fd/N`` path: nothing reaches a disk, and the kernel frees it however the process ends.

Where memfd is unavailable (not Linux), the files go into a private 0700 directory named after this process,
removed on close and at exit; a later run removes such directories of processes that no longer exist.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import tempfile
import threading
from pathlib import Path

from gpu_conformance.pids import pid_alive

FALLBACK_PREFIX = "gpu-conformance-creds-"
_FALLBACK_NAME = re.compile(re.escape(FALLBACK_PREFIX) + r"(\d+)-")


class CredentialFiles:
    """Paths to in-memory copies of credential bytes, valid until close()."""

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._dir: Path | None = None
        self._lock = threading.Lock()

    def path_for(self, data: bytes, name: str) -> str:
        """A path whose content is ``data``, readable only by this process (and, on fallback, this user)."""
        with self._lock:
            if hasattr(os, "memfd_create"):
                fd = os.memfd_create(f"gpu-conformance-{name}", os.MFD_CLOEXEC)
                self._fds.append(fd)
                os.write(fd, data)
                return f"/proc/self/fd/{fd}"
            path = Path(self.fallback_dir(), name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return str(path)

    def fallback_dir(self) -> str:
        """This object's private directory: created on first use (mode 0700), removed on close and at exit.

        Also handed to the kubernetes config loader for the rare credential it writes itself (an OIDC
        provider's CA); the loader creates the directory only when it writes there.
        """
        if self._dir is None:
            remove_stale_dirs()
            self._dir = Path(tempfile.gettempdir(), f"{FALLBACK_PREFIX}{os.getpid()}-{secrets.token_hex(8)}")
            atexit.register(self.close)
        if not hasattr(os, "memfd_create"):
            self._dir.mkdir(mode=0o700, exist_ok=True)
        return str(self._dir)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)


def remove_stale_dirs(tmp: str | None = None) -> list[Path]:
    """Remove private credential directories of this user's processes that no longer run (after a SIGKILL)."""
    removed: list[Path] = []
    base = Path(tmp or tempfile.gettempdir())
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = _FALLBACK_NAME.match(entry.name)
        if not m or not entry.is_dir() or entry.is_symlink():
            continue
        try:
            if entry.stat().st_uid != os.getuid() or pid_alive(int(m.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed

