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
# Whatever control character remains (C0 but tab and newline, DEL, C1) is made visible as an escape instead of
# acting, and so is every Unicode format character (category Cf: bidi marks, embeddings and isolates that
# reorder what is shown, RLM, zero-width joiners and spaces, the BOM, tag characters) and the line and paragraph
# separators (U+2028, U+2029) that break a "one line" message on some terminals. The ranges are Unicode 14's
# Cf/Zl/Zp; tests/test_terminal_injection.py holds them against the running Python's unicodedata.
_FORMAT_RANGES = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _FORMAT_RANGES + "]")
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
    if ord(c) < 0x100:
        return f"\\x{ord(c):02x}"
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
