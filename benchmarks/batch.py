"""The cost of a batch per turn, local and on Ray: ``python -m benchmarks.batch`` (or ``python -m benchmarks.run
--batch``).

Each engine runs ``--turns`` turns of the demo agent (``python -m tinyacp.demo``, which lists a directory of three
files) at each concurrency. A round starts one child process per engine, the engines taking turns, and each child
runs one batch per concurrency (after a first batch of two turns that pays for its imports and first uses,
reported apart); ``--rounds`` rounds, the engines' order turned around every other round, and each row gives the
median over them (and the range). Every engine thus meets the machine in the same minutes: the same batch's CPU
spreads by a fifth or more from one minute to the next on a shared machine.

The engines:

- ``minimal``: the floor. The same turns by the least a Python client can do while paying for what the promises
  cost (a process group per agent, a journal file per turn written before each act, an fsync before the permission
  answer, the exit waited for): a plain asyncio loop, no validation, no typed records, no timeouts, no limits. No
  client that keeps the promises costs less on this machine; it is written here for the measurement only.
- ``bare``: ``AsyncClient`` and a ``JsonlJournal`` each (its epoch fsync'ed with the decision, as a batch turn's is),
  in a loop of their own: what tinyacp's client costs over the floor.
- ``local`` and ``ray``: ``run_batch``; what a batch adds to the client is the difference with ``bare``.

Measured per batch: turns per second (wall clock) and the client's CPU per turn (for the engines, the batch's
``BatchSummary.client_cpu_seconds``: the batch process during the call, plus with Ray the actors from the end of
their start-up; the agents' own CPU is not counted). The driver's share of starting and stopping a batch's actors is
in the Ray figures; the local cluster's start-up is reported apart (loopback, no dashboard).

Nothing is deleted until every round has run, and each round first measures what creating a file costs in the
benchmark's directory: on ext4 without a journal the kernel skips the inodes freed in the last minutes, one by one,
when it makes a file, so after a mass deletion (a test run's temporary files) every turn's journal file costs more,
up to a millisecond of the client's CPU each. A round whose figure is far above the others met such a state.

Output is Markdown. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import PYCACHE, ROOT, child_env

CONCURRENCY = (2, 8, 32)
ENGINES = ("minimal", "bare", "local", "ray")
_WARM_TURNS = 2
_ROUNDS = 3
_PROBE_FILES = 200

Run = Callable[[int, int, Path], float]
"""Run ``count`` turns, at most ``level`` at a time, writing under a new directory; returns the client's CPU seconds."""

Turn = Callable[[int, Path, Path], Awaitable[None]]
"""One turn: its number, the agent's working directory, the directory of the journals."""


# ------------------------------------------------------------------------------------------------------------------
# In the child: one engine, one batch per concurrency.


def _child_rows(engine: str, directory: Path, turns: int, concurrency: Sequence[int]) -> list[dict[str, Any]]:
    """One batch per concurrency with one engine, in ``directory``; returns a row per concurrency."""
    extra: dict[str, Any] = {}
    if engine == "ray":
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        started = time.monotonic()
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
        extra["cluster_start"] = time.monotonic() - started
    work = _work(directory)
    loops: dict[str, Turn] = {"minimal": _minimal_turn, "bare": _bare_turn}
    run = _loop(loops[engine], work) if engine in loops else _engine(engine, work)
    extra["first_batch_cpu"] = run(_WARM_TURNS, _WARM_TURNS, directory / "warm")
    rows = []
    for level in concurrency:
        started = time.monotonic()
        cpu = run(level, turns, directory / f"out-{level}")
        rows.append({"engine": engine, "concurrency": level, "turns": turns, "wall": time.monotonic() - started})
        rows[-1].update(cpu=cpu, **extra)
    if engine == "ray":
        ray.shutdown()
    return rows


def _engine(engine: str, work: Path) -> Run:
    """Batches by ``run_batch`` with the engine."""
    import tinyacp
    from tinyacp.batch import run_batch

    def run(level: int, count: int, out: Path) -> float:
        summary = run_batch(
            [{"id": n, "prompt": "list the files"} for n in range(count)],
            out,
            engine=engine,  # type: ignore[arg-type]
            concurrency=level,
            agent="demo",
            cwd=work,
            policy=tinyacp.PermissionPolicy(allow_all=True),
        )
        if not summary.all_ok:
            raise RuntimeError(f"{engine} at {level}: {summary.failed} turns failed")
        return summary.client_cpu_seconds

    return run


def _loop(turn: Turn, work: Path) -> Run:
    """Batches by a plain asyncio loop of ``turn``s under a semaphore; the CPU is this process's."""
    from tinyacp.batch._plan import cpu_seconds

    async def batch(level: int, count: int, journals: Path) -> None:
        slots = asyncio.Semaphore(level)

        async def guarded(number: int) -> None:
            async with slots:
                await turn(number, work, journals)

        await asyncio.gather(*(guarded(number) for number in range(count)))

    def run(level: int, count: int, out: Path) -> float:
        out.mkdir()
        cpu = cpu_seconds()
        asyncio.run(batch(level, count, out))
        return cpu_seconds() - cpu

    return run


async def _bare_turn(number: int, work: Path, journals: Path) -> None:
    """A turn with ``AsyncClient`` and a ``JsonlJournal``, as a batch turn makes one but without the batch."""
    import tinyacp

    journal = tinyacp.JsonlJournal(journals / f"{number}.jsonl")
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"],
        cwd=work,
        observer=journal,
        epoch=journal.begin_epoch(durable=False),
        policy=tinyacp.PermissionPolicy(allow_all=True),
        stderr="tail",
    )
    async with tinyacp.AsyncClient(options) as client:
        await client.initialize()
        session = await client.new_session(work)
        await client.prompt(session.id, "list the files")
    journal.close()


async def _minimal_turn(number: int, work: Path, journals: Path) -> None:
    """The floor: the same turn by a client that does nothing it need not (see the module's docstring)."""
    turn = _Minimal(journals / f"{number}.jsonl", work)
    try:
        turn.send("initialize", {"protocolVersion": 1})
        await turn.answer()
        turn.send("session/new", {"cwd": str(work), "mcpServers": []})
        session = (await turn.answer())["sessionId"]
        turn.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "list the files"}]})
        await turn.answer()
    finally:
        await turn.finish()


class _Minimal:
    """One agent and its journal file, for :func:`_minimal_turn`: lines in a queue, records written before each act."""

    def __init__(self, journal: Path, work: Path) -> None:
        import msgspec

        self.encode, self.decode = msgspec.json.encode, msgspec.json.decode
        self.loop = asyncio.get_running_loop()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        self.journal = os.open(journal, flags, 0o600)
        to_agent, self.stdin = os.pipe()
        self.stdout, from_agent = os.pipe()
        command = [sys.executable, "-m", "tinyacp.demo"]
        options: dict[str, Any] = {"stderr": subprocess.DEVNULL, "start_new_session": True}
        self.agent = subprocess.Popen(command, cwd=work, stdin=to_agent, stdout=from_agent, **options)
        os.close(to_agent)
        os.close(from_agent)
        os.set_blocking(self.stdout, False)
        self.lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.buffer = bytearray()
        self.pending: list[bytes] = []
        self.next_id = 0
        self.loop.add_reader(self.stdout, self.readable)

    def readable(self) -> None:
        data = os.read(self.stdout, 65536)
        if not data:
            self.loop.remove_reader(self.stdout)
            self.lines.put_nowait(None)
        self.buffer.extend(data)
        while (end := self.buffer.find(b"\n")) >= 0:
            self.lines.put_nowait(bytes(self.buffer[:end]))
            del self.buffer[: end + 1]

    def write_journal(self, *, sync: bool = False) -> None:
        os.write(self.journal, b"".join(self.pending))
        self.pending.clear()
        if sync:
            os.fsync(self.journal)

    def send(self, method: str | None, body: Any, request_id: int | None = None) -> None:
        """A request (``method``), or the response to ``request_id``; recorded and written before it is sent."""
        if method is not None:
            request_id, self.next_id = self.next_id, self.next_id + 1
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}
        else:
            message = {"jsonrpc": "2.0", "id": request_id, "result": body}
        line = self.encode(message)
        self.pending.append(b'{"dir":"out","ts":%.6f,"msg":%b}\n' % (time.time(), line))
        self.write_journal()
        os.write(self.stdin, line + b"\n")

    async def answer(self) -> Any:
        """The result of our last request; a permission request meanwhile is allowed, its decision fsync'ed."""
        while (line := await self.lines.get()) is not None:
            self.pending.append(b'{"dir":"in","ts":%.6f,"msg":%b}\n' % (time.time(), line))
            message = self.decode(line)
            if message.get("method") == "session/request_permission":
                self.pending.append(b'{"decision":"allow","id":%d}\n' % message["id"])
                self.write_journal(sync=True)
                self.send(None, {"outcome": {"outcome": "selected", "optionId": "allow"}}, message["id"])
            elif message.get("id") == self.next_id - 1 and "method" not in message:
                self.write_journal()
                return message["result"]
        raise RuntimeError("the agent closed its output")

    async def finish(self) -> None:
        """Close the agent's input, wait for its exit on a pidfd, reap it, close every fd."""
        os.close(self.stdin)
        self.loop.remove_reader(self.stdout)
        exited: asyncio.Future[None] = self.loop.create_future()
        pidfd = os.pidfd_open(self.agent.pid)
        self.loop.add_reader(pidfd, lambda: None if exited.done() else exited.set_result(None))
        await exited
        self.loop.remove_reader(pidfd)
        os.close(pidfd)
        self.agent.wait()
        os.close(self.stdout)
        os.close(self.journal)


def _work(directory: Path) -> Path:
    work = directory / "work"
    work.mkdir(parents=True)
    for name in ("a.txt", "b.txt", "c.txt"):
        (work / name).write_text("x\n", encoding="utf-8")
    return work


# ------------------------------------------------------------------------------------------------------------------
# In the parent: rounds of children, the rows, the table.


def _child(engine: str, directory: Path, turns: int, concurrency: Sequence[int], env: dict[str, str]) -> list[Any]:
    command = [sys.executable, "-m", "benchmarks.batch", "--child", engine, "--dir", str(directory)]
    command += ["--turns", str(turns), "--concurrency", ",".join(map(str, concurrency))]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {engine} rows failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def creation_cost(directory: Path, count: int = _PROBE_FILES) -> float:
    """The median CPU seconds of creating an empty file in a new directory under ``directory`` (the files stay)."""
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=directory))
    costs = []
    for number in range(count):
        started = time.thread_time()
        os.close(os.open(probe / str(number), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        costs.append(time.thread_time() - started)
    return statistics.median(costs)


def rounds(
    engines: Sequence[str], turns: int, concurrency: Sequence[int], *, count: int, directory: Path, env: dict[str, str]
) -> tuple[list[dict[str, Any]], list[float]]:
    """Run the rounds; returns a row per engine and concurrency (its batches' walls and CPUs) and each round's
    file-creation cost."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    probes = []
    for number in range(count):
        probes.append(creation_cost(directory))
        # The order turns around every round: a child meets the filesystem its predecessors' agents left.
        for engine in engines if number % 2 == 0 else reversed(engines):
            for batch in _child(engine, directory / f"{engine}-{number}", turns, concurrency, env):
                row = rows.setdefault((engine, batch["concurrency"]), {**batch, "walls": [], "cpus": [], "firsts": []})
                row["walls"].append(batch["wall"])
                row["cpus"].append(batch["cpu"])
                row["firsts"].append(batch["first_batch_cpu"])
                if "cluster_start" in batch:
                    row.setdefault("cluster_starts", []).append(batch["cluster_start"])
    return sorted(rows.values(), key=lambda row: (ENGINES.index(row["engine"]), row["concurrency"])), probes


def have_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def table(rows: list[dict[str, Any]], probes: Sequence[float]) -> list[str]:
    """The Markdown table of the rows, and what the machine's file creation cost in each round."""
    lines = [
        "| engine | concurrency | turns per batch | rounds | turns/s, median | client CPU per turn, median (min-max) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        turns = row["turns"]
        rate = statistics.median(turns / wall for wall in row["walls"])
        cpu = [1000 * used / turns for used in row["cpus"]]
        lines.append(
            f"| {row['engine']} | {row['concurrency']} | {turns} | {len(cpu)} | {rate:.1f} "
            f"| {statistics.median(cpu):.1f} ms ({min(cpu):.1f}-{max(cpu):.1f}) |"
        )
    lines.append("")
    firsts: dict[str, float] = {}
    for row in rows:
        firsts.setdefault(row["engine"], statistics.median(row["firsts"]))
    each = ", ".join(f"{engine} {1000 * cpu:.0f} ms" for engine, cpu in firsts.items())
    lines.append(
        f"Before its rows, each engine's process ran a first batch of {_WARM_TURNS} turns, which also pays for imports "
        f"and first uses (client CPU of that whole batch, median: {each}); it is not in the rows."
    )
    starts: list[float] = next((row["cluster_starts"] for row in rows if "cluster_starts" in row), [])
    if starts:
        lines.append(f"Ray: the local cluster started in {statistics.median(starts):.1f} s (median; not in the rows).")
    costs = ", ".join(f"{1e6 * cost:.0f}" for cost in probes)
    lines.append(
        f"Creating an empty file in the benchmark's directory, median CPU over {_PROBE_FILES} files before each "
        f"round: {costs} µs (each turn creates its journal file)."
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=256, help="turns per batch (default 256)")
    parser.add_argument("--rounds", type=int, default=_ROUNDS, help=f"batches per row (default {_ROUNDS})")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="comma-separated levels")
    parser.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help="minimal (the floor), bare (the asyncio client alone), local, ray",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one round of 8 turns at 2 and 8, minimal, bare and local: checks that it runs",
    )
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.concurrency.split(",")]
    if args.child:
        print(json.dumps(_child_rows(args.child, Path(args.dir), args.turns, levels)))
        return 0
    engines = args.engines.split(",")
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engines: {', '.join(unknown)} (choose from {', '.join(ENGINES)})")
    if args.quick:
        args.turns, args.rounds, levels, engines = 8, 1, [2, 8], ["minimal", "bare", "local"]
    if "ray" in engines and not have_ray():
        print("(Ray is not installed: the Ray rows are left out; pip install -e '.[ray]')", file=sys.stderr)
        engines.remove("ray")
    # As benchmarks.run does: the same tinyacp on the path, and bytecode cached whatever PYTHONDONTWRITEBYTECODE
    # says (every turn starts a Python agent, and an installed package has its .pyc files). One directory holds
    # everything, deleted at the very end: a deletion between rounds would make the next round's files dearer.
    directory = Path(tempfile.mkdtemp(prefix="tinyacp-bench-batch-"))
    PYCACHE[:] = [str(directory / "pycache")]
    try:
        rows, probes = rounds(engines, args.turns, levels, count=args.rounds, directory=directory, env=child_env())
    finally:
        PYCACHE.clear()
        shutil.rmtree(directory, ignore_errors=True)
    print("\n".join(["## Batches: the demo agent's turns, local and on Ray", "", *table(rows, probes)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
