"""Decode a Kubernetes LIST body as it arrives, one item at a time, trimming each item as soon as it is decoded.

Why not json.loads(body): at 1,000 GPU nodes the operator namespace's pod LIST is ~90 MB of JSON; loading it
whole holds the body, its text and ~450 MB of full pod dicts at once, only to drop most of every pod
(cluster/trim.py). Here the body is read in chunks and each item goes through the C scanner
(JSONDecoder.raw_decode) on its own, so the peak is one chunk plus the trimmed items.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from gpu_conformance.cluster.trim import Shape, trim

CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Text:
    """The undecoded rest of the body: a str window over the byte chunks, refilled on demand."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.s = ""
        self.i = 0
        self.eof = False

    def more(self) -> bool:
        """Append the next chunk (dropping what was consumed); False at the end of the body."""
        if self.eof:
            return False
        chunk = next(self._chunks, None)
        if chunk is None:
            self.eof = True
            tail = self._utf8.decode(b"", final=True)
        else:
            tail = self._utf8.decode(chunk)
        self.s = self.s[self.i:] + tail
        self.i = 0
        return chunk is not None or bool(tail)

    def peek(self) -> str:
        """The next non-whitespace character ('' at the end of the body), not consumed."""
        while True:
            self.i = _WS.match(self.s, self.i).end()  # type: ignore[union-attr]  # [ \t..]* always matches
            if self.i < len(self.s):
                return self.s[self.i]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise ValueError(f"expected one of {chars!r} at {c!r}")
        self.i += 1
        return c

    def value(self) -> Any:
        """One complete JSON value; a value the window cuts off is decoded again once more text is in."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.s, self.i)
            except json.JSONDecodeError:
                if self.more():
                    continue
                raise
            # A number or literal ending exactly at the window's edge may continue in the next chunk.
            if end >= len(self.s) and not isinstance(obj, dict | list | str) and self.more():
                continue
            self.i = end
            return obj


def decode_list(chunks: Iterable[bytes], shape: Shape | None) -> dict[str, Any]:
    """The top-level object of a LIST body, its "items" trimmed to `shape` (None: kept whole).

    Raises ValueError (json.JSONDecodeError included) for a body that is not one JSON object.
    """
    text = _Text(chunks)
    first = text.peek()
    if not first:
        return {}
    if first != "{":
        rest = text.s[text.i:]
        while text.more():
            rest = text.s
        try:
            parsed = json.loads(rest)
        except ValueError:
            raise ValueError(f"not JSON, starts with {rest[:40].strip()!r}") from None
        raise ValueError(f"a JSON {type(parsed).__name__}, not an object")
    text.i += 1
    out: dict[str, Any] = {}
    if text.peek() == "}":
        return out
    while True:
        key = text.value()
        if not isinstance(key, str):
            raise ValueError("an object key that is not a string")
        text.expect(":")
        if key == "items" and text.peek() == "[":
            out[key] = _items(text, shape)
        else:
            out[key] = text.value()
        if text.expect(",}") == "}":
            return out


def _items(text: _Text, shape: Shape | None) -> list[Any]:
    text.i += 1
    items: list[Any] = []
    if text.peek() == "]":
        text.i += 1
        return items
    while True:
        item = text.value()
        items.append(trim(item, shape) if shape is not None and isinstance(item, dict) else item)
        if text.expect(",]") == "]":
            return items
