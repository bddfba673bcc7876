"""tinyacp batch FILE.jsonl --out DIR: run many prompts, resumably, and summarise them.

Each line of FILE is an item (``id``, ``prompt``, optional ``agent``, ``cwd``, ``timeout``, ...; see
:mod:`tinyacp.batch`). Records go to ``DIR/results.jsonl``, journals to ``DIR/journals/``. On a terminal a
progress line on stderr shows what is done, failed and running, the rate and the time left; at the end a table
per agent. ``--format json`` streams the records to stdout as they are written.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import msgspec

from .._errors import BatchEngineError, BatchError, BatchItemError
from .._permissions import PermissionPolicy
from ._agents import load_config
from ._display import fit, one_line, sanitize

__all__ = ["BATCH_EXIT_STATUS", "configure", "cmd_batch"]

BATCH_EXIT_STATUS = """exit status:
  0    every item has a record, and every latest record is ok
  1    some turn failed (or was not run); the records say why
  2    usage error: bad arguments, a malformed item or repeated id, an output directory in use or not shared
  3    the engine failed (Ray missing, unreachable, or no node left); run again to resume
  130  Ctrl-C: turns in flight were stopped and left without a record; run again to resume"""

_EXIT_FAILED = 1
_EXIT_USAGE = 2
_EXIT_ENGINE = 3


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1)


def _count(text: str) -> int:
    return _whole(text, 0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be a finite number >= 0, not {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``tinyacp batch`` to its subparser."""
    parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="the items, one JSON object per line")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="results.jsonl and journals/ go here")
    parser.add_argument("--agent", metavar='NAME|"CMD ARGS"', help="the agent of items that name none")
    parser.add_argument("--cwd", metavar="DIR", help="the working directory of items that give none (default: .)")
    parser.add_argument("--concurrency", type=_positive, default=4, metavar="N", help="turns at once (default 4)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local", help="where turns run")
    parser.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster to join (default: start one)")
    parser.add_argument("--retry-failed", action="store_true", help="run again the items whose record is not ok")
    parser.add_argument("--retries", type=_count, default=0, metavar="N", help="extra attempts per failed turn")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="deadline of each turn")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="json: stream the records")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line, no summary table")
    rules = parser.add_argument_group("permissions (nobody is asked: what no rule allows is rejected)")
    rules.add_argument("--allow-kind", action="append", default=[], metavar="KIND", help="allow tool calls of KIND")
    rules.add_argument("--allow-title", action="append", default=[], metavar="PREFIX", help="allow titles with PREFIX")
    rules.add_argument("-y", "--yes", action="store_true", help="allow every tool call")
    rules.add_argument("--no-input", action="store_true", help="never ask (always so in a batch)")
    parser.set_defaults(handler=cmd_batch)


class ProgressLine:
    """The live line on a terminal: done, failed, running, turns per second, time left. Redrawn on every
    event and once a second from a small thread, so the rate and the ETA move while turns run."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._progress: Any = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="tinyacp-batch-progress", daemon=True)
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


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _error(message: str) -> None:
    print(sanitize(f"tinyacp: error: {message}"), file=sys.stderr)  # it may quote the agent


def cmd_batch(args: argparse.Namespace) -> int:
    """``tinyacp batch``."""
    from ..batch import run_batch

    config = load_config(args.config)
    if not args.file.is_file():
        _error(f"{args.file}: not a file")
        return _EXIT_USAGE
    as_json = args.format == "json"
    progress = ProgressLine(sys.stderr) if _isatty(sys.stderr) and not args.quiet else None

    def on_record(record: Any) -> None:
        line = json.dumps(msgspec.to_builtins(record), ensure_ascii=True, separators=(",", ":"))
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    try:
        summary = run_batch(
            args.file,
            args.out,
            concurrency=args.concurrency,
            engine=args.engine,
            ray_address=args.ray_address,
            retries=args.retries,
            retry_failed=args.retry_failed,
            on_record=on_record if as_json else None,
            on_progress=progress.update if progress is not None else None,
            agent=args.agent or config.default_agent,
            # The built-in demo is left to the node running the turn, which starts it with its own Python.
            agents={name: spec for name, spec in config.agents.items() if spec.source != "built-in" or name != "demo"},
            cwd=args.cwd,
            timeout=args.timeout,
            policy=PermissionPolicy(args.allow_kind, args.allow_title, allow_all=args.yes),
        )
    except BatchEngineError as exc:
        _error(str(exc))
        return _EXIT_ENGINE
    except (BatchItemError, BatchError) as exc:
        _error(str(exc))
        return _EXIT_USAGE
    except OSError as exc:
        _error(f"{exc.filename or args.out}: {exc.strerror or exc}")
        return _EXIT_USAGE
    finally:
        if progress is not None:
            progress.close()
    if not args.quiet:
        print(summary_table(summary), file=sys.stderr if as_json else sys.stdout)
    return 0 if summary.all_ok else _EXIT_FAILED
