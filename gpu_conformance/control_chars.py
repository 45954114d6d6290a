"""Text from the cluster made safe for a terminal: no escape sequence may act on the reader's screen.

Container logs, ClusterPolicy conditions, event messages and API error bodies are written by whoever controls
the cluster. Printed raw, ``ESC ] 0 ; title BEL`` renames the window, ``ESC [ 2 J`` clears the screen and a
following line can print a fake "verdict: CONFORMANT". Everything printed that may hold such text goes through
``printable``. HTML and JSON reports keep the text (escaped there, which is safe and keeps the evidence).
"""

from __future__ import annotations

import re

# Complete escape sequences are removed: OSC (title, hyperlink; ended by BEL or ST, or cut off), CSI (colours,
# cursor moves, erase), DCS/SOS/PM/APC strings, and two-byte ESC sequences. The C1 forms (0x9b CSI, 0x9d OSC)
# are covered as well, since some terminals honour them.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"         # OSC ... BEL | ST
    r"|(?:\x1b[P^_X]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC ... ST
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"                           # CSI params intermediates final
    r"|\x1b[ -/]*[0-~]?"                                            # ESC (intermediates) final
)
# Whatever control character remains (C0 but tab and newline, DEL, C1) and the Unicode bidi overrides that
# reorder what is shown, is made visible as an escape instead of acting.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SEQUENCE_START = re.compile(r"[\x1b\x90-\x9f]")


def printable(text: str, keep_newlines: bool = True) -> str:
    """``text`` without terminal escape sequences; other control characters shown as ``\\xNN``.

    With keep_newlines=False a newline is shown as ``\\n`` too, for output that must stay one line.
    """
    if not text:
        return text
    text = text.replace("\r\n", "\n")
    if _SEQUENCE_START.search(text):
        text = _ESCAPE_SEQUENCE.sub("", text)
    text = _CONTROL.sub(_visible, text)
    if not keep_newlines:
        text = text.replace("\n", "\\n")
    return text


def _visible(m: re.Match[str]) -> str:
    c = m.group(0)
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
