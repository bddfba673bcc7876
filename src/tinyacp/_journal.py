"""A durable, append-only record of conversations: :class:`JsonlJournal`.

One JSON object per line (JSON Lines), written in the order the client saw or wrote each line. Every line carries
``type`` and ``epoch``; the kinds are::

    {"type":"epoch","epoch":2,"ts":"2026-05-01T09:30:00.123456Z"}
    {"type":"line","epoch":2,"dir":"out","ts":"…","kind":"request","method":"session/prompt","id":2,"line":"{…}"}
    {"type":"line","epoch":2,"dir":"in","ts":"…","kind":"update","seq":7,"line":"{…}"}
    {"type":"line","epoch":2,"dir":"in","ts":"…","kind":"permission_request","method":"session/request_permission",
     "id":0,"line":"{…}"}
    {"type":"decision","epoch":2,"ts":"…","id":0,"decided_by":"policy","outcome":{…},"reason":"…"}

``dir`` is ``in`` (the agent wrote it) or ``out`` (the client wrote it). ``kind`` is what the client made of the
line: ``update``, ``permission_request`` or a :class:`~tinyacp.MessageKind` value for the agent's lines;
``request``, ``notification`` or ``response`` for ours. ``seq`` is the update's seq. ``line`` is the exact line,
without its newline, when it is valid UTF-8; otherwise ``line_b64`` holds its bytes in base64. Either way the
bytes are recoverable exactly (:meth:`JsonlJournal.raw`). ``ts`` is the UTC time the line was recorded.

A line of ours that carried :class:`~tinyacp.Secret` values is stored with each one's JSON string replaced by
``"<secret>"``, and its record says how many with ``"redacted": N``: that line is *not* the exact bytes sent.
A request sent with ``force=True`` although the agent did not advertise it has ``"forced": true``.
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from ._errors import UsageError
from ._observer import BaseObserver
from ._permissions import PermissionRequest
from ._records import AgentMessage, OutgoingMessage, Update

__all__ = ["JournalContents", "JournalLine", "JsonlJournal", "iter_journal", "read_journal"]

# Reading backwards for the last epoch: one pipe buffer at a time is plenty for a line of a few hundred bytes.
_BLOCK = 64 * 1024


class _EpochProbe(msgspec.Struct):
    epoch: int


_probe_epoch = msgspec.json.Decoder(_EpochProbe).decode
_decode_record = msgspec.json.Decoder(dict[str, Any]).decode


def timestamp(now: float | None = None) -> str:
    """UTC, ISO 8601, microseconds: sortable as text and readable in a log."""
    now = time.time() if now is None else now
    seconds = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((now - seconds) * 1e6):06d}Z"


class JsonlJournal(BaseObserver):
    """An observer that makes the record durable: every line in both directions goes to a JSON Lines file.

    Pass it as ``Options(observer=JsonlJournal(path), epoch=journal.begin_epoch())``, or call its methods
    from your own observer. Each callback returns only after its line is written to the file (so it survives
    a crash of this process); a permission decision is also fsync'ed before the answer goes out (so it survives
    a crash of the machine). ``sync=True`` fsyncs every line. The journal decides nothing: its
    ``on_permission_request`` returns None.

    The file is only ever appended to. It is created readable by its owner only (0600): it holds prompts,
    file contents and tool output. If the last line of an existing file is torn (a crash mid-write), the journal
    ends it with a newline before appending, so the torn bytes stay a line of their own, which readers skip.
    The journal never follows a symbolic link (``O_NOFOLLOW``) and writes only to a regular file, so a link planted
    under its name cannot redirect the record elsewhere.

    Args:
        path: the file; created if missing.
        sync: fsync after every line, not only after decisions and epochs.
        exclusive: create the file, which must not exist yet (``O_CREAT|O_EXCL``): for a new file per run.

    Raises:
        FileExistsError: ``exclusive`` and the path exists (as anything, a link included).
        OSError: the file cannot be opened or created, is a symbolic link (``ELOOP``), or is not a regular file.
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: bool = False, exclusive: bool = False) -> None:
        self.path = Path(path)
        self.sync = sync
        self._lock = threading.Lock()
        self._encode = msgspec.json.Encoder().encode
        self._fd = _open_for_append(self.path, exclusive=exclusive)

    # ----------------------------------------------------------------------------------------------------------
    # Epochs.

    def begin_epoch(self) -> int:
        """Read the last epoch in the file, record the next one durably, and return it (1 for a new file).

        The file is locked (``flock``) meanwhile, so two processes sharing a journal get different epochs.

        Raises:
            OSError: the file cannot be read or written.
        """
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                epoch = last_epoch(self._fd) + 1
                self._write({"type": "epoch", "epoch": epoch, "ts": timestamp()}, sync=True)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return epoch

    # ----------------------------------------------------------------------------------------------------------
    # The observer.

    def on_update(self, update: Update) -> None:
        """Record one update line (``kind`` ``update``, with its ``seq``)."""
        record = {"type": "line", "epoch": update.epoch, "dir": "in", "ts": timestamp(), "kind": "update"}
        record["seq"] = update.seq
        self._line(record, update.raw)

    def on_permission_request(self, request: PermissionRequest) -> None:
        """Record the request line; decide nothing."""
        record = {"type": "line", "epoch": request.epoch, "dir": "in", "ts": timestamp()}
        record.update(kind="permission_request", method="session/request_permission", id=request.request_id)
        self._line(record, request.raw)

    def on_permission_decision(self, request: PermissionRequest) -> None:
        """Record the decision and fsync it: it is on disk before the answer is written to the agent."""
        record = {
            "type": "decision",
            "epoch": request.epoch,
            "ts": timestamp(),
            "id": request.request_id,
            "decided_by": str(request.decided_by) if request.decided_by is not None else None,
            "outcome": request.outcome,
            "reason": request.reason,
        }
        with self._lock:
            self._write(record, sync=True)

    def on_message(self, message: AgentMessage) -> None:
        """Record any other line of the agent's (responses, requests we do not serve, invalid lines, …)."""
        record: dict[str, Any] = {"type": "line", "epoch": message.epoch, "dir": "in", "ts": timestamp()}
        record["kind"] = str(message.kind)
        if message.method is not None:
            record["method"] = message.method
        if message.id is not None:
            record["id"] = message.id
        if message.detail:
            record["detail"] = message.detail
        self._line(record, message.raw)

    def on_send(self, message: OutgoingMessage) -> None:
        """Record a line of ours before it is written to the agent."""
        kind = "response" if message.method is None else "notification" if message.id is None else "request"
        record: dict[str, Any] = {"type": "line", "epoch": message.epoch, "dir": "out", "ts": timestamp()}
        record["kind"] = kind
        if message.method is not None:
            record["method"] = message.method
        if message.id is not None:
            record["id"] = message.id
        if message.forced:
            record["forced"] = True
        if message.secrets:  # never stored: each secret's value is replaced by the marker
            record["redacted"] = len(message.secrets)
            self._line(record, message.redacted())
            return
        self._line(record, message.raw)

    # ----------------------------------------------------------------------------------------------------------
    # Reading.

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """The records of a journal file, in order; a torn or unreadable line is left out.

        Raises:
            OSError: the file cannot be read.
        """
        return read_journal(path).records

    @staticmethod
    def raw(record: dict[str, Any]) -> bytes:
        """The exact bytes of a ``line`` record's line (without its newline).

        Raises:
            KeyError: the record holds no line.
            ValueError: the record's line is not a string, or not valid base64.
        """
        if "line" in record:
            line = record["line"]
            if not isinstance(line, str):
                raise ValueError("the record's line is not a string")
            return line.encode("utf-8", "surrogatepass")
        data = record["line_b64"]
        if not isinstance(data, str):
            raise ValueError("the record's line_b64 is not a string")
        import base64  # here: it imports struct, which the command's start does not need

        try:
            return base64.b64decode(data, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"the record's line_b64 is not base64: {exc}") from None

    # ----------------------------------------------------------------------------------------------------------
    # The file.

    def close(self) -> None:
        """Close the file. Idempotent."""
        with self._lock:
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                os.close(fd)

    def __enter__(self) -> JsonlJournal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __repr__(self) -> str:
        return f"<tinyacp.JsonlJournal {str(self.path)!r}>"

    def _line(self, record: dict[str, Any], raw: bytes) -> None:
        try:
            record["line"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            record["line_b64"] = binascii.b2a_base64(raw, newline=False).decode("ascii")
        with self._lock:
            self._write(record, sync=self.sync)

    def _write(self, record: dict[str, Any], *, sync: bool) -> None:
        if self._fd < 0:
            raise UsageError(f"the journal {self.path} is closed")
        data = memoryview(self._encode(record) + b"\n")
        while data:
            data = data[os.write(self._fd, data) :]
        if sync:
            os.fsync(self._fd)


def _open_for_append(path: Path, *, exclusive: bool = False) -> int:
    """Open for appending (and reading back the last epoch), never through a symbolic link and only a regular
    file; a new file is 0600 and its directory entry is fsync'ed; a torn tail is sealed."""
    # O_NONBLOCK only for the open itself: a FIFO planted under the name must not block us; it is refused below.
    flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    created = True
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if exclusive:
                raise
            created = False
            fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link (O_EXCL fails with EEXIST on a link, even dangling)
            raise OSError(errno.ELOOP, "it is a symbolic link (journals never follow links)", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        if created:
            os.fchmod(fd, 0o600)  # whatever the umask said
            _fsync_dir(path.parent)
        else:
            _seal_torn_tail(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _seal_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    os.write(fd, b"\n")
    os.fsync(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # not every file system lets a directory be opened; the file itself is still written
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def last_epoch(file: int | str | os.PathLike[str]) -> int:
    """The epoch of the last complete, readable line of the file; 0 for an empty or missing file.

    Args:
        file: a path, or a file descriptor open for reading (read with ``pread``: its offset does not move).

    The file is read backwards from its end, so this costs one block for a journal of any size.
    """
    if isinstance(file, int):
        return _last_epoch(file)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        return _last_epoch(fd)
    finally:
        os.close(fd)


def _last_epoch(fd: int) -> int:
    position = os.fstat(fd).st_size
    pending = b""  # the end part of a line whose start is not read yet
    in_tail = True  # still in the bytes after the last newline: a torn line, or nothing
    while position > 0:
        step = min(_BLOCK, position)
        position -= step
        block = os.pread(fd, step, position)
        if in_tail:
            cut = block.rfind(b"\n")
            if cut < 0:
                continue
            block = block[:cut]
            in_tail = False
        lines = (block + pending).split(b"\n")
        pending = lines.pop(0) if position > 0 else b""
        for line in reversed(lines):
            epoch = _epoch_of(line)
            if epoch is not None:
                return epoch
    return 0


def _epoch_of(line: bytes) -> int | None:
    try:
        epoch = _probe_epoch(line).epoch
    except (msgspec.MsgspecError, RecursionError):
        return None
    return epoch if epoch >= 0 else None


@dataclass
class JournalContents:
    """A journal file as read: its records, and what was left out."""

    records: list[dict[str, Any]] = field(default_factory=list)
    torn: bytes | None = None
    """The torn last line (bytes after the last newline), if the file has one."""
    unreadable: list[int] = field(default_factory=list)
    """Line numbers (from 1) of complete lines that are not JSON objects: torn lines sealed by a later run."""


def read_journal(path: str | os.PathLike[str]) -> JournalContents:
    """Read a whole journal. A torn last line is reported in ``torn``, never merged with anything.

    Raises:
        OSError: the file cannot be read.
    """
    contents = JournalContents()
    for line in iter_journal(path):
        if line.torn:
            contents.torn = line.data
        elif line.record is None:
            contents.unreadable.append(line.number)
        else:
            contents.records.append(line.record)
    return contents


@dataclass(frozen=True)
class JournalLine:
    """One line of a journal file, as :func:`iter_journal` read it."""

    number: int
    """The line number, from 1."""
    data: bytes
    """The line's bytes, without its newline."""
    record: dict[str, Any] | None
    """The record; None for a line that is not one (not a JSON object with a string ``type`` and an integer
    ``epoch``, nested too deep, …) and for a torn line."""
    torn: bool = False
    """The last line, with no newline after it: a write cut short."""


def iter_journal(path: str | os.PathLike[str]) -> Iterator[JournalLine]:
    """The lines of a journal file, in order, read as they come: memory is bounded by the longest line, whatever
    the size of the file. Blank lines are skipped.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as file:
        for number, line in enumerate(file, 1):
            if not line.endswith(b"\n"):
                yield JournalLine(number, line, None, torn=True)
                return
            data = line[:-1]
            if data.strip():
                yield JournalLine(number, data, _record(data))


def _record(data: bytes) -> dict[str, Any] | None:
    try:
        record = _decode_record(data)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if not isinstance(record.get("type"), str) or type(record.get("epoch")) is not int:
        return None
    return record
