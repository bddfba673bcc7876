"""Text an agent sent, made fit for a terminal and for one line of a record: pure, no I/O.

The command's display (:mod:`tinyacp.cli.run._display`) and the batch's records (a turn's error naming the line a
program printed) use the one sanitizer: escape sequences removed, other controls and bidirectional overrides
replaced, so that an agent cannot rewrite the screen or hide text from the person reading.
"""

from __future__ import annotations

import json
import re

__all__ = ["one_line", "sanitize", "shown"]

# ECMA-48 sequences, removed whole so no "[31m" debris is left: CSI, OSC (ended by BEL or ST), the string
# sequences DCS/SOS/PM/APC, and the two-byte escapes.
_SEQUENCES = re.compile(
    r"\x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[PX^_][^\x1b]*\x1b\\"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"
)
# What is left of the C0 and C1 controls (a lone ESC, BEL, backspace, the C1 CSI/OSC code points that some
# terminals honour) and the bidirectional overrides and isolates that can make text read differently than it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_REPLACEMENT = "\ufffd"


# Printable ASCII, newline and tab: text made of these alone is already fit for a terminal. Checking that with
# bytes.translate runs at memory speed, several times faster than the regular expressions below find nothing.
_ASCII_FIT = bytes([9, 10, *range(0x20, 0x7F)])


def sanitize(text: str) -> str:
    """``text`` fit for a terminal: escape sequences removed, CR LF and lone CR made LF, other controls but LF
    and TAB replaced by U+FFFD, lone surrogates (legal in JSON, not in UTF-8) replaced by ``?``."""
    if text.isascii() and not text.encode("ascii").translate(None, _ASCII_FIT):
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if "\x1b" in text:
        text = _SEQUENCES.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub(_REPLACEMENT, text)


def shown(value: object) -> str:
    """Any value an agent sent, of any JSON type, as text: a string as it is, None as nothing, anything else as
    compact JSON (so a number, a list or an object reads as the agent wrote it). Not yet sanitized."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, TypeError, RecursionError):
        return repr(value)


def one_line(value: object, limit: int = 200) -> str:
    """Sanitized, on one line (newlines and tabs become spaces), at most ``limit`` characters; any JSON value."""
    text = shown(value)
    if not text:
        return ""
    if len(text) > 4 * limit + 64:  # cut first: a huge field costs no more than a short one
        text = text[: 4 * limit + 64]
    text = " ".join(sanitize(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
