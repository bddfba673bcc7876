"""Lines for a terminal, as every subcommand writes them: cut to a width, the plan as a checklist, a tool call's
output and its words, errors on stderr, and whether a stream is a terminal that wants colour.

Everything an agent sent goes through the one sanitizer (:func:`tinyacp._sanitize.sanitize`, re-exported here with
:func:`one_line` and :func:`shown`) before it is written; ``tinyacp prompt``'s live display is
:mod:`tinyacp.cli.run._display`.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from ..._messages import PermissionToolCall, PlanEntry
from ..._sanitize import one_line, sanitize, shown  # the one sanitizer, the batch's records' too

__all__ = [
    "char_width",
    "fit",
    "isatty",
    "one_line",
    "plan_lines",
    "print_error",
    "same_file",
    "sanitize",
    "shown",
    "tool_output_lines",
    "tool_words",
    "wants_color",
]


def char_width(char: str) -> int:
    """The terminal columns ``char`` takes: 0 for a combining mark, 2 for a wide or full-width character."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def fit(text: str, columns: int) -> str:
    """``text`` cut to ``columns`` terminal columns (wide characters count two), with an ellipsis if cut."""
    if columns <= 0:
        return ""
    if len(text) * 2 <= columns:
        return text
    widths = [char_width(char) for char in text]
    if sum(widths) <= columns:
        return text
    used = 0
    for index, width in enumerate(widths):
        if used + width > columns - 1:
            return text[:index] + "…"
        used += width
    return text


_PLAN_MARKS = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


def plan_lines(entries: Sequence[PlanEntry], limit: int = 200) -> list[str]:
    """The plan as a checklist: ``[x]`` done, ``[~]`` in progress, ``[ ]`` pending."""
    return [f"  {_mark(entry.status)} {one_line(entry.content, limit)}" for entry in entries]


def _mark(status: object) -> str:
    return _PLAN_MARKS.get(status, "[?]") if isinstance(status, str) else "[?]"


def tool_output_lines(content: Iterable[Any] | None, max_lines: int = 6, limit: int = 200) -> list[str]:
    """A tool call's content, briefly: the first lines of its text, the paths of its diffs."""
    lines: list[str] = []
    for item in content if isinstance(content, list | tuple) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "content" and isinstance(item.get("content"), dict):
            block = item["content"]
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                lines += sanitize(block["text"]).splitlines()
            else:
                lines.append(f"[{one_line(block.get('type'), 40)}]")
        elif item.get("type") == "diff":
            lines.append(f"diff: {one_line(item.get('path'), limit)}")
    shown = [f"  | {one_line(line, limit)}" for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"  | … {len(lines) - max_lines} more lines")
    return shown


def tool_words(tool: PermissionToolCall, limit: int = 200) -> str:
    """The tool call a permission request is about, in words: its title, ``[kind]`` and ``(name)``, as claimed."""
    kind = f" [{one_line(tool.kind, 20)}]" if tool.kind else ""
    name = f" ({one_line(tool.name, 40)})" if tool.name else ""
    return f"{one_line(tool.title or tool.tool_call_id, limit)}{kind}{name}"


def isatty(stream: Any) -> bool:
    """Whether ``stream`` is a terminal; a closed or fake stream is not."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def same_file(a: Any, b: Any) -> bool:
    """Whether two streams write to the same file (stderr and stdout on one terminal); a closed or fake stream
    is no file."""
    try:
        return os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except (AttributeError, ValueError, OSError):
        return False


def wants_color(stream: Any) -> bool:
    """Whether to colour what goes to ``stream``: ``FORCE_COLOR`` (set, and not ``0`` or ``false``) says yes
    anywhere, ``FORCE_COLOR=0`` and ``NO_COLOR`` (set, not empty; https://no-color.org/) say no; else a terminal
    that is not ``TERM=dumb``. ``FORCE_COLOR`` wins over ``NO_COLOR``, as in Node.js and most tools that read both."""
    force = os.environ.get("FORCE_COLOR")
    if force:
        return force.lower() not in ("0", "false", "no")
    if os.environ.get("NO_COLOR"):
        return False
    return isatty(stream) and os.environ.get("TERM", "") != "dumb"


def print_error(message: str, hint: str | None = None) -> None:
    """``tinyacp: error: MESSAGE`` on stderr, then ``hint``; both sanitized, as they may quote the agent."""
    print(sanitize(f"tinyacp: error: {message}"), file=sys.stderr)
    if hint:
        print(sanitize(hint), file=sys.stderr)
