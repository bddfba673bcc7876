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
from typing import Any, TextIO

import msgspec

from .._errors import BatchEngineError, BatchError, BatchItemError
from .._permissions import PermissionPolicy
from .._process import signals_blocked
from ._agents import load_config
from ._display import fit, isatty, one_line, print_error

__all__ = ["ProgressLine", "cmd_batch", "summary_table"]

_EXIT_FAILED = 1
_EXIT_USAGE = 2
_EXIT_ENGINE = 3


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


def cmd_batch(args: argparse.Namespace) -> int:
    """``tinyacp batch``."""
    from ..batch import run_batch

    config = load_config(args.config)
    if not args.file.is_file():
        print_error(f"{args.file}: not a file")
        return _EXIT_USAGE
    as_json = args.format == "json"
    progress = ProgressLine(sys.stderr) if isatty(sys.stderr) and not args.quiet else None

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
            sync_journal=args.sync_journal,
            policy=PermissionPolicy(args.allow_kind, args.allow_title, allow_all=args.yes),
        )
    except BatchEngineError as exc:
        print_error(str(exc))
        return _EXIT_ENGINE
    except (BatchItemError, BatchError) as exc:
        print_error(str(exc))
        return _EXIT_USAGE
    except OSError as exc:
        print_error(f"{exc.filename or args.out}: {exc.strerror or exc}")
        return _EXIT_USAGE
    finally:
        if progress is not None:
            progress.close()
    if not args.quiet:
        print(summary_table(summary), file=sys.stderr if as_json else sys.stdout)
    return 0 if summary.all_ok else _EXIT_FAILED
