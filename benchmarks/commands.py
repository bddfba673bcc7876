"""The command against the command: ``tinyacp prompt`` and acpx (the TypeScript ACP CLI) on the same flood.

Both run the flood agent (``benchmarks/flood_agent.py``, the same Python for both) with a prompt that asks for
N ``agent_message_chunk`` updates, allow every tool call, and print only the reply (to a pipe that is drained and
thrown away). Measured per run, for the whole process tree of the command (the command, the agent it starts,
and anything else below it):

- updates/s: N over the wall time from starting the command to its exit (start-up, ``initialize``,
  ``session/new``, the flood, teardown);
- peak RSS: the largest sum of the tree's resident sets, sampled every 10 ms from ``/proc`` (Linux only);
- CPU: the tree's user + system time (``RUSAGE_CHILDREN`` of the benchmark process across the run).

acpx is found as ``$TINYACP_BENCH_ACPX`` when set, else ``acpx`` on ``PATH``; install it with
``npm install acpx`` (then ``TINYACP_BENCH_ACPX=node_modules/.bin/acpx``) or ``npm install -g acpx``. Without it
the acpx row is left out with a line that says so. ``tinyacp prompt`` runs as users run it, with its journal
(written to a temporary state directory), and once more with ``--no-journal``.

``python -m benchmarks.commands [--updates N] [--runs R]`` prints this section alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.common import ROOT, child_env

FLOOD_AGENT = ROOT / "benchmarks" / "flood_agent.py"
ACPX_ENV = "TINYACP_BENCH_ACPX"
"""Names the acpx executable to use instead of the one on ``PATH``."""
SAMPLE_EVERY = 0.01
RUN_TIMEOUT = 600.0


@dataclass(frozen=True)
class Run:
    """One run of one command."""

    wall: float
    cpu: float
    peak_rss_kib: int
    returncode: int


def acpx_path() -> str | None:
    """The acpx to run: ``$TINYACP_BENCH_ACPX``, else ``acpx`` on ``PATH``, else None."""
    given = os.environ.get(ACPX_ENV)
    if given:
        return shutil.which(given) or (given if os.access(given, os.X_OK) else None)
    return shutil.which("acpx")


def acpx_version(acpx: str) -> str:
    done = subprocess.run([acpx, "--version"], capture_output=True, timeout=60, check=False)
    return done.stdout.decode(errors="replace").strip() or "?"


def agent_line(updates: int) -> str:
    """The flood agent as one command line, for both commands' ``--agent`` flags."""
    return shlex.join([sys.executable, str(FLOOD_AGENT), "--updates", str(updates)])


def tinyacp_argv(updates: int, *, journal: bool) -> list[str]:
    argv = [sys.executable, "-m", "tinyacp", "prompt", "--agent-command", agent_line(updates), "-y", "-q"]
    return [*argv, *([] if journal else ["--no-journal"]), str(updates)]


def acpx_argv(acpx: str, updates: int) -> list[str]:
    return [acpx, "--format", "quiet", "--approve-all", "--agent", agent_line(updates), "exec", str(updates)]


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as file:
                found += [int(word) for word in file.read().split()]
        except OSError:
            continue
    return found


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as file:
            resident = int(file.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident * os.sysconf("SC_PAGE_SIZE") // 1024


def tree_rss_kib(root: int) -> int:
    """The summed resident set of ``root`` and all its descendants now, in KiB."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_kib(pid)
        todo += _children(pid)
    return total


def _drain(stream: object) -> threading.Thread:
    def run() -> None:
        read = stream.read  # type: ignore[attr-defined]
        while read(1 << 16):
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def measure(argv: Sequence[str], env: dict[str, str]) -> Run:
    """Run ``argv`` to its end; its wall time, its tree's CPU time and peak summed RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    drains = [_drain(proc.stdout), _drain(proc.stderr)]
    peak = 0
    deadline = time.monotonic() + RUN_TIMEOUT
    while proc.poll() is None:
        peak = max(peak, tree_rss_kib(proc.pid))
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(SAMPLE_EVERY)
    wall = time.perf_counter() - started
    for thread in drains:
        thread.join(5.0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Run(wall, cpu, peak, proc.returncode)


@dataclass
class Comparison:
    updates: int
    acpx: str | None
    acpx_version: str | None
    runs: dict[str, list[Run]]


LABELS = {
    "tinyacp": "`tinyacp prompt -y -q` (journal on)",
    "tinyacp-no-journal": "`tinyacp prompt -y -q --no-journal`",
    "acpx": "`acpx --format quiet --approve-all exec`",
}


def compare(updates: int, runs: int, env: dict[str, str], progress: Callable[[str], None]) -> Comparison:
    """Run each command ``runs`` times, taking turns."""
    acpx = acpx_path()
    result = Comparison(updates, acpx, acpx_version(acpx) if acpx else None, {})
    with tempfile.TemporaryDirectory(prefix="tinyacp-bench-commands-") as state:
        env = {**env, "XDG_STATE_HOME": state}  # tinyacp's journals, and nothing of the user's touched
        commands = {
            "tinyacp": tinyacp_argv(updates, journal=True),
            "tinyacp-no-journal": tinyacp_argv(updates, journal=False),
        }
        if acpx is not None:
            commands["acpx"] = acpx_argv(acpx, updates)
        for round_ in range(runs):
            for key, argv in commands.items():
                progress(f"round {round_ + 1}/{runs}: {key} N={updates}")
                run = measure(argv, env)
                if run.returncode != 0:
                    raise RuntimeError(f"{shlex.join(argv)} exited {run.returncode}")
                result.runs.setdefault(key, []).append(run)
    return result


def section(result: Comparison) -> list[str]:
    """The Markdown of the comparison."""

    def span(values: list[float], fmt: Callable[[float], str]) -> str:
        return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"

    lines = [
        f"N = {result.updates:,} updates; medians (min-max) over {len(next(iter(result.runs.values())))} runs.",
        "",
        "| command | updates/s | wall s | CPU s (whole tree) | peak RSS MiB (whole tree) |",
        "|---|---|---|---|---|",
    ]
    for key, runs in result.runs.items():
        lines.append(
            f"| {LABELS[key]} | {span([result.updates / r.wall for r in runs], lambda v: f'{v:,.0f}')} "
            f"| {span([r.wall for r in runs], lambda v: f'{v:.2f}')} "
            f"| {span([r.cpu for r in runs], lambda v: f'{v:.2f}')} "
            f"| {span([r.peak_rss_kib / 1024 for r in runs], lambda v: f'{v:.1f}')} |"
        )
    lines.append("")
    if result.acpx is None:
        lines.append(
            f"acpx: not installed, its row is left out (`npm install -g acpx`, or set {ACPX_ENV} to its path)."
        )
    else:
        lines.append(f"acpx {result.acpx_version}.")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--updates", type=int, default=100_000, help="updates the flood agent sends (100 000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command, taking turns (3)")
    args = parser.parse_args(argv)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    print("\n".join(section(compare(args.updates, args.runs, child_env(), progress))))


if __name__ == "__main__":
    main()
