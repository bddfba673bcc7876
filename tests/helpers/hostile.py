"""What the hostile-input tests share: the escape sequences an agent or a journal may carry, and the check that none
of them reached a screen.

And ``sent_line``: the line a client writes for a body that carries secrets.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

import tinyacp

# Every kind of sequence or control a terminal may act on: CSI (clear the screen), OSC 8 (a hyperlink), OSC 52 (write
# the clipboard), BEL, C1 controls written as UTF-8 (CSI, OSC and ST as single code points), a bidi override.
EVIL = (
    "A\x1b[2J\x1b[31m"
    "\x1b]8;;http://evil.example\x07L\x1b]8;;\x07"
    "\x1b]52;c;cHduZWQ=\x07B\x07"
    "\u009b31m\u009d0;t\u009c"
    "\u202eZ"
)


# What a screen may never show: C0 controls but newline and tab (ESC included, so every escape sequence), DEL, C1
# controls, bidi embeddings, overrides and isolates.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# The display's own sequences on a terminal: SGR colours, the cursor moves that redraw the live region, and the
# carriage returns the pseudo-terminal adds before each newline.
OURS = re.compile(r"\x1b\[[0-9;]*m|\x1b\[[0-9]*A|\x1b\[J|\r")


def assert_clean(screen: bytes | str, *, ours: bool = False) -> None:
    """Fail if ``screen`` (UTF-8) holds a control character a terminal could act on; with ``ours``, the display's
    own sequences are allowed (and only those)."""
    text = screen.decode("utf-8") if isinstance(screen, bytes) else screen
    if ours:
        text = OURS.sub("", text)
    found = FORBIDDEN.search(text)
    assert found is None, f"{found.group()!r} at {found.start()} in {text[max(0, found.start() - 80) :][:200]!r}"


def sent_line(body: Any) -> tinyacp.OutgoingMessage:
    """The line a client writes for ``body`` and the secrets in it, as the client encodes them."""
    found: list[tinyacp.Secret] = []

    def plain(value: Any) -> str:
        found.append(value)
        return str(value.value)

    raw = msgspec.json.Encoder(enc_hook=plain).encode(body)
    return tinyacp.OutgoingMessage(1, raw, "authenticate", 7, secrets=tuple(dict.fromkeys(found)))
