"""The journals of ``tinyacp prompt`` and ``chat``: ``tinyacp journals`` lists them, ``--prune`` removes old ones,
and ``tinyacp show last`` / ``show SESSION_ID`` find one without its path.

Every run writes a journal to the journal directory by default, so they accumulate. Pruning touches that one
directory only: its direct entries, through a descriptor of the directory checked as private, each a regular
``*.jsonl`` file (a symbolic link, a directory or anything else there is left alone and named), unlinked by name
relative to that descriptor, so nothing outside the directory can be reached whatever is planted in it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..shared._dirs import check_private, journal_dir
from ..shared._display import one_line
from ..shared._exit import UsageProblem
from ..shared._index import SessionEntry, SessionIndex

__all__ = ["JournalFile", "cmd_journals", "journal_named", "parse_age", "resolve_journal", "show_note"]

LAST = "last"

_NAME = re.compile(r"(\d{8}T\d{6}Z)-(.+)-[0-9a-f]{16}\.jsonl")
"""How the command names a journal it creates: the UTC time, the agent's name, a random part."""

_AGE = re.compile(r"([-+]?)(\d+)\s*([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_AGE_DAYS = 36_500
"""The oldest age ``--older-than`` takes (100 years): every journal is younger (the clock starts in 1970), so a
larger one means nothing; refused like every number no one means, never an overflow."""


@dataclass(frozen=True)
class JournalFile:
    """One journal of the journal directory."""

    path: Path
    size: int
    mtime: float
    agent: str
    session_id: str | None


def parse_age(text: str) -> int:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s``: seconds, from 0 to :data:`MAX_AGE_DAYS` days.

    Raises:
        UsageProblem: not such an age, a negative one, or one past :data:`MAX_AGE_DAYS` days.
    """
    match = _AGE.fullmatch(text.strip().lower())
    shown = one_line(text, 40)
    if match is None:
        raise UsageProblem(f"--older-than {shown!r}: expected a number and a unit, as 30d, 12h, 90m, 2w or 45s")
    sign, digits, unit = match.groups()
    if sign == "-":
        raise UsageProblem(
            f"--older-than {shown!r}: an age counts back from now, so it cannot be negative (a negative age would "
            "be a time still to come)"
        )
    limit = MAX_AGE_DAYS * _UNIT["d"]
    # Compared by length first: int() of 5,000 digits is refused by Python itself, and 400 digits are no age.
    if len(digits.lstrip("0")) > len(str(limit)) or int(digits) * _UNIT[unit] > limit:
        raise UsageProblem(f"--older-than {shown!r}: an age must be at most {MAX_AGE_DAYS:,}d (100 years)")
    return int(digits) * _UNIT[unit]


def _listing(directory: Path) -> tuple[list[JournalFile], list[str]]:
    """The journals in ``directory``, newest first, and the entries that are not journals (links, directories, ...)."""
    sessions = {entry.journal: entry for entry in reversed(_index_entries()) if entry.journal}
    found: list[JournalFile] = []
    others: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return [], []
    for entry in entries:
        status = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(status.st_mode) or not entry.name.endswith(".jsonl"):
            others.append(entry.name)
            continue
        path = directory / entry.name
        session = sessions.get(str(path))
        named = _NAME.fullmatch(entry.name)
        agent = session.agent if session is not None else (named[2] if named else "?")
        found.append(JournalFile(path, status.st_size, status.st_mtime, agent, session.session_id if session else None))
    found.sort(key=lambda journal: journal.mtime, reverse=True)
    return found, sorted(others)


def _index_entries() -> list[SessionEntry]:
    try:
        return SessionIndex().entries()
    except OSError:
        return []


def journal_named(name: str) -> Path | None:
    """The journal of the journal directory with this bare file name (as ``tinyacp journals`` prints it), when
    there is one; None for a name with a directory part, or none there."""
    if not name or os.sep in name or name in (".", "..") or (os.altsep and os.altsep in name):
        return None
    path = journal_dir() / name
    return path if path.is_file() else None


def resolve_journal(given: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """The journal ``tinyacp show`` is asked for: a path as given; a journal's name as ``tinyacp journals`` prints
    it; ``last``, the most recent journal; a session id, the latest journal of that session. Returns the path and,
    when it was found by a name, a note saying which.

    Raises:
        UsageProblem: neither a file, ``last``, nor a session this machine ran with a journal.
    """
    name = os.fspath(given)
    path = Path(name)
    if path.exists() or os.sep in name:
        return path, None
    named = journal_named(name)
    if named is not None:
        return named, f"the journal {named}"
    if name == LAST:
        candidates = [journal.path for journal in _listing(journal_dir())[0][:1]]
        candidates += [Path(entry.journal) for entry in _index_entries()[:1] if entry.journal]
        existing = [candidate for candidate in candidates if candidate.is_file()]
        if not existing:
            raise UsageProblem("no journal yet: `tinyacp prompt` writes one per run")
        latest = max(existing, key=lambda candidate: candidate.stat().st_mtime)
        return latest, f"the latest journal: {latest}"
    gone: list[str] = []
    for entry in _index_entries():  # most recent first
        if entry.session_id == name and entry.journal:
            if Path(entry.journal).is_file():
                return Path(entry.journal), f"the latest journal of session {one_line(name, 80)}: {entry.journal}"
            gone.append(entry.journal)
    if gone:
        raise UsageProblem(
            f"the journal of session {one_line(name, 80)} is gone (pruned or moved): {one_line(gone[0], 300)}"
        )
    raise UsageProblem(
        f"{one_line(name, 200)}: no such file, and no session this machine ran with that id has a journal "
        "(`tinyacp sessions` lists the sessions, `tinyacp journals` the journals, `tinyacp show last` the latest)"
    )


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def _age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{int(seconds // length)}{unit}"
    return f"{max(0, int(seconds))}s"


def cmd_journals(args: argparse.Namespace) -> int:
    """``tinyacp journals [--prune (--older-than AGE | --all) [--dry-run]]``."""
    directory = journal_dir()
    if args.prune or args.older_than is not None or args.dry_run or args.all:
        return _prune(directory, _prune_age(args), dry_run=args.dry_run)
    journals, others = _listing(directory)
    found = len(journals)
    journals = journals[: args.limit]
    now = time.time()
    if args.format == "json":
        document = [
            {
                "path": str(j.path),
                "size": j.size,
                "mtime": j.mtime,
                "agent": j.agent,
                "session_id": j.session_id,
            }
            for j in journals
        ]
        print(json.dumps(document, ensure_ascii=True, indent=2))
        return 0
    if not journals:
        print(f"no journals in {directory}")
        return 0
    total = sum(journal.size for journal in journals)
    count = f"{len(journals)} of {found} journals" if len(journals) < found else f"{found} journal(s)"
    print(f"{count}, {_size(total)}, in {directory} (newest first):")
    for journal in journals:
        session = one_line(journal.session_id, 40) if journal.session_id else "-"
        print(
            f"  {_age(now - journal.mtime):>5} ago  {_size(journal.size):>10}  {one_line(journal.agent, 20):<12}  "
            f"{session:<24}  {journal.path.name}"
        )
    if others:
        print(f"  (not journals, left alone: {', '.join(one_line(name, 60) for name in others[:10])})")
    return 0


def _prune_age(args: argparse.Namespace) -> int:
    """The age ``--prune`` removes journals past: ``--older-than AGE``; 0 (every journal) only with ``--all``.

    Raises:
        UsageProblem: flags that do not go together, or an age :func:`parse_age` refuses.
    """
    if not args.prune:
        flag = "--all" if args.all else "--older-than" if args.older_than is not None else "--dry-run"
        raise UsageProblem(f"{flag} goes with --prune: tinyacp journals --prune --older-than 30d")
    if args.older_than is None:
        if args.all:
            return 0
        raise UsageProblem("--prune removes journals older than --older-than AGE: give both (as 30d)")
    age = parse_age(args.older_than)
    if age == 0 and not args.all:
        raise UsageProblem(
            f"--older-than {one_line(args.older_than, 40)!r} would remove every journal: give --all to mean it "
            "(tinyacp journals --prune --all)"
        )
    if age > 0 and args.all:
        raise UsageProblem("--all removes every journal: give it without --older-than (or with --older-than 0s)")
    return age


def _prune(directory: Path, older_than: float, *, dry_run: bool) -> int:
    """Remove the journals last written more than ``older_than`` seconds ago; say what was freed."""
    cutoff = time.time() - older_than
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        print(f"no journals in {directory}")
        return 0
    except OSError as exc:
        raise UsageProblem(f"{directory}: {exc.strerror or exc}") from None
    removed = freed = 0
    left: list[str] = []
    try:
        check_private(directory, os.fstat(dir_fd))
        for name in sorted(os.listdir(dir_fd)):
            status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISREG(status.st_mode) or not name.endswith(".jsonl"):
                left.append(name)
                continue
            if status.st_mtime >= cutoff:
                continue
            if not dry_run:
                os.unlink(name, dir_fd=dir_fd)  # the entry itself, in this directory: never a link's target
            removed += 1
            freed += status.st_size
    except OSError as exc:
        raise UsageProblem(f"{directory}: {exc}") from None
    finally:
        os.close(dir_fd)
    verb = "would remove" if dry_run else "removed"
    print(f"{verb} {removed} journal(s) older than {_age(older_than)}, freeing {_size(freed)}, in {directory}")
    if left:
        print(f"left alone (not regular journal files): {', '.join(one_line(name, 60) for name in left[:10])}")
    return 0


def show_note(note: str | None) -> None:
    """Say on stderr which journal ``show`` found by name."""
    if note is not None:
        print(f"tinyacp: showing {note}", file=sys.stderr)
