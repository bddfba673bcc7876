"""A durable, append-only record of conversations: :class:`JsonlJournal`.

One JSON object per line (JSON Lines), written in the order the client saw or wrote each line. Every line carries
``type`` and ``epoch``; the kinds are::

    {"type":"epoch","epoch":2,"ts":"2026-05-01T09:30:00.123456Z"}
    {"type":"epoch","epoch":3,"ts":"…","sandbox":{"kind":"bubblewrap","bwrap":["--unshare-user",…],…}}
    {"type":"epoch","epoch":4,"ts":"…","trace_id":"<32 hex>"}    (a traced run)
    {"type":"line","epoch":2,"dir":"out","ts":"…","kind":"request","method":"session/prompt","id":2,"len":97,"msg":{…}}
    {"type":"line","epoch":2,"dir":"in","ts":"…","kind":"update","seq":7,"len":180,"msg":{…}}
    {"type":"line","epoch":2,"dir":"in","ts":"…","kind":"permission_request","method":"session/request_permission",
     "id":0,"len":412,"msg":{…}}
    {"type":"line","epoch":2,"dir":"in","ts":"…","kind":"invalid","detail":"not JSON","line":"hello"}
    {"type":"decision","epoch":2,"ts":"…","id":0,"decided_by":"policy","outcome":{…},"reason":"…"}
    {"type":"serve_decision","epoch":2,"ts":"…","id":3,"method":"fs/write_text_file","session_id":"s1",
     "kind":"edit","path":"…","resolved":"…","size":12,"prior":{"exists":true,"size":9,"sha256":"…"},
     "allowed":true,"decided_by":"policy","reason":"…"}

An epoch whose agent ran in a sandbox says so and how in its ``sandbox`` object (``begin_epoch(sandbox=...)``).

``dir`` is ``in`` (the agent wrote it) or ``out`` (the client wrote it). ``kind`` is what the client made of the
line: ``update``, ``permission_request`` or a :class:`~tinyacp.MessageKind` value for the agent's lines;
``request``, ``notification`` or ``response`` for ours. ``seq`` is the update's seq.

The line itself (without its newline) is stored in one of three ways, and its bytes are always recoverable
exactly (:meth:`JsonlJournal.raw`):

* ``msg``: the line as it came, embedded verbatim as a JSON value, always the record's last field, after ``len``
  (its length in bytes, so that a reader takes the bytes back without parsing them). Used for a line that is a
  JSON object from its first byte to its last and valid UTF-8: every update, and any other line that parses.
* ``line``: the line as a JSON string, when it is valid UTF-8 but not such an object (not JSON, a BOM before it,
  whitespace around it, …). Journals written by tinyacp 0.1.0 store every line this way.
* ``line_b64``: its bytes in base64, when it is not valid UTF-8.

The readers (:func:`read_journal`, :func:`iter_journal`, :meth:`JsonlJournal.read`) give every line record as
``line`` or ``line_b64``, whichever way it was stored, so a record's form never depends on the journal's age.

``ts`` is the UTC time the record was made, taken once per write to the file: the records written together (the
lines the client read in one burst, before it acted or waited) share the time of the first of them.

A line of ours that carried :class:`~tinyacp.Secret` values is stored with each one's JSON string replaced by
``"<secret>"``, and its record says how many with ``"redacted": N``: that line is *not* the exact bytes sent.
A request sent with ``force=True`` although the agent did not advertise it has ``"forced": true``; our answer to
an ``elicitation/create`` says who decided it, ``"decided_by"`` (``observer``, ``default-decline``, ``cancelled``),
and so does our answer to a served read, write or ``terminal/create`` (as the ``serve_decision`` before it).
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import msgspec

from ._bounds import MAX_SAFE_INT
from ._errors import UsageError
from ._files import open_regular, open_regular_binary
from ._observer import BaseObserver
from ._permissions import PermissionRequest
from ._records import AgentMessage, OutgoingMessage, Update
from ._serve import ServeRequest

__all__ = ["JournalContents", "JournalLine", "JsonlJournal", "iter_journal", "line_message", "read_journal"]

# Reading backwards for the last epoch: one pipe buffer at a time is plenty for a line of a few hundred bytes.
_BLOCK = 64 * 1024

_PENDING_LIMIT: Final = 256 * 1024
"""Records waiting for the flush point are written at once past this many bytes, so a flood that the client reads
without a pause holds at most this much (and one record) in memory. 256 KiB is one ``write()`` per 1,300 or so
update lines of a streamed reply: the system call's cost is spread thin, and the copy stays within a CPU cache."""

_MSG: Final = b',"msg":'
"""What precedes a line stored verbatim: the record's last field."""

_NO_HEAD: Final[tuple[int | None, bytes]] = (None, b"")
"""No update record can take the hot path: a new batch (its time is not taken yet), or records are not buffered."""

_decode_record = msgspec.json.Decoder(dict[str, Any]).decode
_parse_raw = msgspec.json.Decoder(msgspec.Raw).decode


def timestamp(now: float | None = None) -> str:
    """UTC, ISO 8601, microseconds: sortable as text and readable in a log."""
    global _second  # noqa: PLW0603  one tuple, replaced whole: a thread reads either the old one or the new one
    now = time.time() if now is None else now
    seconds = int(now)
    second = _second
    if second[0] != seconds:  # a batch turn stamps a dozen records within the same second or two
        second = _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{second[1]}.{int((now - seconds) * 1e6):06d}Z"


_second: tuple[int, str] = (-1, "")
"""The last second :func:`timestamp` wrote out, and its text."""


class JsonlJournal(BaseObserver):
    """An observer that makes the record durable: every line in both directions goes to a JSON Lines file.

    Pass it as ``Options(observer=JsonlJournal(path), epoch=journal.begin_epoch())``.

    The promise, record before act: every line is written to the OS (a ``write()`` into the file returned), so
    that it survives a crash of this process, before the client acts on it: before it writes anything to the
    agent (an answer, a permission answer, a request), returns from a call or raises from it, hands an update to a
    stream's consumer, or waits for the agent's next output. A permission decision is also fsync'ed, with every
    line before it, before the answer goes to the agent (so it survives a crash of the machine); ``sync=True``
    writes and fsyncs each line on its own as it is recorded. The journal decides nothing: its
    ``on_permission_request`` returns None.

    How: the client calls :meth:`flush` at its flush point, before each of those acts. From the first call of
    ``flush`` on, the journal keeps the records of the lines read since the last flush in memory and writes them
    in one ``write()`` at the next flush (or as soon as they pass 256 KiB). Until then, and always with
    ``sync=True``, each record is written as it is made. An observer of your own that calls these methods must
    forward ``flush`` too, or leave it out altogether (then every record is written at once, as before the flush
    point existed); a journal shared by several clients must get the flushes of all of them.

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
        self._pending: list[bytes] = []
        """Records not written yet, in order: only between flush points, and only once the client flushes."""
        self._size = 0
        """Their bytes (kept without the lock by the hot path: a count a race may leave off by a record)."""
        self._buffered = False
        """Whether records wait for :meth:`flush` (set by its first call, unless ``sync``)."""
        self._ts = ""
        """The time of the records to be written together."""
        self._head = _NO_HEAD
        """An epoch, and the format of its update records (``ts`` included) while the batch lasts."""
        self._fd, created = _open_for_append(self.path, exclusive=exclusive)
        self._new_entry = _DIRECTORIES.created(self.path) if created else None
        """The file's directory entry, while no fsync of its directory made it durable (see :class:`_Entries`)."""

    # ----------------------------------------------------------------------------------------------------------
    # Epochs.

    def begin_epoch(
        self, *, durable: bool = True, sandbox: Mapping[str, Any] | None = None, trace_id: str | None = None
    ) -> int:
        """Read the last epoch in the file, record the next one (durably, unless told not to) and return it (1 for a
        new file).

        The file is locked (``flock``) meanwhile, so two processes sharing a journal get different epochs.

        Args:
            durable: fsync the epoch record (and, for a new file, its directory entry) before returning. False
                writes it only (it survives a crash of this process): it becomes durable with the journal's next
                fsync, a permission decision's, since an fsync covers every record before it. Until then a crash
                of the machine may lose it together with every later record of the epoch, and the epoch's number
                would be given again. ``sync=True`` fsyncs it all the same.
            sandbox: how the epoch's agent is sandboxed (JSON values: what bwrap was given, which directories are
                writable, the network), recorded as the epoch record's ``sandbox``: whoever reads the journal
                knows what the agent could touch. None: nothing is said.
            trace_id: the run's OpenTelemetry trace id (32 hex characters), kept in the epoch record as
                ``trace_id`` so that a reader of the journal finds the run's trace.

        Raises:
            OSError: the file cannot be read or written.
            UsageError: the journal is closed, or its last epoch is already the largest a client takes
                (2**53 - 1, as ``Options(epoch=)``); nothing is written.
        """
        with self._lock:
            self._check_open()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                if self._pending:
                    self._write_pending()
                epoch = last_epoch(self._fd) + 1
                if epoch > MAX_SAFE_INT:  # a client would refuse it: say so before the record is written
                    raise UsageError(
                        f"{self.path} has no epoch left: its last is {epoch - 1}, and a client takes at most "
                        f"{MAX_SAFE_INT}; start a new journal"
                    )
                record: dict[str, Any] = {"type": "epoch", "epoch": epoch, "ts": self._batch_ts()}
                if sandbox is not None:
                    record["sandbox"] = dict(sandbox)
                if trace_id is not None:
                    record["trace_id"] = trace_id
                self._add(self._encode(record) + b"\n", sync=durable)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return epoch

    # ----------------------------------------------------------------------------------------------------------
    # The observer.

    def on_update(self, update: Update) -> None:
        """Record one update line (``kind`` ``update``, with its ``seq``).

        Raises:
            OSError: writing failed (what was not written stays pending, for the next flush).
            UsageError: the journal is closed.
        """
        # The hot path, taken once a batch has its format for the epoch: the client decoded the line, so it is
        # JSON; an object from its first byte to its last (no BOM, no whitespace around it) in valid UTF-8 is
        # embedded as it is. No lock: list.append is one atomic step, and the writers under the lock take
        # records from the front of the list only, so a record appended meanwhile waits for the next write.
        raw = update.raw
        epoch, head = self._head
        if update.epoch == epoch and raw and raw[0] == 0x7B and raw[-1] == 0x7D and (raw.isascii() or _is_utf8(raw)):
            line = head % (update.seq, len(raw), raw)
            self._pending.append(line)
            self._size += len(line)
            if self._size > _PENDING_LIMIT:
                self._write_out()
            return
        self._update(update)

    def on_permission_request(self, request: PermissionRequest) -> None:
        """Record the request line; decide nothing."""
        record: dict[str, Any] = {"type": "line", "epoch": request.epoch, "dir": "in", "ts": ""}
        record.update(kind="permission_request", method="session/request_permission", id=request.request_id)
        self._line(record, request.raw)

    def on_permission_decision(self, request: PermissionRequest) -> None:
        """Record the decision and fsync it, with every record before it: all of them are on disk before the
        answer is written to the agent."""
        record = {
            "type": "decision",
            "epoch": request.epoch,
            "ts": "",
            "id": request.request_id,
            "decided_by": str(request.decided_by) if request.decided_by is not None else None,
            "outcome": request.outcome,
            "reason": request.reason,
        }
        with self._lock:
            record["ts"] = self._batch_ts()
            self._add(self._encode(record) + b"\n", sync=True)

    def on_serve_decision(self, request: ServeRequest) -> None:
        """Record the decision on a served read, write or command (with a write's prior state) and fsync it, with
        every record before it: all of them are on disk before the client acts."""
        record: dict[str, Any] = {"type": "serve_decision", "epoch": request.epoch, "ts": "", "id": request.request_id}
        record.update(request.record())
        with self._lock:
            record["ts"] = self._batch_ts()
            self._add(self._encode(record) + b"\n", sync=True)

    def on_message(self, message: AgentMessage) -> None:
        """Record any other line of the agent's (responses, requests we do not serve, invalid lines, …)."""
        record: dict[str, Any] = {"type": "line", "epoch": message.epoch, "dir": "in", "ts": ""}
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
        record: dict[str, Any] = {"type": "line", "epoch": message.epoch, "dir": "out", "ts": ""}
        record["kind"] = kind
        if message.method is not None:
            record["method"] = message.method
        if message.id is not None:
            record["id"] = message.id
        if message.forced:
            record["forced"] = True
        if message.decided_by:
            record["decided_by"] = message.decided_by
        if message.secrets:  # never stored: each secret's value is replaced by the marker
            record["redacted"] = len(message.secrets)
            self._line(record, message.redacted())
            return
        self._line(record, message.raw)

    def flush(self) -> None:
        """The flush point: write the records not written yet, in one ``write()``. The client calls it before it
        acts; from its first call on, records wait for it (unless ``sync``).

        Raises:
            OSError: writing failed; what was not written stays pending, for the next flush (or :meth:`close`).
            UsageError: records are pending and the journal is closed.
        """
        with self._lock:
            if not self.sync:
                self._buffered = True
            if self._pending:
                self._write_pending()

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
        """The exact bytes of a ``line`` record's line (without its newline), as the readers give the record.

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
        """Write the records not written yet, then close the file. Idempotent.

        Raises:
            OSError: the pending records could not be written (the file is closed all the same).
        """
        with self._lock:
            if self._fd < 0:
                return
            try:
                if self._pending:
                    self._write_pending()
            finally:
                fd, self._fd = self._fd, -1
                self._buffered = False
                self._head = _NO_HEAD
                self._pending.clear()
                self._size = 0
                os.close(fd)

    def __enter__(self) -> JsonlJournal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:  # dropped without close(): what is pending is written, as well as it can be
            pending = getattr(self, "_pending", None)
            with contextlib.suppress(OSError):
                if pending:
                    os.write(fd, b"".join(pending))
            with contextlib.suppress(OSError):
                os.close(fd)

    def __repr__(self) -> str:
        return f"<tinyacp.JsonlJournal {str(self.path)!r}>"

    # ----------------------------------------------------------------------------------------------------------
    # Writing: every method below but ``_write_out`` runs with the lock held.

    def _update(self, update: Update) -> None:
        """An update off the hot path: the first of a batch (it makes the batch's format), or one that is not
        embedded, or any while records are not buffered."""
        raw = update.raw
        record = {"type": "line", "epoch": update.epoch, "dir": "in", "ts": "", "kind": "update", "seq": 0}
        if not (raw[:1] == b"{" and raw[-1:] == b"}" and _is_utf8(raw)):
            record["seq"] = update.seq
            self._line(record, raw, embed=False)
            return
        with self._lock:
            record["ts"] = self._batch_ts()
            # The record up to its seq (``…"seq":0}`` less ``0}``), then the seq, the length and the line.
            head = self._encode(record)[:-2].replace(b"%", b"%%") + b'%d,"len":%d,"msg":%b}\n'
            if self._buffered:
                self._head = (update.epoch, head)
            self._add(head % (update.seq, len(raw), raw))

    def _line(self, record: dict[str, Any], raw: bytes, *, embed: bool = True) -> None:
        """Record a line: embedded as ``msg`` when it is a JSON object that parses, else as ``line``/``line_b64``."""
        embed = embed and raw[:1] == b"{" and raw[-1:] == b"}" and _is_utf8(raw) and _parses(raw)
        with self._lock:
            record["ts"] = self._batch_ts()
            if embed:
                record["len"] = len(raw)
                data = b"".join((self._encode(record)[:-1], _MSG, raw, b"}\n"))
            else:
                try:
                    record["line"] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    record["line_b64"] = binascii.b2a_base64(raw, newline=False).decode("ascii")
                data = self._encode(record) + b"\n"
            self._add(data)

    def _add(self, data: bytes, *, sync: bool = False) -> None:
        """Append a record; write everything pending at once unless it may wait for the flush point."""
        self._check_open()
        self._pending.append(data)
        self._size += len(data)
        sync = sync or self.sync
        if sync or not self._buffered or self._size > _PENDING_LIMIT:
            self._write_pending(sync=sync)

    def _write_out(self) -> None:
        """The hot path's records passed the limit: write them now."""
        with self._lock:
            if self._pending:
                self._write_pending()

    def _write_pending(self, *, sync: bool = False) -> None:
        """Write every pending record in one ``write()``; what a failed write left out stays pending, in order."""
        pending = self._pending
        fd = self._fd
        if fd < 0:
            pending.clear()
            self._size = 0
            raise UsageError(f"the journal {self.path} is closed")
        count = len(pending)
        data = pending[0] if count == 1 else b"".join(pending[:count])
        written = 0
        try:
            while written < len(data):
                written += os.write(fd, memoryview(data)[written:] if written else data)
        finally:
            # Records the hot path appended meanwhile (another thread) are after ``count``: they stay.
            pending[:count] = [data[written:]] if written < len(data) else []
            self._size = sum(map(len, pending))
            self._head = _NO_HEAD  # the next record starts a batch: it takes the time
        if sync:
            os.fsync(fd)
            entry = self._new_entry
            if entry is not None:  # what was just made durable must be reachable by name
                _DIRECTORIES.make_durable(entry)
                self._new_entry = None

    def _check_open(self) -> None:
        if self._fd < 0:
            raise UsageError(f"the journal {self.path} is closed")

    def _batch_ts(self) -> str:
        """The time of the records written together: taken by the first of them."""
        if not self._pending:
            self._ts = timestamp()
        return self._ts


def _is_utf8(raw: bytes) -> bool:
    if raw.isascii():
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _parses(raw: bytes) -> bool:
    """Whether the line is JSON (any nesting msgspec takes; valid UTF-8 is checked apart)."""
    try:
        _parse_raw(raw)
    except (msgspec.MsgspecError, RecursionError):
        return False
    return True


def _open_for_append(path: Path, *, exclusive: bool = False) -> tuple[int, bool]:
    """Open for appending (and reading back the last epoch), never through a symbolic link and only a regular
    file; a new file is 0600; a torn tail is sealed. Returns the fd and whether the file was created (its
    directory entry is not durable yet: see :class:`_Entries`)."""
    # open_regular: O_NONBLOCK for the open itself, so a FIFO planted under the name is refused, never waited on.
    flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW
    created = True
    try:
        try:
            fd = open_regular(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if exclusive:
                raise
            created = False
            fd = open_regular(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link (O_EXCL fails with EEXIST on a link, even dangling)
            raise OSError(errno.ELOOP, "it is a symbolic link (journals never follow links)", str(path)) from None
        raise
    try:
        if created:
            os.fchmod(fd, 0o600)  # whatever the umask said
        else:
            _seal_torn_tail(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, created


def _seal_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    os.write(fd, b"\n")
    os.fsync(fd)


class _Entries:
    """The new journal files' directory entries, and which of them are durable, for the journals of a process.

    A new file's name must be durable before anything in it is promised to be: an fsync of the file does not make
    its directory entry durable (POSIX), an fsync of the directory does. Every journal defers it to its own first
    fsync (many never make one: a journal whose records only need to be written), and journals in one directory
    share it: an fsync of a directory makes durable every entry made in it before the fsync began. So the files
    get increasing numbers as they are made, and each directory keeps the number its last fsync covered. A batch's
    turns, which make their journals in one directory, need about one directory fsync per two turns at two at a
    time, and fewer the more run at once.
    """

    _REMEMBERED: Final = 256
    """Directories whose last fsync is kept; one forgotten costs an fsync more, never a missed one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made = 0
        """The number of the last file made (in any directory)."""
        self._covered: dict[str, int] = {}
        """Per directory (an absolute path): every file made in it up to this number is durably named."""

    def created(self, path: Path) -> tuple[str, int]:
        """Note a file just created at ``path``; returns its entry, for :meth:`make_durable`."""
        directory = os.path.dirname(os.path.abspath(path))
        with self._lock:
            self._made += 1
            return directory, self._made

    def make_durable(self, entry: tuple[str, int]) -> None:
        """Return once the entry is durable: at once if an fsync of its directory that began after the file was
        made has finished, else after one more."""
        directory, number = entry
        covered = self._covered
        with self._lock:
            if covered.get(directory, 0) >= number:
                return
            upto = self._made  # every file up to this one exists: the fsync below covers them all
        _fsync_dir(Path(directory))
        with self._lock:
            covered[directory] = max(covered.pop(directory, 0), upto)  # last in the dict's order: kept longest
            if len(covered) > self._REMEMBERED:
                del covered[next(iter(covered))]

    def after_fork(self) -> None:
        """In a forked child: a thread of the parent may have held the lock at the fork, and no thread will
        release it here. What is known stays true: a fork writes nothing to disk, nor forgets anything there."""
        self._lock = threading.Lock()


_DIRECTORIES: Final = _Entries()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_DIRECTORIES.after_fork)


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
        fd = open_regular(file)
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
    record = _record(line)
    if record is None:
        return None
    epoch: int = record["epoch"]
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
        OSError: the file cannot be opened or read, or is not a regular file (a FIFO is never waited on).
    """
    with open_regular_binary(path) as file:
        for number, line in enumerate(file, 1):
            if not line.endswith(b"\n"):
                yield JournalLine(number, line, None, torn=True)
                return
            data = line[:-1]
            if data.strip():
                yield JournalLine(number, data, _record(data))


def _record(data: bytes) -> dict[str, Any] | None:
    cut = data.find(_MSG)
    if cut >= 0 and data.endswith(b"}"):
        record = _embedded(data, cut)
        if record is not None:
            return record
    try:
        record = _decode_record(data)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if not isinstance(record.get("type"), str) or type(record.get("epoch")) is not int:
        return None
    if record["type"] == "line" and "msg" in record:
        return None  # its msg is not where its len says: the exact bytes of its line are lost
    return record


def _embedded(data: bytes, cut: int) -> dict[str, Any] | None:
    """A line record whose line is stored as ``msg``, taken back byte for byte without parsing it; None when the
    line is not one (the first ``,"msg":`` is that of a line record's last field: any earlier field is a number
    or a JSON string, and a string holds no unescaped quote)."""
    try:
        record = _decode_record(data[:cut] + b"}")
    except (msgspec.MsgspecError, RecursionError):
        return None
    msg = data[cut + len(_MSG) : -1]
    size = record.pop("len", None)
    if record.get("type") != "line" or type(record.get("epoch")) is not int or "line" in record:
        return None
    if type(size) is not int or size != len(msg) or "line_b64" in record:
        return None
    try:
        record["line"] = msg.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return record


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of range")
    return value


def line_message(record: dict[str, Any]) -> dict[str, Any] | None:
    """The message of a ``line`` record (as the readers give it), parsed as strict JSON (no NaN, no Infinity, no
    number out of range); None when the record holds no line or its line is not such a JSON object. For the
    readers of a journal (``tinyacp show``, ``tinyacp view``): a journal is input, and any line may be anything."""
    try:
        raw = JsonlJournal.raw(record)
        message = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite)
    except (KeyError, ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None
