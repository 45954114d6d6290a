"""Files a user hands in (--conformance-config, --baseline, `report diff` inputs), read with bounds.

A FIFO or a device (`--baseline=/dev/zero`) must not hang or fill memory, and a YAML alias bomb must not expand:
only regular files, at most `limit` bytes, YAML without anchors or aliases and nested at most MAX_DEPTH deep.
Every refusal is an InputFileError: one line, the caller adds which option it was.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

# A config is a handful of options; a conformance.json of 5,000 nodes is a few MB.
CONFIG_LIMIT = 1024 * 1024
REPORT_LIMIT = 256 * 1024 * 1024
MAX_DEPTH = 64


class InputFileError(ValueError):
    """A file that cannot be read as asked: the message says why, in one line."""


def read_bounded(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    p = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputFileError(f"{p}: no such file") from None
    except OSError as e:
        raise InputFileError(f"{p}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputFileError(f"{p}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{p}: not a regular file (a pipe, socket or device)")
        if st.st_size > limit:
            raise InputFileError(f"{p}: {st.st_size} bytes, more than the {limit} this input may have")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # grew while being read
            raise InputFileError(f"{p}: more than the {limit} bytes this input may have")
        return b"".join(chunks)
    except OSError as e:
        raise InputFileError(f"{p}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, limit: int, kind: str = "") -> str:
    try:
        return read_bounded(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not a {kind + ' ' if kind else ''}text file (not UTF-8)") from None


def safe_yaml(text: str, path: Path | str) -> Any:
    """YAML without anchors/aliases (an alias bomb expands to gigabytes) and nested at most MAX_DEPTH deep."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise InputFileError(f"{path}: YAML anchors and aliases (&, *) are not accepted here")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputFileError(f"{path}: nested more than {MAX_DEPTH} levels deep")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputFileError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
