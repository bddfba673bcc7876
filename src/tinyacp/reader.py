"""A line reader with one fixed buffer and a hard limit on line length.

An ACP agent writes one JSON message per line on its stdout, and nothing bounds how long a line is. The
usual readers do not hold memory to a bound the caller chose: asyncio's ``StreamReader.readline`` buffers up
to twice its limit, and after an overlong line it resynchronises on that line's tail, handing the caller the
end of a message as if it were a message; anyio's ``receive_until`` reads a whole chunk past its limit before
it notices.

:class:`LineReader` reserves one buffer of :attr:`ReaderLimits.capacity` bytes up front and never grows
it. It never asks the source for more than the room left in that buffer, never scans a byte twice, and
raises :class:`ReaderExhaustion` before any part of an overlong line reaches the caller; after that it
refuses every call, because the stream can no longer be split into messages safely. Besides its buffer it
holds only the lines of one batch (at most 16 KiB of line data) cut ahead and waiting to be handed out.

The buffer is an anonymous memory mapping: its size is fixed when the reader is made, but the kernel commits
(and counts in the process's RSS) only the pages bytes were written to. The reader keeps the bytes it holds
near the front of the buffer, so agents that write short lines touch only the first pages of it, however
long the stream. A long line commits what it needs; once bytes were written past the first MiB, the pages
past the first 256 KiB are handed back to the kernel as soon as the bytes held fit before them again.

Blocking use, with a file descriptor or a binary file object as the source::

    reader = LineReader(proc.stdout.fileno(), ReaderLimits(max_line=1 << 20))
    for line in reader:
        handle(line)

Sans-I/O use, for callers that do their own reads, in the style of h11 (both clients read this way: their call
driver reads the agent's pipe into :meth:`LineReader.writable` and takes whole lines with
:meth:`LineReader.poll_lines`)::

    >>> reader = LineReader()
    >>> view = reader.writable()
    >>> view[:7] = b"a\\nb\\r\\ncd"
    >>> reader.commit(7)
    >>> reader.poll(), reader.poll(), reader.poll()
    (b'a', b'b\\r', <ReaderEvent.NEED_DATA: 'need_data'>)
    >>> reader.commit(0)  # end of input, as a read that returns 0
    >>> reader.poll(), reader.poll()
    (b'cd', <ReaderEvent.END_OF_INPUT: 'end_of_input'>)
"""

from __future__ import annotations

import enum
import io
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._bounds import MAX_FD, MAX_LINE_LIMIT, check_count
from ._errors import ReaderExhaustion

__all__ = [
    "DEFAULT_MAX_LINE",
    "LineReader",
    "ReaderEvent",
    "ReaderExhaustion",
    "ReaderLimits",
    "ReaderPoll",
    "ReaderState",
    "ReaderStatus",
    "default_reader_limits",
]

# The official Python SDK started at asyncio's 64 KiB and broke on real agents' messages
# (agentclientprotocol/python-sdk#27, #62); it now allows 50 MiB per line. 2 MiB keeps what one runaway agent
# can make us hold 25 times smaller; a caller expecting bigger lines (base64 images, say) raises it.
DEFAULT_MAX_LINE = 2 * 1024 * 1024

_NEWLINE = b"\n"

# poll() cuts the complete lines of up to this many buffered bytes in one bytes.split and hands them out from a
# list: one C call per batch instead of a find and a slice per line, which halves the per-line cost for the small
# lines agents stream. The batch is the only memory the reader holds besides its buffer, so it stays small: one
# pipe read is 64 KiB, and 16 KiB of 2-byte lines is about 8 thousand 35-byte objects (shorter lines are shared
# singletons).
_BATCH = 16 * 1024

_KEEP_COMMITTED = 256 * 1024
"""Bytes at the front of the buffer that stay committed once touched: room for a few pipe reads of lines."""
_RELEASE_ABOVE = 1024 * 1024
"""Once bytes were written this far into the buffer, the pages past the first ``_KEEP_COMMITTED`` bytes are
handed back to the kernel (``madvise(MADV_DONTNEED)``) as soon as the bytes held fit before them again."""

# Private, not mmap's default MAP_SHARED: shared anonymous pages live in shmem, which MADV_DONTNEED does not free.
_PRIVATE_ANONYMOUS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)


@dataclass(frozen=True, slots=True)
class ReaderLimits:
    """How long a line the reader accepts, which fixes its memory before it reads anything.

    Args:
        max_line: the longest line, without its ``\\n``, that the reader returns: from 1 to 1 GiB
            (``1 << 30``), since the buffer is mapped whole when a reader is made.

    Raises:
        ValueError: ``max_line`` is not an int (a bool or a float does not count), or is less than 1 or more
            than 1 GiB.
    """

    max_line: int = DEFAULT_MAX_LINE

    def __post_init__(self) -> None:
        check_count("max_line", self.max_line, 1, MAX_LINE_LIMIT)

    @property
    def capacity(self) -> int:
        """The exact size of the reader's buffer in bytes: the longest line plus its newline."""
        return self.max_line + 1


default_reader_limits = ReaderLimits()


class ReaderEvent(enum.Enum):
    """What :meth:`LineReader.poll` returns when it has no line to hand out."""

    NEED_DATA = "need_data"
    """No complete line is buffered: call :meth:`~LineReader.writable` and :meth:`~LineReader.commit`."""
    END_OF_INPUT = "end_of_input"
    """The input ended and every line was returned; every later poll says so again."""
    EXHAUSTED = "exhausted"
    """A line passed the limit; the reader stopped for good (see :attr:`LineReader.status`)."""


ReaderPoll: TypeAlias = bytes | ReaderEvent
"""A line (``bytes``, without its ``\\n``) or a :class:`ReaderEvent`: test with ``type(r) is bytes``."""


class ReaderState(enum.Enum):
    """Where a reader is in its life."""

    OPEN = "open"
    """Input may still arrive."""
    EOF = "eof"
    """The source reported end of input; lines already buffered may still be returned."""
    EXHAUSTED = "exhausted"
    """A line passed the limit; every later call fails."""


@dataclass(frozen=True, slots=True)
class ReaderStatus:
    """A snapshot of a reader's counters, taken by :attr:`LineReader.status`."""

    lines: int
    """Lines returned so far (the final unterminated line included)."""
    bytes: int
    """Bytes taken in from the source, or committed, so far."""
    state: ReaderState
    reason: str | None = None
    """Why the reader is exhausted, in words; ``None`` unless it is."""
    error: ReaderExhaustion | None = None
    """The exhaustion, with its ``max_line`` and ``seen``; ``None`` unless the reader is exhausted."""


_NEED_DATA = ReaderEvent.NEED_DATA
_END_OF_INPUT = ReaderEvent.END_OF_INPUT
_EXHAUSTED = ReaderEvent.EXHAUSTED


class LineReader:
    """Split a byte stream at each ``\\n`` inside one buffer whose size is fixed before the first read.

    A line is returned without its ``\\n``; a ``\\r`` before it is data and is kept. A final line without a
    ``\\n`` is returned when the input ends. The reader never closes its source.

    Two ways to drive it, not meant to be mixed:

    * with a source: :meth:`read_line` or iteration read from it, blocking as the source blocks;
    * without one (sans-I/O): :meth:`writable` gives the free space, the caller reads into it and reports how
      much with :meth:`commit`, and :meth:`poll` hands out lines.

    Once a line passes ``limits.max_line`` the reader is exhausted for good: :meth:`read_line`, iteration,
    :meth:`writable` and :meth:`commit` raise :class:`ReaderExhaustion` with the same ``max_line`` and
    ``seen`` every time, and :meth:`poll` returns :attr:`ReaderEvent.EXHAUSTED` every time.

    Args:
        source: a file descriptor, a binary file object, or ``None`` for sans-I/O use. A file object is read
            with ``readinto1`` when it has it (one read at most, so a buffered pipe hands over what has
            arrived instead of waiting to fill the buffer), else ``readinto``, else ``read(n)``. It must be
            blocking.
        limits: the longest line to accept; it fixes the buffer at ``limits.capacity`` bytes.

    Raises:
        TypeError: ``source`` is none of the above, or is a text file.
        ValueError: ``source`` is a negative file descriptor, or one past a C int (``2**31 - 1``).
    """

    __slots__ = (
        "_buf",
        "_end",
        "_eof",
        "_error",
        "_high",
        "_lines",
        "_max_line",
        "_pending",
        "_read_into",
        "_room",
        "_scan",
        "_start",
        "_taken",
        "_view",
        "limits",
    )

    def __init__(self, source: int | Any | None = None, limits: ReaderLimits = default_reader_limits) -> None:
        self.limits = limits
        self._max_line = limits.max_line
        self._read_into = _reader_for(source)
        # Reserved now, committed by the kernel page by page as bytes are written: an idle reader costs a page.
        self._buf = mmap.mmap(-1, limits.capacity, flags=_PRIVATE_ANONYMOUS)
        # The view is an export of the buffer, so Python refuses to resize or close it (BufferError) while we live.
        self._view = memoryview(self._buf)
        self._high = 0  # how far into the buffer bytes were written since the last release
        self._start = 0  # first byte not yet handed out
        self._scan = 0  # first byte not yet searched for a newline; start <= scan <= end
        self._end = 0  # end of the bytes taken in
        self._room = 0  # size of the last writable() view, which bounds the next commit()
        self._eof = False
        self._error: ReaderExhaustion | None = None
        self._lines = 0  # lines cut out of the buffer, pending ones included
        self._pending: list[bytes] = []  # cut but not yet handed out, last first
        self._taken = 0

    @property
    def buffer_size(self) -> int:
        """The size of the buffer in bytes; always ``limits.capacity``, since it never grows."""
        return len(self._buf)

    @property
    def status(self) -> ReaderStatus:
        """A snapshot of what the reader has done and which state it is in."""
        error = self._error
        if error is not None:
            return ReaderStatus(self._lines - len(self._pending), self._taken, ReaderState.EXHAUSTED, str(error), error)
        state = ReaderState.EOF if self._eof else ReaderState.OPEN
        return ReaderStatus(self._lines - len(self._pending), self._taken, state)

    def poll(self) -> ReaderPoll:
        """Hand out the next buffered line, or say why there is none.

        Returns:
            The next line as ``bytes`` without its ``\\n``; or :attr:`ReaderEvent.NEED_DATA` when no complete
            line is buffered; :attr:`ReaderEvent.END_OF_INPUT` once the input ended and every line was
            returned; :attr:`ReaderEvent.EXHAUSTED` once a line passed the limit, on this call and every
            later one.
        """
        pending = self._pending
        if pending:
            return pending.pop()
        lines = self.poll_lines()
        if not isinstance(lines, list):
            return lines
        if len(lines) == 1:
            return lines[0]
        lines.reverse()
        line = lines.pop()
        self._pending = lines
        return line

    def poll_lines(self) -> list[bytes] | ReaderEvent:
        """Hand out, in one list, the lines :meth:`poll` would return next: every complete line of up to 16 KiB
        of buffered bytes (or one longer line), at least one.

        A caller that handles lines in a loop saves a call per line; the two may be mixed.

        Returns:
            A non-empty list of lines, in order, each without its ``\\n``; or the :class:`ReaderEvent` that
            :meth:`poll` would return.
        """
        pending = self._pending
        if pending:
            self._pending = []
            pending.reverse()
            return pending
        start = self._start
        scan = self._scan
        stop = min(start + _BATCH, self._end)
        if scan < stop:
            last = self._buf.rfind(_NEWLINE, scan, stop)
            if last >= 0:
                self._start = last + 1
                self._scan = stop  # no newline after `last` in the window: the search goes on from its end
                lines = self._view[start:last].tobytes().split(_NEWLINE)
                self._lines += len(lines)
                return lines
            scan = stop
        found = self._poll_slow(scan)
        return [found] if isinstance(found, bytes) else found

    def _poll_slow(self, scanned: int) -> ReaderEvent | bytes:
        # No newline in [scan, scanned): look on for a line longer than one batch, else say why there is none.
        end = self._end
        if scanned < end:
            idx = self._buf.find(_NEWLINE, scanned, end)
            if idx >= 0:
                start = self._start
                self._start = self._scan = idx + 1
                self._lines += 1
                return self._view[start:idx].tobytes()
        # No newline in [scan, end): nothing there needs searching again.
        self._scan = end
        if self._error is not None:
            return _EXHAUSTED
        start = self._start
        if end - start > self._max_line:
            # Only a full buffer holds more than max_line unconsumed bytes: the line cannot end in time.
            self._exhaust(end - start)
            return _EXHAUSTED
        if not self._eof:
            return _NEED_DATA
        if start == end:
            return _END_OF_INPUT
        self._start = end
        self._lines += 1
        return self._view[start:end].tobytes()

    def writable(self) -> memoryview:
        """Give the free space at the end of the buffer, for the caller to read into.

        Unconsumed bytes are moved to the front first when that makes useful room; they are not searched
        again, and earlier views may now show other bytes: write only into the view from the latest call.

        Returns:
            A writable, non-empty view of the free space; pass the number of bytes written to :meth:`commit`.

        Raises:
            ReaderExhaustion: the reader is exhausted, or the buffer is full without a newline.
            ValueError: the input already ended, or the buffer is full of lines not yet polled (poll until
                :attr:`ReaderEvent.NEED_DATA` first).
        """
        if self._error is not None:
            raise self._exhaustion()
        if self._eof:
            raise ValueError("writable() after the end of input was committed")
        start = self._start
        end = self._end
        capacity = len(self._buf)
        if start == end:
            self._start = self._scan = end = self._end = 0
        elif start and (end - start <= start or capacity - end < capacity >> 1):
            # Move the partial line to the front once at least as many bytes were consumed before it as it
            # holds (so a byte is moved at most once per byte consumed), or when the room left is under half
            # the buffer. The bytes held stay near the front: a stream of short lines keeps touching the same
            # few pages instead of walking through the whole buffer.
            pending = end - start
            self._view[:pending] = self._view[start:end]
            self._start = 0
            self._scan -= start
            end = self._end = pending
        if self._high > _RELEASE_ABOVE and end <= _KEEP_COMMITTED:
            self._release()
        if end == capacity:
            if self._buf.find(_NEWLINE, self._scan, end) < 0:
                self._scan = end
                self._exhaust(end - self._start)
                raise self._exhaustion()
            raise ValueError("the buffer is full of lines not yet polled; call poll() until NEED_DATA")
        self._room = capacity - end
        return self._view[end:]

    def commit(self, n: int) -> None:
        """Record that ``n`` bytes were written at the start of the latest :meth:`writable` view.

        Args:
            n: how many bytes were written; ``0`` means the input ended, as a read that returns 0 does.

        Raises:
            ReaderExhaustion: the reader is exhausted.
            ValueError: ``n`` is negative or larger than the latest :meth:`writable` view, or the input
                already ended.
        """
        if self._error is not None:
            raise self._exhaustion()
        if self._eof:
            raise ValueError("commit() after the end of input was committed")
        if not 0 <= n <= self._room:
            raise ValueError(f"commit({n}) does not fit the latest writable() view of {self._room} bytes")
        self._room = 0
        if n:
            end = self._end = self._end + n
            self._high = max(self._high, end)
            self._taken += n
        else:
            self._eof = True

    def read_line(self) -> bytes | None:
        """Read the next line from the source.

        Returns:
            The line without its ``\\n`` (a ``\\r`` before it is kept), or ``None`` at the end of input.

        Raises:
            ReaderExhaustion: a line passed the limit, now or on an earlier call.
            TypeError: the reader has no source.
            OSError: reading from the source failed (``BlockingIOError`` for a non-blocking source that
                had nothing to give).
            ValueError: a file object source returned more than it was asked for.
        """
        read_into = self._read_into
        if read_into is None:
            if self._error is not None:
                raise self._exhaustion()
            raise TypeError("this LineReader has no source; drive it with writable(), commit() and poll()")
        while True:
            result = self.poll()
            if type(result) is bytes:
                return result
            if result is _NEED_DATA:
                self.commit(read_into(self.writable()))
            elif result is _END_OF_INPUT:
                return None
            else:
                raise self._exhaustion()

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        line = self.read_line()
        if line is None:
            raise StopIteration
        return line

    def __repr__(self) -> str:
        status = self.status
        return f"<LineReader {status.state.value} lines={status.lines} bytes={status.bytes} capacity={len(self._buf)}>"

    def _release(self) -> None:
        # The bytes held fit in the first _KEEP_COMMITTED: give back the pages a long line committed past them.
        # Private anonymous pages read as zeros after this; nothing in them is needed any more.
        if _DONTNEED is not None and len(self._buf) > _KEEP_COMMITTED:
            try:
                self._buf.madvise(_DONTNEED, _KEEP_COMMITTED, len(self._buf) - _KEEP_COMMITTED)
            except OSError:
                return  # only memory is at stake, and the reader is still correct
        self._high = 0

    def _exhaust(self, seen: int) -> None:
        self._error = ReaderExhaustion(self._max_line, seen)

    def _exhaustion(self) -> ReaderExhaustion:
        # A fresh exception each time: re-raising one instance would chain every traceback onto it.
        error = self._error
        assert error is not None
        return ReaderExhaustion(error.max_line, error.seen)


def _reader_for(source: object) -> Callable[[memoryview], int] | None:
    """Turn a source into one "read into this view, return the count" callable."""
    if source is None:
        return None
    if isinstance(source, int) and not isinstance(source, bool):
        fd = check_count("the source file descriptor", source, 0, MAX_FD)

        def read_fd(view: memoryview) -> int:
            # os.readv reads straight into our buffer, asking for no more than the view holds.
            return os.readv(fd, [view])

        return read_fd
    if isinstance(source, io.TextIOBase):
        raise TypeError("LineReader needs a binary source, not a text file")
    for name in ("readinto1", "readinto"):
        method = getattr(source, name, None)
        if callable(method):
            return _checked_readinto(method, name)
    read = getattr(source, "read", None)
    if callable(read):
        return _read_copy(read)
    kind = type(source).__name__
    raise TypeError(f"LineReader needs a file descriptor or a binary file object, not {kind}")


def _checked_readinto(method: Callable[[memoryview], int | None], name: str) -> Callable[[memoryview], int]:
    def read_into(view: memoryview) -> int:
        n = method(view)
        if n is None:
            raise BlockingIOError(f"{name}() returned None: the source is non-blocking and had no data")
        return n

    return read_into


def _read_copy(read: Callable[[int], bytes | None]) -> Callable[[memoryview], int]:
    def read_into(view: memoryview) -> int:
        data = read(len(view))
        if data is None:
            raise BlockingIOError("read() returned None: the source is non-blocking and had no data")
        n = len(data)
        if n > len(view):
            raise ValueError(f"read({len(view)}) returned {n} bytes")
        view[:n] = data
        return n

    return read_into
