"""tinyacp batch FILE.jsonl --out DIR: run many prompts, resumably, and summarise them (the arguments are read
into :class:`~tinyacp.cli.batch._settings.BatchSettings` first).

Each line of FILE is an item (``id``, ``prompt``, optional ``agent``, ``cwd``, ``timeout``, ...; see
:mod:`tinyacp.batch`). Records go to ``DIR/results.jsonl``, journals to ``DIR/journals/``. On a terminal a
progress line on stderr shows what is done, failed and running, the rate and the time left; at the end a table
per agent. ``--format json`` streams the records to stdout as they are written.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from ..._errors import BatchEngineError, BatchError
from ..._process import signals_blocked
from ..shared._display import fit, isatty, one_line, print_error, sanitize
from ..shared._features import COMMAND_FEATURES
from ..shared._text import utf8_or_escaped

if TYPE_CHECKING:
    from ._settings import BatchSettings

__all__ = ["ProgressLine", "failure_lines", "interrupted_lines", "run_batch_command", "summary_table"]

_EXIT_FAILED = 1
_EXIT_USAGE = 2
_EXIT_ENGINE = 3
_EXIT_INTERRUPTED = 130
_REASON = 240
"""How much of a failed item's reason a summary line shows."""


class ProgressLine:
    """The live line on a terminal: done, failed, running, turns per second, time left. Redrawn on every
    event and once a second from a small thread, so the rate and the ETA move while turns run."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._progress: Any = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="tinyacp-batch-progress", daemon=True)
        with signals_blocked():  # Ctrl-C must reach the main thread
            self._thread.start()

    def update(self, progress: Any) -> None:
        """Show the progress now."""
        with self._lock:
            self._progress = progress
            self._draw()

    def _tick(self) -> None:
        while not self._stopped.wait(1.0):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        progress = self._progress
        if progress is None or self._stopped.is_set():
            return
        total = f"/{progress.to_run}" if progress.to_run is not None else ""
        eta = progress.eta
        left = time.strftime("%H:%M:%S", time.gmtime(eta)) if eta is not None else "--:--:--"
        text = (
            f"done {progress.done}{total}  failed {progress.failed}  running {progress.running}  "
            f"{progress.rate:.2f} turns/s  ETA {left}"
        )
        self._stream.write("\r\x1b[K" + fit(text, _columns()))
        self._stream.flush()

    def close(self) -> None:
        """Stop redrawing and clear the line."""
        self._stopped.set()
        self._thread.join(timeout=2.0)
        with self._lock:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


def _columns() -> int:
    import shutil

    return max(20, shutil.get_terminal_size((80, 24)).columns - 1)


def summary_table(summary: Any) -> str:
    """The table per agent (the turns this run ran) and the state of the whole batch."""
    rows = [("agent", "ok", "failed", "median s", "cost")]
    for name, agent in summary.agents.items():
        median = f"{agent.median_seconds:.2f}" if agent.median_seconds is not None else "-"
        cost = ", ".join(f"{amount:.4f} {one_line(currency, 12)}".strip() for currency, amount in agent.cost.items())
        cost = cost or "-"  # the currency is the agent's word: sanitized like any value it sends
        rows.append((one_line(name, 40), str(agent.ok), str(agent.failed), median, cost))
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    lines = []
    if len(rows) > 1:
        for row in rows:
            cells = [row[0].ljust(widths[0])] + [
                cell.rjust(width) for cell, width in zip(row[1:4], widths[1:4], strict=True)
            ]
            lines.append("  ".join([*cells, row[4]]).rstrip())
    lines.append(
        f"{summary.ok} ok, {summary.failed} failed, {summary.missing} not run; this run: {summary.ran} turns, "
        f"{summary.skipped} skipped (already recorded), {summary.seconds:.1f} s; records in {summary.results}"
    )
    return "\n".join(lines)


def _shown_path(path: str | os.PathLike[str]) -> str:
    """A path as the reader can use it: relative to the working directory when it lies under it."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:
        return text
    return text if relative.startswith("..") else relative


def failure_lines(summary: Any, command: list[str]) -> list[str]:
    """Each failed item (up to the bound the summary kept): its id, why, and its journal; then how to retry."""
    if not summary.failed:
        return []
    lines = ["failed:"]
    for failure in summary.failures:
        # Room for a start failure's cause whole: the line a program printed (kimi-cli's "no longer maintained"
        # is 99 characters), with how it ended.
        lines.append(f"  {one_line(str(failure.id), 40)}: {one_line(failure.reason, _REASON)}")
        lines.append(f"    journal: {_shown_path(failure.journal)}")
    more = summary.failed - len(summary.failures)
    if more > 0:
        lines.append(f"  … and {more} more: every record is in {_shown_path(summary.results)}")
    if summary.failed_earlier:
        again = shlex.join([*command, "--retry-failed"])
        lines.append(
            f"{summary.failed_earlier} of them failed in an earlier run and were not run again; "
            f"--retry-failed runs them: {again}"
        )
    return lines


def interrupted_lines(progress: Any, results: str, command: list[str]) -> list[str]:
    """What Ctrl-C left: what this run recorded, what it stopped, and the command that goes on."""
    done = progress.done if progress is not None else 0
    failed = progress.failed if progress is not None else 0
    running = progress.running if progress is not None else 0
    words = [f"interrupted: this run recorded {done} turn(s) ({failed} failed) in {_shown_path(results)}"]
    words.append(f"stopped {running} turn(s) in flight (no record: they run again on resume)")
    if progress is not None and progress.to_run is not None:
        words.append(f"{max(0, progress.to_run - done - running)} not started")
    return ["; ".join(words), f"resume with: {shlex.join(command)}"]


def _command_line() -> list[str]:
    """This command as the user typed it, to run again."""
    return ["tinyacp", *sys.argv[1:]]


class _StdoutClosed(Exception):
    """The reader of stdout went away; not an OSError, so it is not mistaken for the output directory's."""


def run_batch_command(settings: BatchSettings) -> int:
    """``tinyacp batch`` as ``settings`` say (:func:`~tinyacp.cli.batch._settings.batch_settings`): the progress
    line on a terminal, the records on stdout with ``--format json``, then the summary and the failures; the
    exit status."""
    # Live only where a person watches both streams, never between the JSON records of `--format json`.
    watched = isatty(sys.stderr) and isatty(sys.stdout) and not settings.json
    progress = ProgressLine(sys.stderr) if watched and not settings.quiet else None
    last: list[Any] = [None]  # the latest progress, for what Ctrl-C says

    def on_progress(state: Any) -> None:
        last[0] = state
        if progress is not None:
            progress.update(state)

    try:
        summary = _run(settings, on_progress)
    except KeyboardInterrupt:
        if progress is not None:
            progress.close()
            progress = None
        results = os.path.join(settings.out, "results.jsonl")
        print("\n".join(interrupted_lines(last[0], results, _command_line())), file=sys.stderr)
        return _EXIT_INTERRUPTED
    except _StdoutClosed:
        raise BrokenPipeError from None  # the command's own quiet end for a reader that went away
    except (BatchError, OSError) as exc:
        return _failed(exc, settings.out)
    finally:
        if progress is not None:
            progress.close()
    if not settings.quiet:
        lines = [summary_table(summary), *failure_lines(summary, _command_line())]
        print("\n".join(lines), file=sys.stderr if settings.json else sys.stdout)
    return 0 if summary.all_ok else _EXIT_FAILED


def _run(settings: BatchSettings, on_progress: Callable[[Any], None]) -> Any:
    """Run the batch ``settings`` describe; the records go to stdout as they are written with ``--format json``."""
    from ...batch import AgentNoteWarning, ItemFieldWarning, run_batch

    def on_record(record: Any) -> None:
        line = json.dumps(msgspec.to_builtins(record), ensure_ascii=True, separators=(",", ":"))
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # `… --format json | head -1`: the record is on file; stop the batch quietly
            raise _StdoutClosed from None

    with warnings.catch_warnings():  # a misspelled item field: one line, as the command's own warnings are
        warnings.simplefilter("always", ItemFieldWarning)  # the batch warns once per name already
        warnings.simplefilter("always", AgentNoteWarning)  # and once per agent
        warnings.showwarning = _say_warning
        return run_batch(
            settings.file,
            settings.out,
            concurrency=settings.concurrency,
            engine=settings.engine,
            ray_address=settings.ray_address,
            retries=settings.retries,
            retry_failed=settings.retry_failed,
            on_record=on_record if settings.json else None,
            on_progress=on_progress,
            agent=settings.agent,
            agents=settings.agents,
            cwd=settings.cwd,
            timeout=settings.timeout,
            sync_journal=settings.sync_journal,
            policy=settings.policy,
            features=COMMAND_FEATURES,
            sandbox=settings.sandbox,
            serve=settings.serve,
            trace=settings.trace,
        )


def _say_warning(message: Warning | str, category: type[Warning] = UserWarning, *_: object, **__: object) -> None:
    from ...batch import AgentNoteWarning

    # A note is what the agent does, said before it matters (as `prompt` says it), not a fault of the batch.
    kind = "" if issubclass(category, AgentNoteWarning) else "warning: "
    print(sanitize(f"tinyacp: {kind}{message}"), file=sys.stderr)


def _failed(exc: BaseException, out: Path) -> int:
    """Say what stopped the batch (``out``: its output directory); its exit status."""
    if isinstance(exc, OSError):
        where = exc.filename if isinstance(exc.filename, str) else os.fspath(out)
        print_error(f"{utf8_or_escaped(where)}: {exc.strerror or exc}")
        return _EXIT_USAGE
    print_error(utf8_or_escaped(str(exc)))  # a file name that is not UTF-8, escaped rather than "?"
    return _EXIT_ENGINE if isinstance(exc, BatchEngineError) else _EXIT_USAGE
