"""Look at a batch or at runs in a browser: one self-contained HTML page, ``tinyacp view``.

:func:`render_html` turns a source into the page, :func:`write_html` writes it to a file. A source is

* a batch's output directory (its ``results.jsonl``, and the journals its records name, found in its
  ``journals/`` when the directory has moved): a row per item, its latest attempt deciding its outcome, the
  earlier attempts inside it,
* one journal file (every epoch of it, split into turns at each prompt),
* a directory of journal files (its regular ``*.jsonl`` files, the latest first; links are not followed), or
* a list of batch directories, compared: their items matched by id, an outcome per batch, the differing first.

The page has an overview per agent (turns, ok, failed, median and 90th percentile duration, tokens, cost, with
small charts), a table of every turn that sorts and filters, and each turn's transcript when it is opened: the
prompt, the agent's messages, its thoughts (folded), every tool call with its content (a diff as a diff), every
permission request with the decision and who made it, notices, compactions and plans (each merged by its id),
each subagent (child session) with its own work grouped under it, messages between sessions, the agent's
questions (``elicitation/create``) with the answer and who gave it, usage, the calls sent with ``force=True``, and
for a failed turn its error and the tail of the agent's stderr.

The page loads nothing and sends nothing: its Content-Security-Policy allows no connection of any kind (no
fetch, no image but ``data:``, no font, no frame, no form), its script and style are inline and allowed by their
hashes only, and everything that came from an agent or a file is data: a JSON document in a
``<script type="application/json">`` element with ``<``, ``>`` and ``&`` escaped, put into the page with
``textContent`` only, never as markup, never as a link. Control characters and bidirectional overrides are shown
as visible marks. Each turn's transcript is bounded (``max_turn_bytes``); the page says what was cut, and what it
could not read in a damaged journal.

This module is not imported by ``import tinyacp``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import gc
import hashlib
import html
import json
import os
import stat
import statistics
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from ._bounds import MAX_SAFE_INT, check_count
from ._version import __version__
from ._view_model import Budget, EpochTurns, TurnBuilder, add_finite, clean, is_trace, read_journal_lines
from ._view_model import number as finite

__all__ = ["DEFAULT_MAX_TURN_BYTES", "Source", "render_html", "write_html"]

DEFAULT_MAX_TURN_BYTES: Final = 256 * 1024
"""The text of one turn's transcript kept in the page, at most: 10,000 turns at this bound would still open, and a
demo turn takes a few KiB."""

_NOTES: Final = 200
"""Notes about what was skipped or cut, listed at most (the rest are counted)."""

_STDERR_MARK: Final = "\n--- agent stderr (tail) ---\n"

_ASSETS: Final = Path(__file__).with_name("_view_assets")


Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""What :func:`render_html` shows: one path (a batch's directory, a journal, a directory of journals), or several
batch directories to compare."""


def render_html(source: Source, *, max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES) -> str:
    """The page for ``source``: a batch's output directory, a journal, or a directory of journals; or a list of two
    or more batch directories, compared item by item (matched by id).

    Args:
        source: what to show: a path, or a list of paths (one path in a list is shown as itself).
        max_turn_bytes: the text of each turn's transcript kept, at most (the page says what was cut).

    Returns:
        One self-contained HTML document.

    Raises:
        FileNotFoundError: a source does not exist, or is a directory with neither ``results.jsonl`` nor a journal.
        OSError: a source (or a batch's ``results.jsonl``) cannot be read, is neither a file nor a directory, or
            is a file that holds not one journal record (``errno.EINVAL``); or, when several are compared, one of
            them is not a batch's directory (``errno.EINVAL``).
        ValueError: ``max_turn_bytes`` is not an int from 1 to 2**53 - 1 (the page's script reads it), or
            ``source`` is an empty list.
    """
    check_count("max_turn_bytes", max_turn_bytes, 1, MAX_SAFE_INT)
    paths = _paths(source)
    with _no_cyclic_gc():
        view = _read(paths[0], max_turn_bytes) if len(paths) == 1 else _compare(paths, max_turn_bytes)
        return _page(view)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while the page is built: it is made of a few million small dicts and
    lists that hold no cycle, and each collection would walk all of them again (a quarter of the time of a
    10,000-turn page). Reference counting still frees what is dropped; the collector resumes after, as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def write_html(
    source: Source,
    out: str | os.PathLike[str] | None = None,
    *,
    max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
) -> Path:
    """Write the page for ``source`` to ``out`` and return its path.

    Args:
        source: a batch's output directory, a journal, or a directory of journals; or a list of batch directories
            to compare.
        out: the file to write (replaced if it exists); default ``report.html`` inside a batch's directory, else
            ``tinyacp-view.html`` in the current directory (batches compared included).
        max_turn_bytes: the text of each turn's transcript kept, at most.

    Raises:
        FileNotFoundError: a source does not exist, or is a directory with neither ``results.jsonl`` nor a journal.
        OSError: a source cannot be read, is a file that holds not one journal record, is not a batch's directory
            when several are compared, or ``out`` cannot be written (the error names ``out``).
        ValueError: ``max_turn_bytes`` is not an int from 1 to 2**53 - 1 (the page's script reads it), or
            ``source`` is an empty list.
    """
    page = render_html(source, max_turn_bytes=max_turn_bytes)
    paths = _paths(source)
    path = Path(out) if out is not None else _default_output(paths[0]) if len(paths) == 1 else _COMPARED
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(page, encoding="utf-8")
        os.replace(temporary, path)  # whole or not at all: a browser never opens half a page
    except OSError as exc:  # said of the page asked for, not of the temporary name nobody chose
        raise OSError(exc.errno, _cannot_write(exc, path), os.fspath(path)) from exc
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
    return path


_COMPARED: Final = Path("tinyacp-view.html")


def _paths(source: Source) -> list[Path]:
    if isinstance(source, str | os.PathLike):
        return [Path(source)]
    paths = [Path(one) for one in source]
    if not paths:
        raise ValueError("source: name at least one batch directory, journal or directory of journals")
    return paths


def _cannot_write(exc: OSError, path: Path) -> str:
    """Why the page could not be written at ``path``, in words."""
    if exc.errno == errno.ENOENT and not path.parent.is_dir():
        return f"cannot write the page: its directory {path.parent} does not exist"
    if exc.errno == errno.EISDIR or path.is_dir():
        return "cannot write the page: this is a directory (name a file, e.g. report.html)"
    return f"cannot write the page: {exc.strerror or exc}"


def _default_output(source: str | os.PathLike[str]) -> Path:
    """Where :func:`write_html` writes by default: ``report.html`` in a batch's directory, else
    ``tinyacp-view.html`` in the current directory."""
    path = Path(source)
    if path.name == "results.jsonl" and path.is_file():
        return path.parent / "report.html"
    if path.is_dir() and (path / "results.jsonl").is_file():
        return path / "report.html"
    return Path("tinyacp-view.html")


# ----------------------------------------------------------------------------------------------------------------
# Reading the source.


@dataclass
class _View:
    title: str
    kind: str
    turns: list[dict[str, Any]] = field(default_factory=list)
    transcripts: list[dict[str, Any]] = field(default_factory=list)
    """Each row's transcript; for batches compared, ``{"sides": [transcript or None, ...]}``, one per batch."""
    batches: list[dict[str, Any]] = field(default_factory=list)
    """Batches compared: each one's name, path and totals."""
    notes: list[str] = field(default_factory=list)
    more_notes: int = 0
    max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES

    def note(self, text: str) -> None:
        if len(self.notes) < _NOTES:
            self.notes.append(clean(text, 1000))
        else:
            self.more_notes += 1

    def add(self, row: dict[str, Any], transcript: dict[str, Any]) -> None:
        self.turns.append(row)
        self.transcripts.append(transcript)


def _read(path: Path, max_turn_bytes: int) -> _View:
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(path))
    if path.name == "results.jsonl" and path.is_file():  # the batch's file named rather than its directory
        path = path.parent
    if path.is_dir() and (path / "results.jsonl").is_file():
        view = _View(clean(path.resolve().name or str(path)), "batch", max_turn_bytes=max_turn_bytes)
        _read_batch(path, view)
        return view
    if path.is_dir():
        journals, links = _journal_files(path)
        if not journals:
            raise FileNotFoundError(errno.ENOENT, _NOTHING_HERE + (_LINKS_LEFT if links else ""), str(path))
        view = _View(clean(path.resolve().name or str(path)), "journals", max_turn_bytes=max_turn_bytes)
        for name in links:
            view.note(f"{name}: a symbolic link, not read (as `tinyacp journals` leaves links alone)")
        for journal in journals:
            _read_journal(journal, view)
        return view
    if not path.is_file():  # a pipe or a device would be read for ever
        raise OSError(errno.EINVAL, "not a regular file, nor a directory", str(path))
    view = _View(clean(path.name), "journal", max_turn_bytes=max_turn_bytes)
    with open(path, "rb"):  # unreadable: the caller's error, not a note
        pass
    if not _read_journal(path, view):  # a page of nothing would hide that the wrong file was named
        what = "it is empty" if path.stat().st_size == 0 else "not one line of it is a journal record"
        raise OSError(errno.EINVAL, f"not a tinyacp journal: {what}", str(path))
    return view


_NOTHING_HERE: Final = (
    "this directory holds neither a batch's results.jsonl nor a journal (*.jsonl): name a batch's output "
    "directory, a journal, or a directory of journals"
)
_LINKS_LEFT: Final = " (symbolic links to journals are not followed, as `tinyacp journals` does not)"


def _journal_files(directory: Path) -> tuple[list[Path], list[str]]:
    """The journals of a directory (its regular ``*.jsonl`` files), the latest first, and the names of the
    ``*.jsonl`` entries that are symbolic links: those are not read, as ``tinyacp journals`` lists them among what
    is not a journal (a link may lead out of the directory, to any file)."""
    found: list[tuple[float, str, Path]] = []
    links: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith(".jsonl"):
                continue
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(status.st_mode):
                links.append(clean(entry.name, 200))
            elif stat.S_ISREG(status.st_mode):
                found.append((-status.st_mtime, entry.name, directory / entry.name))
    found.sort()
    return [path for _, _, path in found], sorted(links)


def _epochs(path: Path, view: _View, wanted: set[int] | None = None) -> dict[int, EpochTurns]:
    """The turns of each epoch of a journal (only the ``wanted`` ones, when given); what could not be read is
    noted. A line that is no record belongs to the epoch of the record before it."""
    found: dict[int, EpochTurns] = {}
    current: EpochTurns | None = None
    try:
        for line in read_journal_lines(path):
            if line.torn:
                view.note(f"{path.name}: its last line is torn ({len(line.data)} bytes, a write cut short): skipped")
            elif line.record is not None:
                epoch = line.record["epoch"]
                current = found.get(epoch)
                if current is None and (wanted is None or epoch in wanted):
                    current = found[epoch] = EpochTurns(view.max_turn_bytes)
            if current is not None and not line.torn:
                current.add(line)
            elif line.record is None and not line.torn:
                view.note(f"{path.name}: line {line.number} is not a record: skipped")
    except OSError as exc:
        view.note(f"{path.name}: could not be read to the end: {exc.strerror or exc}")
    for epoch, turns in found.items():
        for turn in turns.turns:
            _note_skipped(view, f"{path.name} epoch {epoch}", turn.skipped)
    return found


def _note_skipped(view: _View, where: str, skipped: list[int]) -> None:
    if len(skipped) == 1:
        view.note(f"{where}: line {skipped[0]} is not a record, shown raw")
    elif skipped:
        lines = ", ".join(map(str, skipped[:10])) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        view.note(f"{where}: lines {lines} are not records, shown raw")


def _read_journal(path: Path, view: _View) -> bool:
    """Add the turns of the journal at ``path`` to ``view``; whether it held a journal record at all."""
    epochs = _epochs(path, view)
    stem = clean(path.stem, 200)
    # An epoch that did not initialize (a run that failed early, lines written by a program of its own) is taken to
    # be of the agent the journal's other runs named: a journal is usually one agent's.
    named = [turn.agent for found in epochs.values() for turn in found.turns if turn.agent]
    agent = named[0] if named else _agent_from_name(path.stem)
    many = len(epochs) > 1
    trace = next((turn.trace for found in epochs.values() for turn in found.turns if turn.trace), "")
    for epoch, found in epochs.items():
        for number, turn in enumerate(found.turns, 1):
            name = stem + (f" #{epoch}" if many else "") + (f".{number}" if len(found.turns) > 1 else "")
            turn.trace = turn.trace or trace  # the journal's first record carries it for all its runs
            row = _row(turn, name, turn.agent or agent, view)
            row.update(journal=clean(str(path), 1000), epoch=epoch, ok=turn.ok, secs=turn.seconds)
            transcript = turn.transcript()
            if not turn.ok:  # an ok turn's side errors are events of its transcript
                error = turn.prompt_error or _no_answer(turn)
                row["err"] = _short_error(error)
                transcript["error"] = {"type": "", "message": error, "stderr": ""}
            view.add(row, transcript)
    return bool(epochs)


def _no_answer(turn: TurnBuilder) -> str:
    """Why a turn whose prompt got no error answer failed."""
    if not turn.prompts:
        return turn.error or "no prompt was sent (the run ended before it)"
    if turn.stop_reason is None:
        return "the prompt got no answer in the journal (the run was stopped, or the agent exited)"
    return "the prompt's answer has no stop reason"


def _agent_from_name(stem: str) -> str:
    """The agent in a journal's name as ``tinyacp prompt`` makes it (``STAMP-AGENT-RANDOM``); else ``?``."""
    parts = stem.split("-")
    if len(parts) >= 3 and parts[0][:8].isdigit() and len(parts[-1]) == 16:
        return clean("-".join(parts[1:-1]), 100)
    return "?"


def _row(turn: TurnBuilder, name: str, agent: str, view: _View) -> dict[str, Any]:
    for what in turn.clamped:
        view.note(f"turn {name}: {what}: shown as the largest number the page can hold, 1.8e308")
    row: dict[str, Any] = {
        "id": clean(name, 300),
        "agent": agent,
        "stop": turn.stop_reason,
        "tools": len(turn.tool_ids),
        "subs": turn.subagents,
        "allow": turn.allowed,
        "reject": turn.rejected,
        "prompt": turn.prompt,
        "started": turn.start,
    }
    if turn.session is not None:
        row["session"] = clean(turn.session, 200)
    if turn.trace:
        row["trace"] = turn.trace
    if turn.tokens is not None:
        row["tokens"] = turn.tokens
    if turn.cost is not None:
        row.update(cost=turn.cost, cur=turn.currency)
    if turn.skipped:
        row["skipped"] = len(turn.skipped)
    return row


class _Record(msgspec.Struct):
    """The fields of a ``results.jsonl`` line that the page shows (a line of any version has them)."""

    id: str | int
    ok: bool
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    permissions: dict[str, Any] | None = None
    seconds: float | None = None
    error: dict[str, Any] | None = None
    journal: str = ""
    epoch: int | None = None
    attempt: int = 1
    agent: str = ""
    trace_id: str | None = None


_decode_record = msgspec.json.Decoder(_Record).decode


def _records(path: Path, view: _View) -> Iterator[_Record]:
    with open(path, "rb") as file:
        for number, line in enumerate(file, 1):
            if not line.endswith(b"\n"):
                view.note(f"results.jsonl: its last line is torn ({len(line)} bytes): skipped")
                return
            if not line.strip():
                continue
            try:
                yield _decode_record(line)
            except msgspec.MsgspecError as exc:
                view.note(f"results.jsonl line {number} is not a turn record ({exc}): skipped")


def _read_batch(directory: Path, view: _View) -> None:
    """One row per item, as ``tinyacp batch`` counts them: its latest record (the last in the file) decides its
    outcome, the row says how many attempts it had, and its earlier attempts are inside its transcript."""
    records = list(_records(directory / "results.jsonl", view))
    journals = [_journal_of(record, directory) for record in records]
    wanted: dict[Path, set[int]] = {}
    for record, journal in zip(records, journals, strict=True):
        if journal is not None and record.epoch is not None:
            wanted.setdefault(journal, set()).add(record.epoch)
    # Each journal read once, for the epochs its records name (a retried item's attempts share its journal). What
    # is kept is bounded per turn, as the page itself is.
    read = {journal: _epochs(journal, view, epochs) for journal, epochs in wanted.items()}
    items: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for record, journal in zip(records, journals, strict=True):
        found = read[journal].get(record.epoch) if journal is not None and record.epoch is not None else None
        turn = _batch_turn(record, found.turns[0] if found is not None else None, journal, view)
        items.setdefault(str(record.id), []).append(turn)  # 7 and "7" are one item, as the batch counts them
    for attempts in items.values():
        row, transcript = attempts[-1]
        if len(attempts) > 1:
            row["attempts"] = len(attempts)
            transcript["earlier"] = [_earlier(*attempt) for attempt in attempts[:-1]]
        view.add(row, transcript)


def _earlier(row: dict[str, Any], transcript: dict[str, Any]) -> dict[str, Any]:
    """An earlier attempt at an item, as its row's transcript shows it: its outcome and figures, then its own."""
    facts = {name: row[name] for name in _ATTEMPT_FACTS if row.get(name) is not None}
    return {**facts, **transcript}


_ATTEMPT_FACTS: Final = (
    "attempt", "agent", "ok", "stop", "started", "secs", "session", "tools", "allow", "reject", "err", "tokens", "cost",
    "cur", "journal", "epoch", "trace",
)  # fmt: skip


def _journal_of(record: _Record, directory: Path) -> Path | None:
    if not record.journal:
        return None
    named = Path(record.journal)
    for candidate in (named, directory / "journals" / named.name):
        if candidate.is_file():
            return candidate
    return None


def _batch_turn(
    record: _Record, turn: TurnBuilder | None, journal: Path | None, view: _View
) -> tuple[dict[str, Any], dict[str, Any]]:
    ident = clean(record.id, 300) if isinstance(record.id, str) else str(record.id)
    if turn is None:
        turn = TurnBuilder(Budget(view.max_turn_bytes, view.max_turn_bytes))
        where = "no journal" if not record.journal else f"its journal {clean(record.journal, 500)} is missing"
        if journal is not None:
            where = f"epoch {record.epoch} is not in its journal"
        turn.events.append({"k": "bad", "t": 0, "why": f"no transcript: {where}"})
        view.note(f"turn {ident}: no transcript ({where})")
    row = _row(turn, ident, clean(record.agent, 100) or turn.agent or "?", view)
    permissions = record.permissions or {}
    row.update(
        ok=record.ok,
        stop=clean(record.stop_reason, 60) if record.stop_reason is not None else None,
        secs=record.seconds if record.seconds is not None else turn.seconds,
        allow=_count(permissions.get("allowed"), turn.allowed),
        reject=_count(permissions.get("rejected"), turn.rejected),
        attempt=record.attempt,
        journal=clean(record.journal, 1000),
        epoch=record.epoch,
    )
    usage = record.usage or {}
    tokens = finite(usage.get("total_tokens"))
    if tokens is not None:
        row["tokens"] = tokens
    cost = usage.get("cost")
    amount = finite(cost.get("amount")) if isinstance(cost, dict) else None
    if isinstance(cost, dict) and amount is not None:
        row.update(cost=amount, cur=clean(cost.get("currency"), 12))
    if is_trace(record.trace_id):
        row["trace"] = record.trace_id
    transcript = turn.transcript()
    if record.error is not None:
        message = clean(record.error.get("message"), 8192)
        text, _, stderr = message.partition(_STDERR_MARK)
        kind = clean(record.error.get("type"), 100)
        row["err"] = _short_error(f"{kind}: {text}")
        transcript["error"] = {"type": kind, "message": text, "stderr": stderr}
    return row, transcript


_ERROR_WORDS: Final = 160
"""Characters of a failed turn's reason in its row (the table's error column); the whole is in its transcript."""


def _short_error(text: str) -> str:
    """A failure's kind and first words, on one line, for the table."""
    line = " ".join(text.split())
    return line if len(line) <= _ERROR_WORDS else line[: _ERROR_WORDS - 1] + "\u2026"


def _count(value: Any, fallback: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


# ----------------------------------------------------------------------------------------------------------------
# Batches compared.

_SIDE_FACTS: Final = frozenset({"id", "prompt"})
"""What an item's row holds once for all its batches, not in each batch's side."""


def _compare(paths: list[Path], max_turn_bytes: int) -> _View:
    """Batches matched item by item (by id, as each batch counts its items): a row per item with each batch's
    outcome (its latest attempt's) side by side, whether they differ, and each batch's totals."""
    names = _batch_names(paths)
    views: list[_View] = []
    for path, name in zip(paths, names, strict=True):
        directory = path.parent if path.name == "results.jsonl" and path.is_file() else path
        if not directory.exists():
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(path))
        if not (directory / "results.jsonl").is_file():
            raise OSError(
                errno.EINVAL,
                "not a batch's directory (it has no results.jsonl): only batches can be compared",
                str(path),
            )
        one = _View(name, "batch", max_turn_bytes=max_turn_bytes)
        _read_batch(directory, one)
        views.append(one)
    view = _View(" vs ".join(names), "compare", max_turn_bytes=max_turn_bytes)
    for one in views:
        for note in one.notes:
            view.note(f"{one.title}: {note}")
        view.more_notes += one.more_notes
    order: dict[str, list[int | None]] = {}
    for side, one in enumerate(views):
        for index, row in enumerate(one.turns):
            order.setdefault(row["id"], [None] * len(views))[side] = index
    for ident, where in order.items():
        rows = [views[side].turns[index] if index is not None else None for side, index in enumerate(where)]
        sides = [views[side].transcripts[index] if index is not None else None for side, index in enumerate(where)]
        outcomes = {None if row is None else bool(row.get("ok")) for row in rows}
        first = next(row for row in rows if row is not None)
        item = {
            "id": ident,
            "prompt": first.get("prompt", ""),
            "differs": len(outcomes) > 1,
            "outs": [None if row is None else {k: v for k, v in row.items() if k not in _SIDE_FACTS} for row in rows],
        }
        view.add(item, {"sides": sides})
    for side, (path, one) in enumerate(zip(paths, views, strict=True)):
        view.batches.append(
            {"name": one.title, "path": clean(str(path), 1000), "totals": _totals(one, len(order), side, view)}
        )
    return view


def _batch_names(paths: list[Path]) -> list[str]:
    """A short name for each batch: its directory's name, with its parent's when two share one, numbered when
    that is not enough."""

    def directory(path: Path) -> Path:
        return (path.parent if path.name == "results.jsonl" else path).resolve()

    names = [clean(directory(path).name or str(path), 100) for path in paths]
    if len(set(names)) < len(names):
        names = [clean(f"{directory(path).parent.name}/{directory(path).name}", 200) for path in paths]
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return unique


def _totals(one: _View, items: int, side: int, view: _View) -> dict[str, Any]:
    """A compared batch's totals over its items (each one's latest attempt): ok, failed, missing (compared items it
    has no record of), the ok rate, the median seconds, tokens and cost (sums clamped to a double's range)."""
    ok = sum(1 for row in one.turns if row.get("ok"))
    seconds = [row["secs"] for row in one.turns if isinstance(row.get("secs"), int | float)]
    figures: dict[str, Any] = {"tokens": 0, "cost": {}}
    clamped: set[str] = set()
    for row in one.turns:
        _add_figures(figures, {**row, "agent": one.title}, clamped)
    for what in sorted(clamped):
        view.note(f"{what} add up past the largest number the page can hold: shown as that number, 1.8e308")
    return {
        "items": len(one.turns),
        "ok": ok,
        "failed": len(one.turns) - ok,
        "missing": items - len(one.turns),
        "okRate": ok / len(one.turns) if one.turns else None,
        "median": statistics.median(seconds) if seconds else None,
        "tokens": figures["tokens"],
        "cost": figures["cost"],
    }


# ----------------------------------------------------------------------------------------------------------------
# The overview.


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[index]


_BINS: Final = 10


def _overview(turns: Iterable[dict[str, Any]], view: _View | None = None) -> dict[str, Any]:
    """Per agent: turns, ok, failed, median and 90th percentile seconds, tokens, cost by currency, and a
    histogram of durations over bins shared by every agent. A sum past a double's range is clamped to the largest
    and noted on ``view`` (JSON, and so the page, has no infinity)."""
    rows = list(turns)
    durations = [row["secs"] for row in rows if isinstance(row.get("secs"), int | float)]
    top = max(durations, default=0.0) or 1.0
    width = top / _BINS
    agents: dict[str, dict[str, Any]] = {}
    clamped: set[str] = set()
    for row in rows:
        agent = agents.setdefault(
            row["agent"],
            {"agent": row["agent"], "turns": 0, "ok": 0, "failed": 0, "tokens": 0, "cost": {}, "secs": []},
        )
        agent["turns"] += 1
        agent["ok" if row.get("ok") else "failed"] += 1
        _add_figures(agent, row, clamped)
        if isinstance(row.get("secs"), int | float):
            agent["secs"].append(row["secs"])
    if view is not None:
        for what in sorted(clamped):
            view.note(f"{what} add up past the largest number the page can hold: shown as that number, 1.8e308")
    for agent in agents.values():
        secs = agent.pop("secs")
        agent["median"] = statistics.median(secs) if secs else None
        agent["p90"] = _quantile(secs, 0.9) if secs else None
        bins = [0] * _BINS
        for value in secs:
            bins[min(_BINS - 1, int(value / width))] += 1
        agent["bins"] = bins
    return {"agents": list(agents.values()), "binWidth": width}


def _add_figures(agent: dict[str, Any], row: dict[str, Any], clamped: set[str]) -> None:
    """A row's tokens and cost added to its agent's, each sum clamped to a double's range (what was is named in
    ``clamped``)."""
    if isinstance(row.get("tokens"), int | float):
        agent["tokens"], over = add_finite(agent["tokens"], row["tokens"])
        if over:
            clamped.add(f"the tokens of {row['agent']}")
    if isinstance(row.get("cost"), int | float):
        currency = row.get("cur") or ""
        agent["cost"][currency], over = add_finite(agent["cost"].get(currency, 0), row["cost"])
        if over:
            clamped.add(f"the cost in {currency or 'no currency'} of {row['agent']}")


# ----------------------------------------------------------------------------------------------------------------
# The page.


def _json(value: Any) -> str:
    """JSON fit to sit inside a ``<script>`` element: ASCII only (U+2028 and U+2029 escaped too), and no ``<``,
    ``>`` or ``&``, so no string in it can end the element or open a comment."""
    encoded = _encode(value)
    if encoded.isascii():  # the usual page: msgspec is several times faster than the json module
        text = encoded.decode("ascii")
    else:  # non-ASCII text, U+2028 and U+2029 among it: escaped by the json module
        text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_encode = msgspec.json.Encoder().encode


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")


def _page(view: _View) -> str:
    script = _asset("view.js")
    style = _asset("view.css")
    policy = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; img-src data:; "
        "font-src 'none'; connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; "
        "worker-src 'none'; manifest-src 'none'; base-uri 'none'; form-action 'none'"
    )
    overview = _overview(view.turns, view) if view.kind != "compare" else {"agents": [], "binWidth": 1.0}
    notes = list(view.notes)
    if view.more_notes:
        notes.append(f"… and {view.more_notes} more notes")
    data = {
        "title": view.title,
        "kind": view.kind,
        "made": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "version": __version__,
        "maxTurnBytes": view.max_turn_bytes,
        "notes": notes,
        "overview": overview,
        "turns": view.turns,
    }
    if view.batches:
        data["batches"] = view.batches
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n',
        '<meta name="referrer" content="no-referrer">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        '<link rel="icon" href="data:,">\n',
        f"<title>tinyacp view: {html.escape(view.title)}</title>\n",
        f"<style>{style}</style>\n</head>\n<body>\n",
        "<noscript><p>This page shows its turns with JavaScript, which is off.</p></noscript>\n",
        '<div id="app"></div>\n',
        f'<script type="application/json" id="data">{_json(data)}</script>\n',
    ]
    for index, transcript in enumerate(view.transcripts):
        if view.kind != "compare":
            parts.append(f'<script type="application/json" id="tx-{index}">{_json(transcript)}</script>\n')
            continue
        parts.extend(
            f'<script type="application/json" id="tx-{index}-{side}">{_json(one)}</script>\n'
            for side, one in enumerate(transcript["sides"])
            if one is not None
        )
    parts.append(f"<script>{script}</script>\n</body>\n</html>\n")
    return "".join(parts)
