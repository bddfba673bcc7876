"""The one check of every number a caller passes in: durations and counts, refused where they enter.

Each bound is one no caller means to reach, chosen so that every value inside it is safe everywhere it goes
later (``poll()`` takes milliseconds in a C int, a lock's wait is at most ``threading.TIMEOUT_MAX``, a line
buffer is mapped whole before the agent starts, the journal's numbers are read by JSON readers). A value outside
raises :class:`ValueError` naming the argument, before anything is spawned or written, rather than an
``OverflowError`` from deep inside or a wait no one meant. The command (``tinyacp …``) takes the same bounds.
"""

from __future__ import annotations

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_FD",
    "MAX_LINE_LIMIT",
    "MAX_RETRIES",
    "MAX_SAFE_INT",
    "MAX_SECONDS",
    "check_count",
    "check_kind",
    "check_seconds",
    "check_timeout",
]

MAX_SECONDS = 1_000_000
"""The longest timeout or grace, in seconds (about 11.6 days): a deadline beyond it is no deadline a person
means (``None`` is "no deadline"), and in milliseconds it still fits the C int that ``poll()`` takes."""

MAX_LINE_LIMIT = 1 << 30
"""The largest ``ReaderLimits.max_line`` (1 GiB): the line buffer is mapped whole when the reader is made, so a
limit must be a size the machine can map; no JSON-RPC line an agent means to send comes near it."""

MAX_CONCURRENCY = 10_000
"""Turns of a batch in flight at once, at most: each holds an agent process and its pipes, and the local engine
makes a worker task for each slot up front."""

MAX_RETRIES = 1_000_000
"""Extra attempts at one turn of a batch, at most: each attempt's number is recorded, and is an epoch of its
journal."""

MAX_FD = (1 << 31) - 1
"""The largest file descriptor: the kernel's and ``os``'s functions take one as a C int."""

MAX_SAFE_INT = (1 << 53) - 1
"""The largest count written as JSON (an epoch, an attempt, the page's ``max_turn_bytes``): the largest integer
every JSON reader keeps exactly (JavaScript's ``Number.MAX_SAFE_INTEGER``; the page of ``tinyacp view`` is one
such reader)."""


def check_seconds(name: str, value: object, *, none: str = "") -> float:
    """``value`` if it is a number of seconds from 0 to :data:`MAX_SECONDS`.

    Raises:
        ValueError: ``value`` is nan, infinite, negative, above :data:`MAX_SECONDS`, or not an int or a float
            (a bool does not count).
    """
    # Compared, never converted: an int of 400 digits has no float, and nan fails every comparison.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds from 0 to {MAX_SECONDS:,}{none}, not {_shown(value)}")
    return value


def check_timeout(name: str, value: object) -> float | None:
    """``value`` if it is None (no deadline) or a number of seconds from 0 to :data:`MAX_SECONDS`.

    Raises:
        ValueError: ``value`` is not None and not a number of seconds :func:`check_seconds` takes.
    """
    return None if value is None else check_seconds(name, value, none=" (or None: no deadline)")


def check_count(name: str, value: object, least: int = 1, most: int | None = None) -> int:
    """``value`` if it is an int from ``least`` to ``most`` (None: no upper bound).

    Raises:
        ValueError: ``value`` is not an int (a bool or a float does not count), or is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, not {_shown(value)}")
    if value < least or (most is not None and value > most):
        span = f"at least {least:,}" if most is None else f"from {least:,} to {most:,}"
        raise ValueError(f"{name} must be {span}, not {_shown(value)}")
    return value


def check_kind(name: str, value: object, kind: type) -> None:
    """Refuse a value of another type where a typed value (a limits object, say) is expected.

    Raises:
        TypeError: ``value`` is not a ``kind``.
    """
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a tinyacp.{kind.__name__}, not {type(value).__name__}")


def _shown(value: object) -> str:
    """The value as the message shows it: a huge int by its size, never 400 digits (nor int's digit limit)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 64:
        return f"an int of {abs(value).bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
