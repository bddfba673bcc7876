"""The sessions this machine ran, so that ``--continue`` finds the most recent one of an agent in a directory.

A small JSON Lines file in the state directory (``sessions.jsonl``), one line per session opened or continued:
agent, working directory, session id, journal, time and the first words of the prompt. It is kept small: past
``_COMPACT_AT`` bytes it is rewritten with its last ``_KEEP`` lines. A torn or unreadable line is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ._dirs import private_dir, state_dir

__all__ = ["SessionEntry", "SessionIndex"]

_KEEP = 500
_COMPACT_AT = 256 * 1024
_READ_AT_MOST = 1024 * 1024
"""However the file grew (another program wrote it), reading it costs at most this much."""


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
            OSError: the file cannot be written.
        """
        entry = SessionEntry(agent, str(cwd), session_id, time.time(), str(journal) if journal else None, title[:80])
        line = (json.dumps(asdict(entry), ensure_ascii=True) + "\n").encode("ascii")
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line)  # one write of one short line: appends from two runs never interleave
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > _COMPACT_AT:
            self._compact()

    def entries(self, agent: str | None = None, cwd: Path | None = None) -> list[SessionEntry]:
        """The sessions recorded, most recent first, each session once; only ``agent``'s or ``cwd``'s when given."""
        seen: set[tuple[str, str, str]] = set()
        found = []
        for entry in reversed(self._read()):
            key = (entry.agent, entry.cwd, entry.session_id)
            if key in seen:
                continue
            seen.add(key)
            if (agent is None or entry.agent == agent) and (cwd is None or entry.cwd == str(cwd)):
                found.append(entry)
        return found

    def latest(self, agent: str, cwd: Path) -> SessionEntry | None:
        """The most recent session of ``agent`` in ``cwd``, if this machine ran one."""
        found = self.entries(agent, cwd)
        return found[0] if found else None

    def _read(self) -> list[SessionEntry]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > _READ_AT_MOST:
                file.seek(size - _READ_AT_MOST)
                file.readline()  # the first line read from the middle is torn
            data = file.read(_READ_AT_MOST)
        entries = []
        for line in data.splitlines():
            with contextlib.suppress(ValueError, TypeError, KeyError):
                fields = json.loads(line)
                entry = SessionEntry(
                    agent=str(fields["agent"]),
                    cwd=str(fields["cwd"]),
                    session_id=str(fields["session_id"]),
                    time=float(fields["time"]),
                    journal=fields.get("journal") if isinstance(fields.get("journal"), str) else None,
                    title=str(fields.get("title", "")),
                )
                entries.append(entry)
        return entries

    def _compact(self) -> None:
        entries = self._read()[-_KEEP:]
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        data = "".join(json.dumps(asdict(entry), ensure_ascii=True) + "\n" for entry in entries)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(data)
        os.replace(temporary, self.path)
