"""The sessions this machine ran, so that ``--continue`` finds the most recent one of an agent in a directory.

A small JSON Lines file in the state directory (``sessions.jsonl``), one line per session opened or continued:
agent, working directory, session id, journal, time and the first words of the prompt. It is kept small: past
``_COMPACT_AT`` bytes it is rewritten with its last ``_KEEP`` sessions, in at most half as many bytes, so that the
next compaction is many writes away. A torn, damaged or overlong line is skipped, never read as a session and never
the cause of losing the others: the file is read backwards from its end, a line at most ``_MAX_LINE`` long at a
time. A write that meets a file another run just compacted follows it to the new file; it is never dropped
silently. An entry that would be longer than ``_MAX_LINE`` (an agent's session id of a megabyte) is not noted at
all, and the caller is told.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ..._files import open_regular
from ._dirs import private_dir, state_dir

__all__ = ["NotIndexed", "SessionEntry", "SessionIndex"]

_KEEP = 500
_COMPACT_AT = 1024 * 1024
_MAX_ID = 4096
"""The longest session id noted (ids are UUIDs or short names; a longer one is not from an honest agent)."""
_MAX_LINE = 16 * 1024
"""The longest line read or written: an id, a working directory (PATH_MAX is 4096), a journal path, a title."""
_SCAN_AT_MOST = 4 * 1024 * 1024
"""However the file grew (another program wrote it), reading it costs at most this much."""
_BLOCK = 64 * 1024
_LATEST_TIME = 1e11
"""A time past the year 5000 is not one this machine wrote (and would not fit a date on screen)."""
_LOCK_TRIES = 50
_LOCK_PAUSE = 0.02
"""An index locked for a second by someone else is written without compacting, never waited on for ever."""
_REOPEN_TRIES = 20
"""How often a write follows the file to its new inode when other runs keep compacting it under us."""


class NotIndexed(OSError):
    """The session cannot be noted in the index (its id or its entry is too long); an OSError, so a caller that
    handles "cannot write the index" handles this too."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class SessionEntry:
    """One session tinyacp ran."""

    agent: str
    cwd: str
    session_id: str
    time: float
    journal: str | None = None
    title: str = ""


class SessionIndex:
    """The index file; ``path`` defaults to ``sessions.jsonl`` in the state directory."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else state_dir() / "sessions.jsonl"

    def record(self, agent: str, cwd: Path, session_id: str, journal: Path | None, title: str = "") -> None:
        """Note a session as the most recent of ``agent`` in ``cwd``.

        Raises:
            NotIndexed: the session id is longer than 4096 characters, or the entry than 16 KiB; nothing is
                written.
            OSError: the file cannot be written, or is not a regular file.
        """
        if len(session_id) > _MAX_ID:
            raise NotIndexed(
                f"the agent's session id is {len(session_id)} characters long, more than the {_MAX_ID} the index "
                "keeps: this session is not noted for --continue (use --session ID)"
            )
        entry = SessionEntry(agent, str(cwd), session_id, time.time(), str(journal) if journal else None, title[:80])
        line = (json.dumps(asdict(entry), ensure_ascii=True) + "\n").encode("ascii")
        if len(line) > _MAX_LINE:
            raise NotIndexed(
                f"the session's entry would be {len(line)} bytes long, more than the {_MAX_LINE} the index keeps "
                "(a very long agent command line or directory): it is not noted for --continue"
            )
        private_dir(self.path.parent)
        for _ in range(_REOPEN_TRIES):  # a compaction by another run may replace the file between open and lock
            fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                locked = _lock(fd)
                if locked and not _same_file(fd, self.path):
                    continue
                size = os.fstat(fd).st_size
                torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # a run cut short: seal its line
                os.write(fd, b"\n" + line if torn else line)  # one write: appends from two runs never interleave
                if locked and os.fstat(fd).st_size > _COMPACT_AT:
                    self._compact(fd)
                return
            finally:
                os.close(fd)  # releases the lock
        raise OSError(f"{self.path}: other runs kept replacing the index; this session is not noted for --continue")

    def entries(self, agent: str | None = None, cwd: Path | None = None) -> list[SessionEntry]:
        """The sessions recorded, most recent first, each session once; only ``agent``'s or ``cwd``'s when given.

        Raises:
            OSError: the file exists but is not a regular file.
        """
        seen: set[tuple[str, str, str]] = set()
        found = []
        for entry in self._read():
            key = (entry.agent, entry.cwd, entry.session_id)
            if key in seen:
                continue
            seen.add(key)
            if (agent is None or entry.agent == agent) and (cwd is None or entry.cwd == str(cwd)):
                found.append(entry)
        return found

    def latest(self, agent: str, cwd: Path) -> SessionEntry | None:
        """The most recent session of ``agent`` in ``cwd``, if this machine ran one.

        Raises:
            OSError: the file exists but is not a regular file.
        """
        found = self.entries(agent, cwd)
        return found[0] if found else None

    def _read(self) -> list[SessionEntry]:
        """The entries, most recent first."""
        try:
            fd = open_regular(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, PermissionError):
            return []
        try:
            return _entries(fd)
        finally:
            os.close(fd)

    def _compact(self, fd: int) -> None:
        """Rewrite the file with its last ``_KEEP`` sessions, in at most half of ``_COMPACT_AT`` bytes (so that
        the next compaction is many writes away, never the next write); called with the file locked."""
        lines: list[str] = []
        size = 0
        for entry in _entries(fd)[:_KEEP]:
            line = json.dumps(asdict(entry), ensure_ascii=True) + "\n"
            size += len(line)
            if size > _COMPACT_AT // 2 and lines:
                break
            lines.append(line)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        data = "".join(reversed(lines))
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(out, "w", encoding="ascii") as file:
            file.write(data)
        os.replace(temporary, self.path)


def _lock(fd: int) -> bool:
    """Take the file's lock, waiting a second at most; False if someone holds it longer."""
    for _ in range(_LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(_LOCK_PAUSE)
            continue
        return True
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        status = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (status.st_dev, status.st_ino)


def _entries(fd: int) -> list[SessionEntry]:
    """The readable entries of the file, most recent first."""
    entries = []
    for line in _lines_backwards(fd):
        entry = _entry(line)
        if entry is not None:
            entries.append(entry)
    return entries


def _lines_backwards(fd: int) -> Iterator[bytes]:
    """The complete lines of the last ``_SCAN_AT_MOST`` bytes, last first, each at most ``_MAX_LINE`` long: a
    torn last line, a line cut by the start of the window and a longer line are left out (and a longer line is
    never held in memory)."""
    position = os.fstat(fd).st_size
    start = max(0, position - _SCAN_AT_MOST)
    pending, skipping, torn = b"", False, True  # the bytes after the last newline are a torn line, or nothing
    while position > start:
        step = min(_BLOCK, position - start)
        position -= step
        parts = os.pread(fd, step, position).split(b"\n")
        for part in reversed(parts[1:]):
            line, pending = part + pending, b""
            if not torn and not skipping:
                yield line
            torn = skipping = False
        pending = parts[0] + pending
        if len(pending) > _MAX_LINE:
            pending, skipping = b"", True
    if position == 0 and not torn and not skipping:
        yield pending


def _entry(line: bytes) -> SessionEntry | None:
    """The entry of one line; None for a line that is not one (damaged, or written by something else)."""
    with contextlib.suppress(ValueError, RecursionError, OverflowError):
        fields = json.loads(line, parse_constant=_no_constant) if line.strip() else None
        if not isinstance(fields, dict):
            return None
        agent, cwd, session_id = fields.get("agent"), fields.get("cwd"), fields.get("session_id")
        journal, title, when = fields.get("journal"), fields.get("title", ""), fields.get("time")
        if not (isinstance(agent, str) and isinstance(cwd, str) and isinstance(session_id, str)):
            return None
        seconds = _seconds(when)
        if seconds is None or not isinstance(title, str) or len(session_id) > _MAX_ID:
            return None
        return SessionEntry(agent, cwd, session_id, seconds, journal if isinstance(journal, str) else None, title)
    return None


def _seconds(when: object) -> float | None:
    """A time this machine could have written (a finite number of seconds before the year 5000), or None."""
    if not isinstance(when, int | float) or isinstance(when, bool):
        return None
    seconds = float(when)  # a 400-digit int raises OverflowError here
    return seconds if math.isfinite(seconds) and 0 <= seconds < _LATEST_TIME else None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a time")
