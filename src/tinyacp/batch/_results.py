"""``results.jsonl``: one record per finished turn, appended by one writer, read back to resume.

The file is only appended to, one ``write()`` per record, so a crash leaves at most a torn last line; opening
the file seals such a tail with a newline (the torn bytes stay a line of their own, which readers skip). An
exclusive ``flock`` on the file keeps a second batch process from writing records into the same directory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import msgspec

from .._errors import BatchBusy
from .._files import open_regular, open_regular_binary
from .._journal import _seal_torn_tail
from ._items import item_key
from ._turn import TurnError, TurnRecord

__all__ = ["FailedItem", "ResultsFile", "journal_directory", "read_results"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class FailedItem:
    """An item whose latest record is not ok, as a summary shows it."""

    id: str | int
    reason: str
    """One line: the error's kind and the first line of its message (``AgentExited: the agent exited ...``;
    the tail of the agent's stderr that follows stays in the record), else the stop reason the agent gave."""
    journal: str
    """The item's journal file (the attempt is its last epoch)."""
    attempt: int


class _Failure(msgspec.Struct):
    """The fields of a record that a summary of failures needs (the reply is not read)."""

    id: str | int
    ok: bool = False
    error: TurnError | None = None
    stop_reason: str | None = None
    journal: str = ""
    attempt: int = 1

    def failed_item(self) -> FailedItem:
        if self.error is not None:
            # The record's message may go on with the agent's stderr (``AgentExited``): a summary line says what
            # happened, and the journal and the record keep the rest.
            first = next((line for line in self.error.message.splitlines() if line.strip()), "")
            reason = f"{self.error.type}: {first}" if first else self.error.type
        elif self.stop_reason is not None:
            reason = f"the agent ended the turn with {self.stop_reason!r}, not 'end_turn'"
        else:
            reason = "no reply"
        return FailedItem(id=self.id, reason=" ".join(reason.split()), journal=self.journal, attempt=self.attempt)


class _Seen(msgspec.Struct):
    """The fields of an earlier record that resuming needs."""

    id: str | int
    ok: bool = False
    attempt: int = 1


_decode_seen = msgspec.json.Decoder(_Seen).decode
_decode_failure = msgspec.json.Decoder(_Failure).decode
_decode_record = msgspec.json.Decoder(TurnRecord).decode
_encode = msgspec.json.Encoder().encode


def read_results(path: str | os.PathLike[str]) -> Iterator[TurnRecord]:
    """The records of a results file, in order; torn or unreadable lines are skipped.

    Raises:
        OSError: the file cannot be read, or is not a regular file (a FIFO is never waited on).
    """
    with open_regular_binary(path) as file:
        for line in file:
            if not line.endswith(b"\n"):
                return  # a torn tail
            try:
                yield _decode_record(line)
            except msgspec.MsgspecError:
                continue


def journal_directory(out: Path) -> Path:
    """``out/journals``, created private (0700) if missing, and refused unless it is a directory of ours that
    no one else may write to: never a symbolic link (which would send every journal elsewhere).

    Raises:
        OSError: it is a link or not a directory (``ENOTDIR``), belongs to another user or is writable by others
            (``EPERM``), or cannot be created.
    """
    path = out / "journals"
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        raise OSError(errno.ENOTDIR, "a symbolic link (journals are never written through one): remove it", str(path))
    if not stat.S_ISDIR(status.st_mode):
        raise OSError(errno.ENOTDIR, "not a directory: move it away", str(path))
    if status.st_uid not in (os.geteuid(), 0):
        raise OSError(errno.EPERM, f"it belongs to another user (uid {status.st_uid}): remove it", str(path))
    if status.st_mode & 0o022:
        mode = f"{stat.S_IMODE(status.st_mode):04o}"
        raise OSError(errno.EPERM, f"others can write to it (mode {mode}): run `chmod go-w` on it", str(path))
    return path


class ResultsFile:
    """The results file of one output directory, held by this process alone while it is open.

    Raises:
        BatchBusy: another process holds it.
        OSError: it cannot be opened or created, or is not a regular file (a FIFO is never waited on).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # Never through a symbolic link, as the journals: the directory may be shared with other people.
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        self._fd = open_regular(path, flags, 0o600)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BatchBusy(
                    f"another tinyacp batch is writing to {path}; wait for it or use another out_dir"
                ) from None
            _seal_torn_tail(self._fd)  # only once we hold the lock: no writer is mid-line now
        except BaseException:
            os.close(self._fd)
            raise

    def outcomes(self) -> dict[str, int]:
        """The latest outcome of every id on file: its attempt number, negative when that record is not ok.

        Raises:
            OSError: the file cannot be read.
        """
        latest: dict[str, int] = {}
        for seen in self._decoded(_decode_seen):
            latest[item_key(seen.id)] = seen.attempt if seen.ok else -seen.attempt
        return latest

    def _decoded(self, decode: Callable[[bytes], _T]) -> Iterator[_T]:
        """Each line of the file this object holds (never the name again: it could be replaced), decoded; a
        sealed torn line, or a line that is not ours, is skipped."""
        with os.fdopen(os.dup(self._fd), "rb") as file:
            file.seek(0)
            for line in file:
                try:
                    yield decode(line)
                except msgspec.MsgspecError:
                    continue

    def failures(self, keys: set[str], limit: int) -> list[FailedItem]:
        """The latest records of the first ``limit`` of the failed ids ``keys``, in the order they first failed.

        One pass over the file, holding at most ``limit`` records (without their replies).

        Raises:
            OSError: the file cannot be read.
        """
        kept: dict[str, _Failure] = {}
        if not keys or limit <= 0:
            return []
        for record in self._decoded(_decode_failure):
            key = item_key(record.id)
            if key in keys and (key in kept or len(kept) < limit):
                kept[key] = record
        return [record.failed_item() for record in kept.values() if not record.ok]

    def append(self, record: TurnRecord) -> bytes:
        """Write one record as one line, in one ``write()``; returns the line.

        Raises:
            OSError: the write failed.
        """
        line = _encode(record) + b"\n"
        written = os.write(self._fd, line)
        if written != len(line):  # a full disk: finish the line so the next record starts on its own
            os.write(self._fd, line[written:])
        return line

    def close(self) -> None:
        """Release the file (and the lock). Idempotent."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
