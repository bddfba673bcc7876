"""Reading what the strict decoders refuse: pure functions over one line of the agent, no I/O, no state.

The conversation core decodes each line with msgspec in one typed pass. When that fails, it asks this module two
things: :func:`parseable` (the line made decodable, when what stopped the decoder is a byte-order mark before the
agent's first line or a lone surrogate escape, which JavaScript agents write) and :func:`request_id` (the id of a
request it cannot use, so that it can answer it with an error rather than leave the agent waiting for ever, even
for a line nested too deeply to decode, through a small tokenizer that walks the top-level keys).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

__all__ = ["parseable", "request_id"]

_BOM: Final = b"\xef\xbb\xbf"
"""A UTF-8 byte-order mark, which some agents' runtimes write before their first line."""

_SURROGATES: Final = re.compile(
    rb"(\\\\)|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
"""An escaped backslash (kept), a surrogate pair (kept), or a lone surrogate escape (replaced): what a JavaScript
agent writes when it cuts a string between the two halves of an emoji, and what msgspec refuses."""

_MAX_SCAN_DEPTH: Final = 64
"""How deep :func:`_scan_request_id` follows a line nested too deeply to decode, looking for its id."""

_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\],:]')
_ID_VALUE: Final = re.compile(rb'\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")')


class _Probe(msgspec.Struct):
    id: Any = None
    method: Any = None


def parseable(raw: bytes, *, first_line: bool) -> bytes:
    """``raw`` made parseable: without the byte-order mark before the agent's first line, and with U+FFFD
    escaped in place of each lone surrogate escape. Records keep ``raw`` exactly; only parsing reads this.

    Args:
        raw: one line of the agent, without its newline.
        first_line: whether it is the first line the agent wrote (only that one may carry a byte-order mark).

    Returns:
        ``raw`` itself when there is nothing to set aside.
    """
    text = raw[len(_BOM) :] if first_line and raw.startswith(_BOM) else raw
    if b"\\u" in text:
        text = _SURROGATES.sub(_lone_surrogate_replaced, text)
    return text


def _lone_surrogate_replaced(match: re.Match[bytes]) -> bytes:
    whole = match.group(0)
    return whole if match.group(1) is not None or len(whole) == 12 else b"\\ufffd"


def request_id(text: bytes) -> int | str | None:
    """The id of a request we cannot decode, if it can be read: an int or str ``id`` beside a ``method``."""
    try:
        probe = msgspec.json.decode(text, type=_Probe)
    except RecursionError:
        return _scan_request_id(text)
    except msgspec.MsgspecError:
        return None
    if probe.method is None or isinstance(probe.id, bool) or not isinstance(probe.id, int | str):
        return None
    return probe.id


def _scan_request_id(text: bytes) -> int | str | None:  # noqa: C901  a tokenizer: one branch per kind of token
    """:func:`request_id` for a line nested past the decoder's limit: walk its top-level keys without decoding
    the values (up to :data:`_MAX_SCAN_DEPTH` deep), for an ``id`` and a ``method``."""
    depth = 0
    key_next = False
    found: int | str | None = None
    has_method = False
    for token in _TOKEN.finditer(text):
        part = token.group()
        first = part[0]
        if first == 0x22:  # a string: a key when it follows "{" or "," at the top level
            if depth == 1 and key_next:
                if part == b'"id"':
                    value = _ID_VALUE.match(text, token.end())
                    if value is not None:
                        found = msgspec.json.decode(value.group(1))
                elif part == b'"method"':
                    has_method = True
            key_next = False
        elif first in b"{[":
            depth += 1
            key_next = depth == 1 and first == 0x7B
            if depth > _MAX_SCAN_DEPTH:
                break
        elif first in b"}]":
            depth -= 1
        elif first == 0x2C:  # ","
            key_next = depth == 1
        if found is not None and has_method:
            return found
    return None
