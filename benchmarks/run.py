"""tinyacp against the official ACP SDK and the bare limit, in one run: ``python -m benchmarks.run``.

Every measurement runs in a fresh process (:mod:`benchmarks.rows`) against a fresh flood agent
(:mod:`benchmarks.flood_agent`), and the rows take turns: round 1 runs every row once, then round 2, and so on,
so a burst of load on the machine hits all rows alike. The ratios are taken within a round (tinyacp's round-3
rate over the SDK's round-3 rate) and their median is reported, so the machine's noise cancels as far as it can.

The output is Markdown: the machine, one table per flood size, the reply-limit memory table, the start-up and
teardown times with and without ``Options(supervise=True)``, the supervisor's cost, and which of the targets of
the benchmark's issue were met. ``--quick`` runs tiny floods once each, to check that everything still runs (the
smoke test does). Nothing here asserts a time.

The official SDK (``agent-client-protocol``) is a benchmark-only dependency (it is in the ``test`` extra, where
the tests use it as a peer); without it the SDK rows are skipped. Nothing is installed by this script.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tinyacp
from benchmarks.common import PYCACHE, ROOT, child_env, median_range, ms, table

MiB = 1 << 20
ROW_TIMEOUT = 600.0
"""Seconds one row may take (the SDK at a million updates takes tens of seconds)."""


@dataclass(frozen=True)
class Row:
    key: str
    """Names the row's samples; also the :mod:`benchmarks.rows` row to run, unless ``argv`` says otherwise."""
    label: str
    argv: tuple[str, ...] = ()
    """The :mod:`benchmarks.rows` row and its options, when they are not just ``key``."""

    @property
    def command(self) -> tuple[str, ...]:
        return self.argv or (self.key,)


CLIENT = Row("client", "tinyacp `Client`")
SUPERVISED = Row("client-supervised", "tinyacp `Client`, `supervise=True`", ("client", "--supervise"))
ASYNC = Row("async", "tinyacp `AsyncClient`")
JOURNAL = Row("journal", "tinyacp `Client` + `JsonlJournal` (to a file)")
SDK = Row("sdk", "official SDK (`acp`)")
DECODE = Row("decode", "bare `readline` + tinyacp's msgspec decoder")
JSON = Row("json", "bare `readline` + `json.loads`")
READ = Row("read", "bare `readline` only")
PIPE = Row("pipe", "flood agent's own rate (1 MiB `os.read`, no split)")
THROUGHPUT_ROWS = (CLIENT, SUPERVISED, ASYNC, JOURNAL, SDK, DECODE, JSON, READ, PIPE)


@dataclass
class Samples:
    """One row's runs at one flood size, by round."""

    runs: dict[int, dict[str, Any]] = field(default_factory=dict)

    def rate(self, round_: int) -> float | None:
        run = self.runs.get(round_)
        return None if run is None else run["updates"] / run["wall"]

    def values(self, name: str) -> list[float]:
        return [run[name] for run in self.runs.values()]

    def rates(self) -> list[float]:
        return [run["updates"] / run["wall"] for run in self.runs.values()]


# ----------------------------------------------------------------------------------------------------------------
# Running rows


def run_row(key: str, *args: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.rows", key, *args]
    done = subprocess.run(command, cwd=ROOT, env=child_env(), capture_output=True, timeout=ROW_TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[2:])} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def journal_available() -> bool:
    try:
        tinyacp.JsonlJournal  # noqa: B018 (the lazy import is what is being tried)
    except (AttributeError, ImportError):
        return False
    return True


def sdk_version() -> str | None:
    try:
        return importlib.metadata.version("agent-client-protocol")
    except importlib.metadata.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------------------------------------------
# Formatting


def fmt_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.2f} M"
    if rate >= 1e3:
        return f"{rate / 1e3:.0f} k"
    return f"{rate:.0f}"


def fmt_n(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000} 000 000"
    return f"{n:,}".replace(",", " ")


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f}"


def ratio(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return (
        f"{statistics.median(values):.2f}x"
        if len(values) == 1
        else f"{statistics.median(values):.2f}x (n={len(values)})"
    )


def paired(a: Samples, b: Samples) -> list[float]:
    """a's rate over b's, round by round, for the rounds where both ran."""
    out = []
    for round_ in a.runs:
        ra, rb = a.rate(round_), b.rate(round_)
        if ra is not None and rb is not None:
            out.append(ra / rb)
    return out


# ----------------------------------------------------------------------------------------------------------------
# The report


def machine() -> list[str]:
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    memory = ""
    try:
        with open("/proc/meminfo") as meminfo:
            memory = f", {int(meminfo.readline().split()[1]) / MiB:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return [
        f"- CPU: {model}, {os.cpu_count()} cores ({usable} usable){memory}",
        f"- OS: {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()} ({platform.python_implementation()})",
        f"- tinyacp {tinyacp.__version__}, msgspec {importlib.metadata.version('msgspec')}, "
        f"agent-client-protocol {sdk_version() or 'not installed'}",
        f"- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]


def throughput_table(n: int, samples: dict[str, Samples]) -> list[str]:
    sdk, decode = samples.get(SDK.key), samples.get(DECODE.key)
    rows = []
    for row in THROUGHPUT_ROWS:
        s = samples.get(row.key)
        if s is None or not s.runs:
            continue
        cpu = [c / u * 1e6 for c, u in zip(s.values("cpu"), s.values("updates"), strict=True)]
        rows.append(
            [
                row.label,
                median_range(s.rates(), fmt_rate),
                f"{statistics.median(cpu):.2f}",
                mib(max(s.values("peak_rss_kib"))),
                "1x" if row is SDK else ratio(paired(s, sdk)) if sdk else "-",
                "1x" if row is DECODE else ratio(paired(s, decode)) if decode else "-",
                str(len(s.runs)),
            ]
        )
    header = ["N = " + fmt_n(n), "updates/s, median (min-max)", "client CPU µs/update", "peak RSS MiB"]
    return table([*header, "x SDK", "x bare decode", "runs"], rows)


def memory_table(sizes: Sequence[int], samples: dict[tuple[str, int], Samples]) -> list[str]:
    rows = []
    small, large = sizes[0], sizes[-1]
    for row in (CLIENT, ASYNC):
        s_small, s_large = samples[row.key, small], samples[row.key, large]
        peak_small = statistics.median(s_small.values("peak_rss_kib"))
        peak_large = statistics.median(s_large.values("peak_rss_kib"))
        growth = [
            statistics.median(
                [p - b for p, b in zip(s.values("peak_rss_kib"), s.values("rss_before_kib"), strict=True)]
            )
            for s in (s_small, s_large)
        ]
        blocks = [statistics.median(s.values("blocks_retained")) for s in (s_small, s_large)]
        rows.append(
            [
                row.label,
                mib(peak_small),
                mib(peak_large),
                f"{peak_large / peak_small:.3f}",
                f"{mib(growth[0])} / {mib(growth[1])}",
                f"{blocks[0]:.0f} / {blocks[1]:.0f}",
                median_range(s_large.rates(), fmt_rate),
            ]
        )
    header = [
        "max_reply_bytes = 1 MiB",
        f"peak RSS MiB, N = {fmt_n(small)}",
        f"N = {fmt_n(large)}",
        "ratio",
        "RSS growth during the prompt MiB (small / large N)",
        "blocks retained after the prompt (small / large N)",
        f"updates/s at N = {fmt_n(large)}",
    ]
    return table(header, rows)


@dataclass(frozen=True)
class Teardown:
    """One teardown case: the agent's grandchildren, ``stubborn`` of them ignoring SIGTERM, and ``escaped`` more
    that left the group (``setsid``) and ignore SIGTERM."""

    stubborn: int
    escaped: int = 0

    def describe(self, grandchildren: int) -> str:
        what = "all die on SIGTERM" if not self.stubborn else f"{self.stubborn} ignores SIGTERM"
        text = f"agent + {grandchildren} grandchildren, {what}"
        if self.escaped:
            text += f", + {self.escaped} escaped (`setsid`, ignores SIGTERM)"
        return text


TEARDOWNS = (Teardown(0), Teardown(1), Teardown(0, escaped=1))


@dataclass
class Edges:
    import_ms: list[float]
    msgspec_ms: list[float]
    help_ms: list[float]
    """``tinyacp --help`` as the console script runs it, whole process, wall time."""
    python_ms: list[float]
    """An interpreter that does nothing (``python -c pass``), for scale."""
    initialize: dict[bool, list[dict[str, Any]]]
    """By ``supervise``: one row's report per run (``seconds``; with the supervisor, its memory)."""
    teardown: dict[tuple[Teardown, bool], list[dict[str, Any]]]
    """By case and ``supervise``."""

    def initialize_ms(self, supervise: bool) -> list[float]:
        return [run["seconds"] * 1000 for run in self.initialize[supervise]]


@dataclass
class Many:
    """The cost of many clients: ``idle`` by ``async`` (one report per run), ``turns`` one report per run."""

    idle_clients: int
    clients: int
    idle: dict[bool, list[dict[str, Any]]] = field(default_factory=lambda: {False: [], True: []})
    turns: list[dict[str, Any]] = field(default_factory=list)

    def idle_kib(self, use_async: bool) -> list[float]:
        return [run["rss_per_client_kib"] for run in self.idle[use_async]]


def kib(value: float) -> str:
    return f"{value:.1f} KiB"


def seconds(value: float) -> str:
    return f"{value:.2f} s"


def many_section(many: Many) -> list[str]:
    turns = many.turns
    fds = {run["fds_per_client"] for runs in many.idle.values() for run in runs}
    limits = {f"{run['nofile_before'][0]} → {run['nofile_after'][0]} (hard {run['nofile_after'][1]})" for run in turns}
    rows = [
        [
            f"{label} after `initialize`: RSS each adds ({many.idle_clients} clients)",
            median_range(many.idle_kib(use_async), kib),
        ]
        for label, use_async in (("`Client`", False), ("`AsyncClient`", True))
    ]
    rows += [
        ["file descriptors a running client holds", ", ".join(f"{n:g}" for n in sorted(fds))],
        [
            f"{many.clients} `AsyncClient`s, one turn each, all at once: until every turn is done",
            median_range([run["wall"] for run in turns], seconds),
        ],
        ["… of which starting the agents", median_range([run["spawn"] for run in turns], seconds)],
        ["… then closing them all", median_range([run["close"] for run in turns], seconds)],
        [
            "… the client process's peak RSS / before the clients, MiB",
            f"{mib(max(run['peak_rss_kib'] for run in turns))} / "
            f"{mib(statistics.median(run['rss_before_kib'] for run in turns))}",
        ],
        ["… soft `RLIMIT_NOFILE` before → after", ", ".join(sorted(limits))],
    ]
    return table(["", "median (min-max)"], rows)


def measure_many(args: argparse.Namespace, progress: Callable[[str], None]) -> Many:
    many = Many(idle_clients=20 if args.quick else 200, clients=20 if args.quick else args.clients)
    for round_ in range(1 if args.quick else 3):
        for use_async in (False, True):
            progress(f"round {round_ + 1}: {many.idle_clients} idle {'AsyncClient' if use_async else 'Client'}s")
            options = ["--clients", str(many.idle_clients), *(["--async"] if use_async else [])]
            many.idle[use_async].append(run_row("idle", *options))
        progress(f"round {round_ + 1}: {many.clients} AsyncClients, one turn each")
        many.turns.append(run_row("many", "--clients", str(many.clients)))
    return many


def import_times(runs: int, module: str) -> list[float]:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = []
    for _ in range(runs + 1):  # the first fills the bytecode cache and is not counted
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, check=True, timeout=60
        )
        out.append(float(done.stdout) * 1000)
    return out[1:]


HELP_CODE = "import sys; from tinyacp.cli import main; sys.argv[0] = 'tinyacp'; sys.exit(main(['--help']))"
"""What the ``tinyacp`` console script runs, with ``--help``."""


def process_times(runs: int, code: str) -> list[float]:
    """Wall time of whole ``python -c CODE`` processes, from the start to the exit, in ms."""
    out = []
    for _ in range(runs + 1):  # the first fills the bytecode cache and is not counted
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, check=True, timeout=60
        )
        out.append((time.perf_counter() - start) * 1000)
    return out[1:]


def teardown_cell(runs: Sequence[dict[str, Any]]) -> str:
    left = max(r["left"] for r in runs)
    escaped = max(r["escaped_left"] for r in runs)
    cell = median_range([r["seconds"] * 1000 for r in runs], ms(0)) + f"; processes left: {left}"
    return cell + (f" ({escaped} escaped)" if escaped else "")


def edges_section(edges: Edges, kill_grace: float, grandchildren: int) -> list[str]:
    memory = edges.initialize[True]
    rows = [
        ["`import tinyacp` (fresh interpreter, bytecode cached)", median_range(edges.import_ms, ms(1)), ""],
        ["… of which `import msgspec` alone", median_range(edges.msgspec_ms, ms(1)), ""],
        ["`tinyacp --help`, the whole process (wall time)", median_range(edges.help_ms, ms(1)), ""],
        ["… of which the interpreter alone (`python -c pass`)", median_range(edges.python_ms, ms(1)), ""],
        [
            "`Client(options)` → finished `initialize`, demo agent (`python -m tinyacp.demo`)",
            median_range(edges.initialize_ms(False), ms(1)),
            median_range(edges.initialize_ms(True), ms(1)),
        ],
        [
            "the supervisor's memory after `initialize`: RSS / PSS / private, MiB",
            "",
            " / ".join(
                mib(statistics.median(r[name] for r in memory)) for name in ("rss_kib", "pss_kib", "private_kib")
            ),
        ],
    ]
    for case in TEARDOWNS:
        rows.append(
            [
                f"teardown (`close()`), {case.describe(grandchildren)}; kill_grace = {kill_grace:g} s",
                teardown_cell(edges.teardown[case, False]),
                teardown_cell(edges.teardown[case, True]),
            ]
        )
    return table(["", "median (min-max)", "with `supervise=True`"], rows)


def supervisor_section(
    sizes: Sequence[int], throughput: dict[int, dict[str, Samples]], edges: Edges, kill_grace: float
) -> list[str]:
    """What ``supervise=True`` costs and does, in a few lines, from the rows above."""
    lines = []
    for n in sizes:
        s = throughput[n]
        cpu = max(s[SUPERVISED.key].values("supervisor_cpu")) * 1000
        client_cpu = statistics.median(s[SUPERVISED.key].values("cpu")) * 1000
        lines.append(
            f"- Throughput at N = {fmt_n(n)}: {ratio(paired(s[SUPERVISED.key], s[CLIENT.key]))} the `Client` row's "
            f"updates/s, same round; the supervisor's CPU time during the prompt: {cpu:.0f} ms at most "
            f"(the client's: {client_cpu:.0f} ms)."
        )
    start = statistics.median(edges.initialize_ms(True)) - statistics.median(edges.initialize_ms(False))
    lines.append(f"- Start-up: {start:+.1f} ms to a finished `initialize`.")
    lines.append(
        f"- Teardown (the table above): half of `kill_grace` ({kill_grace / 2:g} s here) after a stop begins, the "
        "supervisor sends SIGKILL to the agent's descendants still alive outside its group, or to all of them once "
        "the agent itself has exited."
    )
    return lines


def targets_section(
    sizes: Sequence[int],
    throughput: dict[int, dict[str, Samples]],
    memory: dict[tuple[str, int], Samples],
    edges: Edges,
    many: Many,
) -> list[str]:
    lines = []

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    for n in sizes:
        s = throughput[n]
        if SDK.key in s and s[SDK.key].runs:
            r = statistics.median(paired(s[CLIENT.key], s[SDK.key]))
            lines.append(f"- `Client` ≥ 20x the SDK's updates/s at N = {fmt_n(n)}: {r:.1f}x — {verdict(r >= 20)}")
        r = statistics.median(paired(s[CLIENT.key], s[DECODE.key]))
        lines.append(
            f"- `Client` ≥ 0.7x the bare read-and-decode loop at N = {fmt_n(n)}: {r:.2f}x — {verdict(r >= 0.7)}"
        )
    small, large = sizes[0], sizes[-1]
    for row in (CLIENT, ASYNC):
        peak_small = statistics.median(memory[row.key, small].values("peak_rss_kib"))
        peak_large = statistics.median(memory[row.key, large].values("peak_rss_kib"))
        r = peak_large / peak_small
        lines.append(
            f"- {row.label}: peak RSS at N = {fmt_n(large)} within 10% of N = {fmt_n(small)} (reply limit 1 MiB): "
            f"{r:.3f} — {verdict(r <= 1.10)}"
        )
    import_ms = statistics.median(edges.import_ms)
    lines.append(f"- `import tinyacp` under 60 ms: {import_ms:.1f} ms — {verdict(import_ms < 60)}")
    for label, use_async in (("`Client`", False), ("`AsyncClient`", True)):
        added = statistics.median(many.idle_kib(use_async))
        lines.append(
            f"- An idle {label} after `initialize` adds at most 256 KiB of RSS: {added:.1f} KiB — "
            f"{verdict(added <= 256)}"
        )
    help_ms = statistics.median(edges.help_ms)
    lines.append(f"- `tinyacp --help` under 100 ms: {help_ms:.1f} ms — {verdict(help_ms < 100)}")
    extra = large - small
    for row in (CLIENT, ASYNC):
        blocks = [statistics.median(memory[row.key, n].values("blocks_retained")) for n in (small, large)]
        per_update = (blocks[1] - blocks[0]) / extra
        lines.append(
            f"- {row.label}, no per-update allocation left behind: {blocks[0]:.0f} vs {blocks[1]:.0f} blocks "
            f"retained after {fmt_n(small)} vs {fmt_n(large)} updates ({per_update:+.5f} per update) — "
            f"{verdict(abs(per_update) < 0.001)}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny floods, one run each: checks that it runs")
    parser.add_argument("--runs", type=int, default=5, help="rounds of the throughput and memory rows")
    parser.add_argument("--sdk-large-runs", type=int, default=3, help="SDK runs at the largest N (slow)")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    parser.add_argument("--batch", action="store_true", help="run the batch rows instead (benchmarks/batch.py)")
    parser.add_argument("--clients", type=int, default=500, help="AsyncClients doing one turn at once")
    args = parser.parse_args(argv)
    if args.batch:
        from benchmarks import batch

        batch.main(["--quick"] if args.quick else [])
        return
    with tempfile.TemporaryDirectory(prefix="tinyacp-bench-pycache-") as pycache:
        PYCACHE[:] = [pycache]
        try:
            report(args)
        finally:
            PYCACHE.clear()


def report(args: argparse.Namespace) -> None:  # noqa: C901, PLR0912  one section of the report after another; splitting hides its order

    sizes = [1000, 5000] if args.quick else [100_000, 1_000_000]
    runs = 1 if args.quick else args.runs
    kill_grace = 0.2 if args.quick else 2.0
    grandchildren = 4 if args.quick else 20
    have_sdk = sdk_version() is not None
    have_journal = journal_available()
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    throughput: dict[int, dict[str, Samples]] = {n: {} for n in sizes}
    memory: dict[tuple[str, int], Samples] = {}
    for round_ in range(runs):
        for n in sizes:
            for row in THROUGHPUT_ROWS:
                if (row is SDK and not have_sdk) or (row is JOURNAL and not have_journal):
                    continue
                sdk_large_runs = 0 if args.quick else args.sdk_large_runs  # quick: the SDK's import once is enough
                if row is SDK and n == sizes[-1] and n != sizes[0] and round_ >= sdk_large_runs:
                    continue
                progress(f"round {round_ + 1}/{runs}: {row.key} N={n}")
                samples = throughput[n].setdefault(row.key, Samples())
                samples.runs[round_] = run_row(*row.command, "--updates", str(n))
            for row in (CLIENT, ASYNC):
                progress(f"round {round_ + 1}/{runs}: {row.key} N={n}, reply limit 1 MiB")
                samples = memory.setdefault((row.key, n), Samples())
                samples.runs[round_] = run_row(row.key, "--updates", str(n), "--reply-limit", str(MiB))

    many = measure_many(args, progress)

    progress("import, initialize and teardown")
    edge_runs = 1 if args.quick else 9
    edges = Edges(
        import_ms=import_times(edge_runs, "tinyacp"),
        msgspec_ms=import_times(edge_runs, "msgspec"),
        help_ms=process_times(edge_runs, HELP_CODE),
        python_ms=process_times(edge_runs, "pass"),
        initialize={False: [], True: []},
        teardown={},
    )
    for _ in range(edge_runs):  # taking turns, like the throughput rows
        for supervise in (False, True):
            edges.initialize[supervise].append(run_row("initialize", *(["--supervise"] if supervise else [])))
    for _ in range(1 if args.quick else 3):
        for case in TEARDOWNS:
            for supervise in (False, True):
                options = ["--grandchildren", str(grandchildren), "--stubborn", str(case.stubborn)]
                options += ["--escaped", str(case.escaped), "--kill-grace", str(kill_grace)]
                if supervise:
                    options.append("--supervise")
                edges.teardown.setdefault((case, supervise), []).append(run_row("teardown", *options))

    from benchmarks import commands

    command_updates = 1000 if args.quick else 100_000
    versus = commands.compare(command_updates, 1 if args.quick else min(args.runs, 3), child_env(), progress)

    out = ["## Machine", "", *machine(), ""]
    out += [
        "## Throughput: one prompt answered with N `agent_message_chunk` updates (40 bytes of text each)",
        "",
        "The whole reply is kept (limits raised to fit it); the observer is a no-op. Wall time runs from sending",
        "the prompt to having its answer; CPU is the client process's own (all threads); peak RSS is its `ru_maxrss`.",
        "Ratios are this row's updates/s over the SDK's (or the bare decode loop's) in the same round, median over",
        "the rounds where both ran.",
        "",
    ]
    for n in sizes:
        out += [*throughput_table(n, throughput[n]), ""]
    if not have_sdk:
        out += ["The SDK is not installed (`pip install -e '.[test]'`): its rows are left out.", ""]
    if not have_journal:
        out += ["`tinyacp.JsonlJournal` is not available in this tree: its row is left out.", ""]
    out += [
        "## Memory with a reply limit: `TransferLimits(max_reply_bytes=1 MiB)`",
        "",
        "The flood agent ignores the client's `session/cancel` and sends every update; the client keeps the first",
        "MiB of the reply and must drop the rest without growing. Blocks are `sys.getallocatedblocks()` after the",
        "prompt minus before it, the reply's text included.",
        "",
        *memory_table(sizes, memory),
        "",
        "## Start-up and teardown",
        "",
        "With `supervise=True` the client starts the agent under a supervisor process (a child subreaper) that",
        "also stops the processes which left the agent's process group. The escaped sleepers the client leaves",
        "behind are killed by the benchmark after counting.",
        "",
        *edges_section(edges, kill_grace, grandchildren),
        "",
        "## Many agents in one process",
        "",
        "Each client's agent is `benchmarks/tiny_agent.sh`, a POSIX shell loop that answers a prompt with one",
        "chunk: the memory of interest is the client process's. RSS added is the process's `VmRSS` after the",
        "clients' `initialize` minus before, over the number of clients, after one client already warmed every",
        "code path.",
        "",
        *many_section(many),
        "",
        "## The command against the command: `tinyacp prompt` and acpx on one flood",
        "",
        "Both run the flood agent with a prompt that asks for N updates and print only the reply. Wall time and",
        "CPU are the whole command's, start-up and teardown included; peak RSS is the largest sum over the",
        "command's process tree (the agent included), sampled every 10 ms. See `benchmarks/commands.py`.",
        "",
        *commands.section(versus),
        "",
        "## The supervisor's cost (`Options(supervise=True)`)",
        "",
        *supervisor_section(sizes, throughput, edges, kill_grace),
        "",
        "## Targets",
        "",
        *targets_section(sizes, throughput, memory, edges, many),
        "",
    ]
    if args.quick:
        out.insert(0, "_Quick run (`--quick`): tiny floods, one run each; the figures mean nothing._\n")
    text = "\n".join(out)
    print(text)
    if args.output is not None:
        args.output.write_text(text)
    progress("done")


if __name__ == "__main__":
    main()
