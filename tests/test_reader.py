"""The line reader: exact limits, any chunking, and memory that stays at one fixed buffer."""

from __future__ import annotations

import ctypes
import dataclasses
import doctest
import io
import mmap
import os
import struct
import threading
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyacp.reader
from tinyacp import _errors
from tinyacp.reader import (
    DEFAULT_MAX_LINE,
    LineReader,
    ReaderEvent,
    ReaderExhaustion,
    ReaderLimits,
    ReaderState,
    ReaderStatus,
    default_reader_limits,
)

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
JOIN_TIMEOUT = 10.0

SCRIPT = b'{"a":1}\n\nx\r\n\r\n' + b"tail"
SCRIPT_LINES = [b'{"a":1}', b"", b"x\r", b"\r", b"tail"]


# -- helpers -------------------------------------------------------------------------------------------------


def expected_lines(data: bytes) -> list[bytes]:
    """What a line reader must return for ``data``: split at ``\\n``, without an empty piece at the end."""
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return pieces


class ChunkedSource:
    """A binary file object handing out its data in the given chunk sizes (cycled); records each request."""

    def __init__(self, data: bytes, sizes: Sequence[int] = (1,)) -> None:
        self._data = data
        self._sizes = sizes
        self._pos = 0
        self._calls = 0
        self.requests: list[int] = []

    def readinto(self, view: memoryview) -> int:
        self.requests.append(len(view))
        size = self._sizes[self._calls % len(self._sizes)]
        self._calls += 1
        n = min(len(view), size, len(self._data) - self._pos)
        view[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


class RepeatingRaw(io.RawIOBase):
    """A raw file of ``total`` bytes repeating one pattern without allocating; counts what it hands out."""

    def __init__(self, pattern: bytes, total: int) -> None:
        super().__init__()
        self._period = len(pattern)
        self._pattern = memoryview(pattern * 2)  # any window of one period, from any offset, without a copy
        self._total = total
        self.handed_out = 0
        self.largest_request = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self.largest_request = max(self.largest_request, len(buffer))
        n = min(len(buffer), self._period, self._total - self.handed_out)
        offset = self.handed_out % self._period
        buffer[:n] = self._pattern[offset : offset + n]
        self.handed_out += n
        return n


Outcome = tuple[list[bytes], ReaderExhaustion | None, LineReader]
Driver = Callable[[bytes, Sequence[int], ReaderLimits], Outcome]


def drive_sans_io(data: bytes, sizes: Sequence[int], limits: ReaderLimits) -> Outcome:
    """Feed ``data`` through writable()/commit() in the given chunk sizes; poll until the reader is done."""
    reader = LineReader(limits=limits)
    lines: list[bytes] = []
    pos = 0
    calls = 0
    while True:
        result = reader.poll()
        if type(result) is bytes:
            lines.append(result)
        elif result is ReaderEvent.END_OF_INPUT:
            return lines, None, reader
        elif result is ReaderEvent.EXHAUSTED:
            return lines, reader.status.error, reader
        else:
            assert result is ReaderEvent.NEED_DATA
            view = reader.writable()
            assert len(view) > 0
            n = min(len(view), sizes[calls % len(sizes)], len(data) - pos)
            calls += 1
            view[:n] = data[pos : pos + n]
            pos += n
            reader.commit(n)


def drive_source(data: bytes, sizes: Sequence[int], limits: ReaderLimits) -> Outcome:
    """Read ``data`` with read_line() from a source that hands it out in the given chunk sizes."""
    reader = LineReader(ChunkedSource(data, sizes), limits)
    lines: list[bytes] = []
    try:
        while (line := reader.read_line()) is not None:
            lines.append(line)
    except ReaderExhaustion as exc:
        return lines, exc, reader
    return lines, None, reader


def drive_batches(data: bytes, sizes: Sequence[int], limits: ReaderLimits) -> Outcome:
    """Like :func:`drive_sans_io`, but taking the lines with poll_lines(), every third time with poll() instead."""
    reader = LineReader(limits=limits)
    lines: list[bytes] = []
    pos = 0
    calls = 0
    polls = 0
    while True:
        polls += 1
        result = reader.poll_lines() if polls % 3 else reader.poll()
        if isinstance(result, list):
            assert result, "a batch holds at least one line"
            lines.extend(result)
        elif isinstance(result, bytes):
            lines.append(result)
        elif result is ReaderEvent.END_OF_INPUT:
            return lines, None, reader
        elif result is ReaderEvent.EXHAUSTED:
            return lines, reader.status.error, reader
        else:
            assert result is ReaderEvent.NEED_DATA
            view = reader.writable()
            n = min(len(view), sizes[calls % len(sizes)], len(data) - pos)
            calls += 1
            view[:n] = data[pos : pos + n]
            pos += n
            reader.commit(n)


DRIVERS = [
    pytest.param(drive_sans_io, id="sans-io"),
    pytest.param(drive_source, id="source"),
    pytest.param(drive_batches, id="batches"),
]


def exhausted_reader(max_line: int = 4) -> LineReader:
    reader = LineReader(io.BytesIO(b"ok\n" + b"x" * (max_line + 1) + b"\nlater\n"), ReaderLimits(max_line))
    assert reader.read_line() == b"ok"
    with pytest.raises(ReaderExhaustion):
        reader.read_line()
    return reader


@contextmanager
def allocation_peak() -> Iterator[list[int]]:
    """Measure how far traced memory rose above where it stood on entry; the result lands in the list."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    result: list[int] = []
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        yield result
        _, peak = tracemalloc.get_traced_memory()
        result.append(peak - base)
    finally:
        if started:
            tracemalloc.stop()


# -- limits --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, False, 1.5, "10", None])
def test_limits_reject_anything_but_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_line"):
        ReaderLimits(bad)  # type: ignore[arg-type]


def test_limits_capacity_is_the_longest_line_plus_its_newline() -> None:
    assert ReaderLimits(1).capacity == 2
    assert ReaderLimits(MiB).capacity == MiB + 1
    assert default_reader_limits == ReaderLimits() == ReaderLimits(DEFAULT_MAX_LINE)
    assert 2 * MiB == DEFAULT_MAX_LINE
    assert default_reader_limits.capacity == DEFAULT_MAX_LINE + 1


def test_limits_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        default_reader_limits.max_line = 5  # type: ignore[misc]


def test_buffer_is_reserved_once_at_capacity_and_cannot_grow() -> None:
    limits = ReaderLimits(100)
    reader = LineReader(limits=limits)
    assert reader.buffer_size == limits.capacity
    view = reader.writable()
    assert len(view) == limits.capacity
    buffer = view.obj
    assert isinstance(buffer, mmap.mmap)
    assert len(buffer) == limits.capacity
    with pytest.raises(BufferError):
        buffer.resize(2 * limits.capacity)
    with pytest.raises(BufferError):
        buffer.close()


# -- the limit -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("drive", DRIVERS)
def test_line_of_exactly_max_line_bytes_is_accepted(drive: Driver) -> None:
    limits = ReaderLimits(8)
    for data in (b"12345678\n", b"12345678", b"a\n12345678\nb"):
        for sizes in ([1], [100], [3, 5]):
            lines, error, _ = drive(data, sizes, limits)
            assert error is None
            assert lines == expected_lines(data)


@pytest.mark.parametrize("drive", DRIVERS)
@pytest.mark.parametrize(
    ("data", "before"),
    [(b"123456789\n", []), (b"123456789", []), (b"a\n123456789\nb\n", [b"a"])],
)
def test_line_one_byte_past_max_line_raises_reader_exhaustion(drive: Driver, data: bytes, before: list[bytes]) -> None:
    lines, error, reader = drive(data, [1], ReaderLimits(8))
    assert lines == before
    assert isinstance(error, ReaderExhaustion)
    assert error.max_line == 8
    assert error.seen == 9
    assert reader.buffer_size == 9


def test_exhaustion_is_raised_before_any_part_of_the_line_is_handed_out() -> None:
    reader = LineReader(limits=ReaderLimits(4))
    view = reader.writable()
    view[:5] = b"abcde"
    reader.commit(5)
    assert reader.poll() is ReaderEvent.EXHAUSTED
    assert reader.status.lines == 0


def test_every_call_after_exhaustion_raises_the_same_exhaustion() -> None:
    reader = exhausted_reader(max_line=4)
    errors: list[ReaderExhaustion] = []
    calls: list[Callable[[], object]] = [
        reader.read_line,
        reader.read_line,
        lambda: next(iter(reader)),
        lambda: list(reader),
        reader.writable,
        lambda: reader.commit(0),
        lambda: reader.commit(1),
    ]
    for call in calls:
        with pytest.raises(ReaderExhaustion) as info:
            call()
        errors.append(info.value)
    assert {(e.max_line, e.seen, str(e)) for e in errors} == {(4, 5, str(errors[0]))}
    assert reader.poll() is ReaderEvent.EXHAUSTED
    assert reader.poll() is ReaderEvent.EXHAUSTED


def test_status_of_an_exhausted_reader_gives_the_reason() -> None:
    reader = exhausted_reader(max_line=4)
    status = reader.status
    assert status.state is ReaderState.EXHAUSTED
    assert status.state.value == "exhausted"
    assert status.lines == 1
    assert status.bytes == 3 + 5  # "ok\n" and one buffer's worth of the long line, nothing past it
    assert isinstance(status.error, ReaderExhaustion)
    assert (status.error.max_line, status.error.seen) == (4, 5)
    assert status.reason == str(status.error)
    assert "limit of 4 bytes" in status.reason


def test_sans_io_reader_exhausted_by_commit_refuses_read_line_with_the_exhaustion() -> None:
    reader = LineReader(limits=ReaderLimits(2))
    reader.writable()[:3] = b"abc"
    reader.commit(3)
    assert reader.poll() is ReaderEvent.EXHAUSTED
    with pytest.raises(ReaderExhaustion):
        reader.read_line()


def test_writable_on_a_full_buffer_without_newline_raises_exhaustion() -> None:
    reader = LineReader(limits=ReaderLimits(3))
    reader.writable()[:4] = b"abcd"
    reader.commit(4)
    with pytest.raises(ReaderExhaustion) as info:
        reader.writable()
    assert (info.value.max_line, info.value.seen) == (3, 4)
    assert reader.poll() is ReaderEvent.EXHAUSTED


# -- splitting -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("drive", DRIVERS)
def test_lines_split_across_reads_at_every_position(drive: Driver) -> None:
    for cut in range(len(SCRIPT) + 1):
        lines, error, _ = drive(SCRIPT, [cut or 1, len(SCRIPT)], ReaderLimits(16))
        assert error is None
        assert lines == SCRIPT_LINES


@pytest.mark.parametrize("drive", DRIVERS)
def test_lines_fed_one_byte_at_a_time(drive: Driver) -> None:
    lines, error, reader = drive(SCRIPT, [1], ReaderLimits(16))
    assert error is None
    assert lines == SCRIPT_LINES
    assert reader.status == ReaderStatus(lines=len(SCRIPT_LINES), bytes=len(SCRIPT), state=ReaderState.EOF)


def test_source_returning_one_byte_per_read_is_asked_for_no_more_than_the_room_left() -> None:
    limits = ReaderLimits(16)
    source = ChunkedSource(SCRIPT, [1])
    assert list(LineReader(source, limits)) == SCRIPT_LINES
    assert all(0 < request <= limits.capacity for request in source.requests)
    assert len(source.requests) == len(SCRIPT) + 1  # one byte per read, then the read that says EOF


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"a\r\n", [b"a\r"]),
        (b"\n\n\n", [b"", b"", b""]),
        (b"a\nb", [b"a", b"b"]),
        (b"a\n", [b"a"]),
        (b"\n", [b""]),
        (b"", []),
        (b"\r", [b"\r"]),
    ],
)
def test_line_endings_and_end_of_input(data: bytes, lines: list[bytes]) -> None:
    reader = LineReader(io.BytesIO(data), ReaderLimits(8))
    assert list(reader) == lines
    assert reader.read_line() is None
    assert reader.read_line() is None
    assert reader.poll() is ReaderEvent.END_OF_INPUT


def test_empty_input_reads_as_none() -> None:
    reader = LineReader(io.BytesIO(b""))
    assert reader.read_line() is None
    assert reader.status == ReaderStatus(lines=0, bytes=0, state=ReaderState.EOF)


def test_poll_lines_hands_out_the_buffered_lines_at_once_in_order_and_mixes_with_poll() -> None:
    reader = LineReader()
    assert reader.poll_lines() is ReaderEvent.NEED_DATA
    data = b"a\nb\r\n\ncd\ne\nf"
    reader.writable()[: len(data)] = data
    reader.commit(len(data))
    assert reader.poll() == b"a"
    assert reader.poll_lines() == [b"b\r", b"", b"cd", b"e"]
    assert reader.poll_lines() is ReaderEvent.NEED_DATA
    reader.commit(0)
    assert reader.poll_lines() == [b"f"]
    assert reader.poll_lines() is ReaderEvent.END_OF_INPUT
    assert reader.status == ReaderStatus(6, len(data), ReaderState.EOF)


def test_poll_lines_cuts_at_most_one_batch_of_short_lines_at_a_time_or_one_longer_line() -> None:
    reader = LineReader()
    data = b"x" * 9 + b"\n"
    count = 4 * 1024  # 40 KiB: more than two batches of 16 KiB
    long_line = b"y" * 20_000
    reader.writable()[: len(data) * count] = data * count
    reader.commit(len(data) * count)
    batches = []
    while isinstance(batch := reader.poll_lines(), list):
        batches.append(batch)
    assert [line for batch in batches for line in batch] == [b"x" * 9] * count
    assert all(len(batch) * len(data) <= 16 * 1024 for batch in batches)
    reader.writable()[: len(long_line) + 1] = long_line + b"\n"
    reader.commit(len(long_line) + 1)
    assert reader.poll_lines() == [long_line]


def test_writable_moves_a_partial_line_to_the_front_to_make_room() -> None:
    reader = LineReader(limits=ReaderLimits(4))
    reader.writable()[:5] = b"ab\ncd"
    reader.commit(5)
    assert reader.poll() == b"ab"
    assert reader.poll() is ReaderEvent.NEED_DATA
    view = reader.writable()
    assert len(view) == 3  # "cd" moved to the front
    view[:2] = b"e\n"
    reader.commit(2)
    assert reader.poll() == b"cde"


def test_writable_offers_the_whole_buffer_once_everything_is_consumed() -> None:
    reader = LineReader(limits=ReaderLimits(9))
    reader.writable()[:3] = b"ab\n"
    reader.commit(3)
    assert reader.poll() == b"ab"
    assert len(reader.writable()) == 10


def test_writable_refuses_when_the_buffer_is_full_of_unpolled_lines() -> None:
    reader = LineReader(limits=ReaderLimits(3))
    reader.writable()[:4] = b"a\nb\n"
    reader.commit(4)
    with pytest.raises(ValueError, match="poll"):
        reader.writable()
    assert [reader.poll(), reader.poll(), reader.poll()] == [b"a", b"b", ReaderEvent.NEED_DATA]


@pytest.mark.parametrize("n", [-1, 11])
def test_commit_outside_the_writable_view_is_refused(n: int) -> None:
    reader = LineReader(limits=ReaderLimits(9))
    reader.writable()
    with pytest.raises(ValueError, match="writable"):
        reader.commit(n)
    assert reader.status.bytes == 0


def test_commit_needs_a_fresh_writable_view_each_time() -> None:
    reader = LineReader(limits=ReaderLimits(9))
    reader.writable()[:2] = b"a\n"
    reader.commit(2)
    with pytest.raises(ValueError, match="writable"):
        reader.commit(1)


def test_input_cannot_continue_after_end_of_input() -> None:
    reader = LineReader(limits=ReaderLimits(9))
    reader.commit(0)
    assert reader.status.state is ReaderState.EOF
    with pytest.raises(ValueError, match="end of input"):
        reader.writable()
    with pytest.raises(ValueError, match="end of input"):
        reader.commit(0)
    assert reader.poll() is ReaderEvent.END_OF_INPUT


# -- property ------------------------------------------------------------------------------------------------


def line_data(max_size: int) -> st.SearchStrategy[bytes]:
    joined = st.builds(
        lambda lines, trailing: b"\n".join(lines) + (b"\n" if trailing else b""),
        st.lists(st.binary(max_size=max_size), max_size=12),
        st.booleans(),
    )
    return st.one_of(st.binary(max_size=4 * max_size), joined)


@given(
    max_line=st.integers(1, 12),
    data=line_data(max_size=16),
    sizes=st.lists(st.integers(1, 20), min_size=1, max_size=8),
)
def test_any_chunking_yields_the_lines_of_split_or_stops_at_the_first_overlong_one(
    max_line: int, data: bytes, sizes: list[int]
) -> None:
    limits = ReaderLimits(max_line)
    expected = expected_lines(data)
    overlong = next((i for i, line in enumerate(expected) if len(line) > max_line), None)
    for drive in (drive_sans_io, drive_source, drive_batches):
        lines, error, reader = drive(data, sizes, limits)
        assert reader.buffer_size == limits.capacity
        if overlong is None:
            assert error is None
            assert lines == expected
            assert reader.status == ReaderStatus(len(expected), len(data), ReaderState.EOF)
        else:
            assert lines == expected[:overlong]
            assert error is not None
            assert (error.max_line, error.seen) == (max_line, limits.capacity)
            # Nothing was read past one buffer's worth of the overlong line.
            start_of_overlong = sum(len(line) + 1 for line in expected[:overlong])
            assert reader.status.bytes <= start_of_overlong + limits.capacity
            assert reader.status.state is ReaderState.EXHAUSTED


# -- sources -------------------------------------------------------------------------------------------------


def test_bytes_io_source_counts_lines_and_bytes() -> None:
    reader = LineReader(io.BytesIO(SCRIPT))
    assert list(reader) == SCRIPT_LINES
    assert reader.status == ReaderStatus(lines=5, bytes=len(SCRIPT), state=ReaderState.EOF)


def test_raw_file_source(tmp_path: Path) -> None:
    path = tmp_path / "lines"
    path.write_bytes(SCRIPT)
    with io.FileIO(path) as raw:
        reader = LineReader(raw, ReaderLimits(16))
        assert list(reader) == SCRIPT_LINES
    assert reader.status.bytes == len(SCRIPT)
    assert reader.status.lines == len(SCRIPT_LINES)


def test_fd_source_reads_a_pipe_until_the_writer_closes() -> None:
    lines = [b"%d" % i * (i % 50) for i in range(2000)]
    payload = b"".join(line + b"\n" for line in lines)
    read_fd, write_fd = os.pipe()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
        except BaseException as exc:
            failures.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        reader = LineReader(read_fd, ReaderLimits(1024))
        assert list(reader) == lines
        assert reader.status == ReaderStatus(len(lines), len(payload), ReaderState.EOF)
    finally:
        os.close(read_fd)
        writer.join(JOIN_TIMEOUT)
    assert not writer.is_alive()
    assert failures == []


def test_buffered_pipe_hands_over_a_line_without_waiting_to_fill_the_buffer() -> None:
    read_fd, write_fd = os.pipe()
    got: list[bytes | None] = []
    with os.fdopen(read_fd, "rb") as stdout:
        reader = LineReader(stdout)
        thread = threading.Thread(target=lambda: got.append(reader.read_line()), daemon=True)
        try:
            os.write(write_fd, b"first\n")
            thread.start()
            thread.join(JOIN_TIMEOUT)
            assert got == [b"first"]
        finally:
            os.close(write_fd)  # unblocks the reader if it was waiting for more
            thread.join(JOIN_TIMEOUT)
    assert not thread.is_alive()


def test_read_only_source_is_asked_for_the_room_left() -> None:
    requests: list[int] = []
    data = io.BytesIO(b"abc\nde")

    class ReadOnly:
        def read(self, n: int) -> bytes:
            requests.append(n)
            return data.read(min(n, 2))

    assert list(LineReader(ReadOnly(), ReaderLimits(4))) == [b"abc", b"de"]
    assert all(n <= 5 for n in requests)


def test_read_only_source_that_returns_too_much_is_refused() -> None:
    class Greedy:
        def read(self, n: int) -> bytes:
            return b"x" * (n + 1)

    with pytest.raises(ValueError, match="returned"):
        LineReader(Greedy(), ReaderLimits(4)).read_line()


def test_non_blocking_source_with_nothing_to_give_raises_blocking_io_error() -> None:
    class Empty:
        def readinto(self, view: memoryview) -> int | None:
            return None

    with pytest.raises(BlockingIOError):
        LineReader(Empty()).read_line()


def test_read_line_without_a_source_says_to_use_the_sans_io_methods() -> None:
    reader = LineReader()
    with pytest.raises(TypeError, match="writable"):
        reader.read_line()
    with pytest.raises(TypeError):
        next(iter(reader))


@pytest.mark.parametrize("source", [object(), True, "0", io.StringIO("a\n")])
def test_unusable_sources_are_refused(source: object) -> None:
    with pytest.raises(TypeError):
        LineReader(source)


def test_negative_fd_is_refused() -> None:
    with pytest.raises(ValueError, match="file descriptor"):
        LineReader(-1)


# -- memory --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_gibibyte_without_newline_stops_after_one_buffer_and_the_buffer_never_grows() -> None:
    limits = ReaderLimits(MiB)
    source = RepeatingRaw(b"x" * (64 * KiB), GiB)
    reader = LineReader(source, limits)
    buffer = reader.writable().obj
    assert isinstance(buffer, mmap.mmap)
    assert len(buffer) == reader.buffer_size == limits.capacity
    with allocation_peak() as peak, pytest.raises(ReaderExhaustion) as info:
        reader.read_line()
    assert (info.value.max_line, info.value.seen) == (MiB, limits.capacity)
    assert source.handed_out == limits.capacity
    assert source.largest_request <= limits.capacity
    assert reader.status.bytes == limits.capacity
    assert len(buffer) == reader.buffer_size == limits.capacity
    with pytest.raises(BufferError):
        buffer.resize(2 * limits.capacity)  # the reader's view pins the size
    assert peak[0] < limits.capacity // 4  # no copy of the line was made


@pytest.mark.slow
def test_a_gibibyte_of_lines_passes_through_the_fixed_buffer() -> None:
    limits = ReaderLimits(MiB)
    line = b"y" * (4 * KiB - 1)
    source = RepeatingRaw((line + b"\n") * 16, GiB)
    reader = LineReader(source, limits)
    count = 0
    with allocation_peak() as peak:
        for got in reader:
            if len(got) != len(line):
                pytest.fail(f"line {count} is {len(got)} bytes")
            count += 1
    assert count == GiB // (4 * KiB)
    assert reader.status == ReaderStatus(count, GiB, ReaderState.EOF)
    assert source.largest_request <= limits.capacity
    assert reader.buffer_size == limits.capacity
    assert peak[0] < limits.capacity // 4


@pytest.mark.slow
def test_a_pipe_without_newline_stops_after_one_buffer() -> None:
    limits = ReaderLimits(MiB)
    read_fd, write_fd = os.pipe()
    stop = threading.Event()
    written = [0]
    failures: list[BaseException] = []

    def write() -> None:
        chunk = b"z" * (64 * KiB)
        try:
            while not stop.is_set() and written[0] < GiB:
                written[0] += os.write(write_fd, chunk)
        except BrokenPipeError:
            pass  # the reader closed its end: the expected way out
        except BaseException as exc:
            failures.append(exc)
        finally:
            os.close(write_fd)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        reader = LineReader(read_fd, limits)
        with pytest.raises(ReaderExhaustion) as info:
            reader.read_line()
        assert info.value.seen == limits.capacity
        assert reader.status.bytes == limits.capacity
        assert reader.buffer_size == limits.capacity
    finally:
        stop.set()
        os.close(read_fd)  # a writer blocked on the full pipe gets EPIPE
        writer.join(JOIN_TIMEOUT)
    assert not writer.is_alive()
    assert failures == []
    assert written[0] < GiB


# -- committed pages -----------------------------------------------------------------------------------------

PAGEMAP = Path("/proc/self/pagemap")
needs_pagemap = pytest.mark.skipif(not PAGEMAP.exists(), reason="counting committed pages needs /proc/self/pagemap")


def buffer_of(reader: LineReader) -> mmap.mmap:
    buffer = reader.writable().obj
    assert isinstance(buffer, mmap.mmap)
    return buffer


def committed_pages(buffer: mmap.mmap) -> int:
    """How many of the buffer's pages the kernel has committed (present in RAM), from the page map."""
    anchor = ctypes.c_char.from_buffer(buffer)
    address = ctypes.addressof(anchor)
    del anchor  # releases the export
    page = mmap.PAGESIZE
    count = -(-len(buffer) // page)
    with PAGEMAP.open("rb") as pagemap:
        pagemap.seek(address // page * 8)
        entries = struct.unpack(f"{count}Q", pagemap.read(count * 8))
    return sum(entry >> 63 for entry in entries)  # bit 63: the page is present


def feed(reader: LineReader, data: bytes, chunk: int) -> int:
    """Pass ``data`` through the sans-I/O reader in reads of at most ``chunk`` bytes; count the lines."""
    count = 0
    pos = 0
    while pos < len(data):
        view = reader.writable()
        n = min(len(view), chunk, len(data) - pos)
        view[:n] = data[pos : pos + n]
        reader.commit(n)
        pos += n
        while type(reader.poll()) is bytes:
            count += 1
    return count


@needs_pagemap
def test_a_new_reader_commits_none_of_its_buffer() -> None:
    reader = LineReader(limits=ReaderLimits(8 * MiB))
    assert committed_pages(buffer_of(reader)) == 0


@needs_pagemap
def test_a_long_stream_of_short_lines_keeps_touching_the_same_first_pages() -> None:
    reader = LineReader(limits=ReaderLimits(8 * MiB))
    buffer = buffer_of(reader)
    line = b"s" * 99 + b"\n"
    assert feed(reader, line * (160 * KiB), 64 * KiB) == 160 * KiB  # 16 MiB, twice the buffer
    # One read of 64 KiB plus the partial line moved to the front: 17 pages of 4 KiB, whatever the stream's length.
    assert committed_pages(buffer) * mmap.PAGESIZE <= 128 * KiB


@needs_pagemap
def test_pages_a_long_line_committed_are_given_back_once_it_was_handed_out() -> None:
    reader = LineReader(limits=ReaderLimits(8 * MiB))
    buffer = buffer_of(reader)
    assert feed(reader, b"L" * (4 * MiB) + b"\n", 64 * KiB) == 1
    assert committed_pages(buffer) * mmap.PAGESIZE >= 4 * MiB
    assert feed(reader, b"short\n", 64 * KiB) == 1
    assert committed_pages(buffer) * mmap.PAGESIZE <= 256 * KiB


def test_each_read_asks_for_the_room_left_and_no_more() -> None:
    limits = ReaderLimits(1000)
    line = b"r" * 299 + b"\n"
    source = ChunkedSource(line * 50 + b"x" * 1001, sizes=(700, 300, 1))
    reader = LineReader(source, limits)
    lines = []
    with pytest.raises(ReaderExhaustion):
        while (got := reader.read_line()) is not None:
            lines.append(got)
    assert lines == [line[:-1]] * 50
    assert max(source.requests) <= limits.capacity
    assert reader.status.bytes == sum(len(line) for line in lines) + 50 + limits.capacity


# -- surface -------------------------------------------------------------------------------------------------


def test_public_names() -> None:
    assert tinyacp.reader.__all__ == [
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
    assert all(hasattr(tinyacp.reader, name) for name in tinyacp.reader.__all__)
    assert ReaderExhaustion is _errors.ReaderExhaustion
    assert [s.value for s in ReaderState] == ["open", "eof", "exhausted"]
    assert {e.name for e in ReaderEvent} == {"NEED_DATA", "END_OF_INPUT", "EXHAUSTED"}


def test_module_docstring_example_runs() -> None:
    result = doctest.testmod(tinyacp.reader, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
