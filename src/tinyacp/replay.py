"""A recorded agent as a test double: ``tinyacp replay JOURNAL`` (also ``python -m tinyacp.replay``).

It is an ACP agent on stdin/stdout that plays back the agent's side of one epoch of a journal written by
:class:`~tinyacp.JsonlJournal`. The recording is a sequence of the client's lines, each followed by the lines the
agent sent before the client's next one. For every line the client sends, the replay answers with the agent lines
that followed the matching recorded line, byte for byte, in the recorded order; so a program under test meets a
real agent's recorded behaviour, deterministically and offline.

JSON-RPC ids are the one thing translated: when the client numbers its requests differently from the recorded
client, the recorded responses are sent with the client's ids.

Matching:

- lax (the default): a client line matches the next recorded one when both have the same ``method`` (or are both
  responses). A recorded notification the client did not send (a ``session/cancel``, say) is skipped when the
  client's line matches the step after it. A request with nothing recorded for it gets a JSON-RPC error; other
  unexpected lines are ignored. Mismatches are reported on stderr.
- ``--strict``: every client line must equal the recorded one as JSON, ids aside, and the client must send every
  recorded line. The first difference is reported on stderr and the replay exits 1 at once, so the client sees
  the agent exit.

A journal is input: records the replay cannot use (no line, a line that is not valid base64, …) are left out with
a note on stderr, and the replay serves the rest. A client line it cannot make sense of (not JSON, nested too deep,
longer than the longest line tinyacp writes) is reported and does not stop it.

Exit status: 0 when the client closed stdin (strict: after sending every recorded line), 1 on a strict mismatch
(or a client line too long to read), 2 when the journal cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ._bounds import MAX_FD, check_count
from ._constants import SECRET_MARKER
from ._errors import ReaderExhaustion
from .reader import LineReader, ReaderLimits

__all__ = ["Recording", "Replayer", "load_recording", "main"]

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_JOURNAL = 2

# The longest line the replay accepts from the client: as long as the longest line tinyacp writes by default
# (TransferLimits.max_message_bytes, 16 MiB), so a recorded prompt with attachments replays.
_MAX_LINE = 16 * 1024 * 1024
_INTERNAL_ERROR = -32603


@dataclass
class Exchange:
    """One recorded client line and the agent lines that followed it."""

    line: bytes
    message: dict[str, Any] | None
    replies: list[bytes] = field(default_factory=list)
    redacted: bool = False
    """The journal replaced the line's secrets with ``"<secret>"``: there, any string matches (strict)."""


@dataclass
class Recording:
    """One epoch of a journal, as the replay plays it."""

    epoch: int
    opening: list[bytes] = field(default_factory=list)
    """Agent lines recorded before the client's first line."""
    steps: list[Exchange] = field(default_factory=list)
    left_out: list[int] = field(default_factory=list)
    """The positions (from 1, among the epoch's line records) of records left out: no line, or an undecodable one."""


class JournalUnusable(Exception):
    """The journal has no conversation to replay (or not the epoch asked for)."""


def load_recording(path: str | os.PathLike[str], epoch: int | None = None) -> Recording:
    """The epoch of the journal to replay: ``epoch``, or the last one that has lines.

    Raises:
        JournalUnusable: no such epoch, or no line in it.
        OSError: the file cannot be read.
    """
    # Here, not at the top: `tinyacp --help` builds the replay's parser from this module, and needs no journal.
    from ._journal import JsonlJournal, read_journal

    records = [record for record in read_journal(path).records if record["type"] == "line"]
    epochs = [record["epoch"] for record in records]
    if not epochs:
        raise JournalUnusable(f"{os.fspath(path)}: no recorded line to replay")
    chosen = epochs[-1] if epoch is None else epoch
    recording = Recording(chosen)
    found = False
    position = 0
    for record in records:
        if record["epoch"] != chosen:
            continue
        found = True
        position += 1
        try:
            raw = JsonlJournal.raw(record)
        except (KeyError, ValueError):
            recording.left_out.append(position)
            continue
        if record.get("dir") == "out":
            recording.steps.append(Exchange(raw, _parse(raw), redacted=bool(record.get("redacted"))))
        elif recording.steps:
            recording.steps[-1].replies.append(raw)
        else:
            recording.opening.append(raw)
    if not found:
        raise JournalUnusable(f"{os.fspath(path)}: epoch {chosen} has no recorded line (epochs: {sorted(set(epochs))})")
    return recording


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's recursion limit
        return None
    return message if isinstance(message, dict) else None


def _key(request_id: Any) -> tuple[str, Any]:
    """Ids compared by JSON type and value: ``1`` and ``true`` and ``"1"`` are different ids (and an object or a
    list, not a valid id but possible in a journal, by its JSON text)."""
    if isinstance(request_id, list | dict):
        try:
            return (type(request_id).__name__, json.dumps(request_id, sort_keys=True))
        except (ValueError, TypeError, RecursionError):
            return (type(request_id).__name__, repr(request_id))
    return (type(request_id).__name__, request_id)


def _without_id(message: dict[str, Any] | None) -> dict[str, Any] | None:
    if message is None:
        return None
    return {key: value for key, value in message.items() if key != "id"}


def _same(recorded: Any, actual: Any, redacted: bool) -> bool:
    """Equal as JSON; in a redacted line, a recorded ``"<secret>"`` stands for any string."""
    if not redacted:
        return bool(recorded == actual)
    if recorded == SECRET_MARKER:
        return isinstance(actual, str)
    if isinstance(recorded, dict):
        return (
            isinstance(actual, dict)
            and recorded.keys() == actual.keys()
            and all(_same(value, actual[key], redacted) for key, value in recorded.items())
        )
    if isinstance(recorded, list):
        return (
            isinstance(actual, list)
            and len(recorded) == len(actual)
            and all(_same(a, b, redacted) for a, b in zip(recorded, actual, strict=True))
        )
    return bool(recorded == actual)


class Mismatch(Exception):
    """A strict replay met a client line that differs from the recording."""


class Replayer:
    """Plays a :class:`Recording` against one client: feed it the client's lines, it writes the agent's.

    Raises:
        ValueError: ``out_fd`` is not an int from 0 to 2**31 - 1 (a C int, as ``os.write`` takes).
    """

    def __init__(self, recording: Recording, *, strict: bool, out_fd: int = 1, log: TextIO = sys.stderr) -> None:
        self.recording = recording
        self.strict = strict
        self._out_fd = check_count("out_fd", out_fd, 0, MAX_FD)
        self._log = log
        self._next = 0
        self._received = 0
        self._ids: dict[tuple[str, Any], Any] = {}

    @property
    def finished(self) -> bool:
        """Whether every recorded client line was matched."""
        return self._next >= len(self.recording.steps)

    @property
    def expected(self) -> Exchange | None:
        """The recorded client line the replay waits for next."""
        steps = self.recording.steps
        return steps[self._next] if self._next < len(steps) else None

    @property
    def remaining(self) -> int:
        """How many recorded client lines are still to come."""
        return len(self.recording.steps) - self._next

    def start(self) -> None:
        """Send what the agent sent before the client's first line."""
        self._send_all(self.recording.opening)

    def receive(self, line: bytes) -> None:
        """Handle one client line (without its newline).

        Raises:
            Mismatch: strict, and the line differs from the recorded one.
            BrokenPipeError: the client closed its end.
        """
        self._received += 1
        try:
            self._receive(line)
        except RecursionError:  # nested too deep to compare with the recording: a mismatch like any other
            if self.strict:
                raise Mismatch(f"client line {self._received} is nested too deeply to compare") from None
            self._note(f"client line {self._received} is nested too deeply to compare: ignored")

    def _receive(self, line: bytes) -> None:
        message = _parse(line)
        steps = self.recording.steps
        if self.strict:
            if self.finished:
                raise Mismatch(
                    f"client line {self._received} was not recorded (the recording has ended):\n"
                    f"  got:      {_show(line)}"
                )
            step = steps[self._next]
            if message is None or not _same(_without_id(step.message), _without_id(message), step.redacted):
                raise Mismatch(
                    f"client line {self._received} differs from the recording (ids aside):\n"
                    f"  expected: {_show(step.line)}\n  got:      {_show(line)}"
                )
            self._take(self._next, message)
            return
        index = self._match(message)
        if index is None:
            self._unexpected(line, message)
            return
        for skipped in range(self._next, index):  # recorded notifications the client did not send
            self._note(f"the client did not send recorded line {_show(steps[skipped].line)}")
            self._send_all(steps[skipped].replies)
        self._take(index, message)

    def _match(self, message: dict[str, Any] | None) -> int | None:
        method = message.get("method") if message is not None else None
        steps = self.recording.steps
        for index in range(self._next, len(steps)):
            recorded = steps[index].message
            if recorded is not None and recorded.get("method") == method:
                return index
            if recorded is None or "id" in recorded:  # only a notification may be skipped
                return None
        return None

    def _take(self, index: int, message: dict[str, Any] | None) -> None:
        step = self.recording.steps[index]
        self._next = index + 1
        recorded = step.message
        if recorded is not None and message is not None and "method" in recorded and "id" in recorded:
            self._ids[_key(recorded["id"])] = message.get("id")
        self._send_all(step.replies)

    def _unexpected(self, line: bytes, message: dict[str, Any] | None) -> None:
        self._note(f"client line {self._received} has no recorded counterpart here: {_show(line)}")
        if message is not None and isinstance(message.get("method"), str) and "id" in message:
            error = {"code": _INTERNAL_ERROR, "message": "tinyacp replay: nothing was recorded for this request here"}
            self._write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode())

    def _send_all(self, lines: list[bytes]) -> None:
        for line in lines:
            self._write(self._translate(line))

    def _translate(self, line: bytes) -> bytes:
        """A recorded response to a recorded request, re-addressed to the id the client used."""
        if not self._ids:
            return line
        message = _parse(line)
        if message is None or "method" in message or "id" not in message:
            return line
        key = _key(message["id"])
        if key not in self._ids:
            return line
        actual = self._ids[key]
        if _key(actual) == key:
            return line
        message["id"] = actual
        try:
            return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            return line

    def _write(self, line: bytes) -> None:
        data = memoryview(line + b"\n")
        while data:
            data = data[os.write(self._out_fd, data) :]

    def _note(self, text: str) -> None:
        print(f"tinyacp replay: {text}", file=self._log, flush=True)


def _show(line: bytes, limit: int = 300) -> str:
    text = line.decode("utf-8", "backslashreplace")
    text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    return text if len(text) <= limit else text[:limit] + f"… ({len(line)} bytes)"


def serve(recording: Recording, *, strict: bool, in_fd: int = 0, out_fd: int = 1, log: TextIO = sys.stderr) -> int:
    """Replay against the client on ``in_fd``/``out_fd`` until it closes its end; returns the exit status."""
    replayer = Replayer(recording, strict=strict, out_fd=out_fd, log=log)
    if recording.left_out:
        shown = ", ".join(map(str, recording.left_out[:10])) + (" …" if len(recording.left_out) > 10 else "")
        what = f"{len(recording.left_out)} recorded line(s) of epoch {recording.epoch}"
        print(f"tinyacp replay: {what} left out, unusable: {shown}", file=log, flush=True)
    try:
        replayer.start()
        for line in LineReader(in_fd, ReaderLimits(max_line=_MAX_LINE)):
            if line.strip():
                replayer.receive(line)
    except Mismatch as exc:
        print(f"tinyacp replay: strict: {exc}", file=log, flush=True)
        return EXIT_MISMATCH
    except ReaderExhaustion as exc:
        print(f"tinyacp replay: {exc}", file=log, flush=True)
        return EXIT_MISMATCH
    except BrokenPipeError:
        pass
    expected = replayer.expected
    if strict and expected is not None:
        print(
            f"tinyacp replay: strict: the client stopped before sending {replayer.remaining} recorded line(s); "
            f"next expected:\n  {_show(expected.line)}",
            file=log,
            flush=True,
        )
        return EXIT_MISMATCH
    return EXIT_OK


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The replay's arguments (shared with ``tinyacp replay``)."""
    if parser is None:
        parser = argparse.ArgumentParser(prog="python -m tinyacp.replay", description=__doc__.split("\n", 1)[0])
    parser.add_argument("journal", metavar="JOURNAL", help="a journal written by tinyacp (JsonlJournal)")
    parser.add_argument("--strict", action="store_true", help="exit 1 at the first client line that differs")
    parser.add_argument("--epoch", type=int, metavar="N", help="the epoch to replay (default: the last one)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Load the journal named in ``args`` and serve it on stdin/stdout."""
    try:
        recording = load_recording(args.journal, args.epoch)
    except OSError as exc:  # the file and what is wrong with it, not the errno ("[Errno 22] ...")
        where = os.fspath(exc.filename if exc.filename is not None else args.journal)
        print(f"tinyacp replay: {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_JOURNAL
    except JournalUnusable as exc:
        print(f"tinyacp replay: {exc}", file=sys.stderr)
        return EXIT_BAD_JOURNAL
    return serve(recording, strict=args.strict)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tinyacp.replay JOURNAL [--strict] [--epoch N]``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
