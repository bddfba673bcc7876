"""The cost of a batch per turn, local and on Ray: ``python -m benchmarks.batch`` (or ``python -m benchmarks.run
--batch``).

Each engine runs ``--turns`` turns of the demo agent (``python -m tinyacp.demo``, which lists a directory of three
files) at each concurrency, ``--rounds`` times, in a child process of its own per engine; the levels take turns
within a round, and each row gives the median over the rounds (and the range), since the same batch's CPU spreads
by a fifth or more from one minute to the next on a shared machine. The ``bare`` rows run the same turns with
``AsyncClient`` and a ``JsonlJournal`` each (its epoch fsync'ed with the decision, as a batch turn's is) in a loop
of their own: what a batch adds to the client is the difference. Measured per batch: turns per second (wall
clock) and tinyacp's client CPU per turn (the batch's ``BatchSummary.client_cpu_seconds``: the batch process during
the call, plus with Ray the actors from the end of their start-up; the agents' own CPU is not counted). The
driver's share of starting and stopping a batch's actors is in the Ray figures; the local cluster's start-up is
reported apart (once for the Ray rows, in their process: loopback, no dashboard). Output is Markdown. Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = (2, 8, 32)
_WARM_TURNS = 2
_ROUNDS = 3


def _row(engine: str, level: int, turns: int) -> dict[str, Any]:
    return {"engine": engine, "concurrency": level, "turns": turns, "walls": [], "cpus": []}


def _rows(engine: str, turns: int, concurrency: Sequence[int], rounds: int) -> list[dict[str, Any]]:
    """Run in the child: per round, one batch per concurrency, the same engine; returns a row per concurrency."""
    import tinyacp
    from tinyacp.batch import run_batch

    extra: dict[str, Any] = {}
    if engine == "ray":
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        started = time.monotonic()
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
        extra["cluster_start"] = time.monotonic() - started
    with tempfile.TemporaryDirectory(prefix="tinyacp-bench-batch-") as tmp:
        work = _work(Path(tmp))
        # The first batch of a process pays for its imports and first uses: reported apart, once.
        warm = run_batch(
            [{"id": n, "prompt": "list the files"} for n in range(_WARM_TURNS)],
            Path(tmp) / "warm",
            engine=engine,  # type: ignore[arg-type]
            concurrency=_WARM_TURNS,
            agent="demo",
            cwd=work,
            policy=tinyacp.PermissionPolicy(allow_all=True),
        )
        extra["first_batch_cpu"] = warm.client_cpu_seconds
        rows = {level: {**_row(engine, level, turns), **extra} for level in concurrency}
        for level in (level for _ in range(rounds) for level in concurrency):
            items = [{"id": n, "prompt": "list the files"} for n in range(turns)]
            started = time.monotonic()
            summary = run_batch(
                items,
                Path(tmp) / f"out-{level}-{len(rows[level]['walls'])}",
                engine=engine,  # type: ignore[arg-type]
                concurrency=level,
                agent="demo",
                cwd=work,
                policy=tinyacp.PermissionPolicy(allow_all=True),
            )
            wall = time.monotonic() - started
            if not summary.all_ok:
                raise RuntimeError(f"{engine} at {level}: {summary.failed} turns failed")
            rows[level]["walls"].append(wall)
            rows[level]["cpus"].append(summary.client_cpu_seconds)
    if engine == "ray":
        ray.shutdown()
    return list(rows.values())


def _bare_rows(turns: int, concurrency: Sequence[int], rounds: int) -> list[dict[str, Any]]:
    """The same turns with the asyncio client and a journal each, in a loop of our own: what a batch adds."""
    import asyncio

    import tinyacp
    from tinyacp.batch._engine import cpu_seconds

    async def one(number: int, work: Path, journals: Path) -> None:
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

    async def batch(level: int, work: Path, journals: Path, count: int = turns) -> None:
        slots = asyncio.Semaphore(level)

        async def guarded(number: int) -> None:
            async with slots:
                await one(number, work, journals)

        await asyncio.gather(*(guarded(number) for number in range(count)))

    with tempfile.TemporaryDirectory(prefix="tinyacp-bench-batch-") as tmp:
        work = _work(Path(tmp))
        journals = Path(tmp) / "journals-warm"
        journals.mkdir()
        cpu = cpu_seconds()
        asyncio.run(batch(_WARM_TURNS, work, journals, _WARM_TURNS))
        warm = cpu_seconds() - cpu
        rows = {level: {**_row("bare", level, turns), "first_batch_cpu": warm} for level in concurrency}
        for level in (level for _ in range(rounds) for level in concurrency):
            journals = Path(tmp) / f"journals-{level}-{len(rows[level]['walls'])}"
            journals.mkdir()
            started, cpu = time.monotonic(), cpu_seconds()
            asyncio.run(batch(level, work, journals))
            rows[level]["walls"].append(time.monotonic() - started)
            rows[level]["cpus"].append(cpu_seconds() - cpu)
    return list(rows.values())


def _work(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (work / name).write_text("x\n", encoding="utf-8")
    return work


def _child(
    engine: str, turns: int, concurrency: Sequence[int], rounds: int, env: dict[str, str]
) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "benchmarks.batch", "--child", engine, "--turns", str(turns)]
    command += ["--rounds", str(rounds)]
    command += ["--concurrency", ",".join(map(str, concurrency))]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {engine} rows failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def have_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of the rows."""
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
    firsts = {row["engine"]: row["first_batch_cpu"] for row in rows if "first_batch_cpu" in row}
    if firsts:
        each = ", ".join(f"{engine} {1000 * cpu:.0f} ms" for engine, cpu in firsts.items())
        lines.append(
            f"Before its rows, each engine's process ran a first batch of {_WARM_TURNS} turns, which also pays for "
            f"imports and first uses (client CPU of that whole batch: {each}); it is not in the rows."
        )
    ray_rows = [row for row in rows if "cluster_start" in row]
    if ray_rows:
        lines.append(f"Ray: the local cluster started in {ray_rows[0]['cluster_start']:.1f} s (once for its rows).")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=256, help="turns per batch (default 256)")
    parser.add_argument("--rounds", type=int, default=_ROUNDS, help=f"batches per row (default {_ROUNDS})")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="comma-separated levels")
    parser.add_argument("--engines", default="bare,local,ray", help="bare (the asyncio client alone), local, ray")
    parser.add_argument(
        "--quick", action="store_true", help="one round of 8 turns at 2 and 8, bare and local: checks that it runs"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.concurrency.split(",")]
    if args.child:
        if args.child == "bare":
            rows = _bare_rows(args.turns, levels, args.rounds)
        else:
            rows = _rows(args.child, args.turns, levels, args.rounds)
        print(json.dumps(rows))
        return 0
    engines = args.engines.split(",")
    if args.quick:
        args.turns, args.rounds, levels, engines = 8, 1, [2, 8], ["bare", "local"]
    if "ray" in engines and not have_ray():
        print("(Ray is not installed: the Ray rows are left out; pip install -e '.[ray]')", file=sys.stderr)
        engines.remove("ray")
    # As benchmarks.run does: the same tinyacp on the path, and bytecode cached whatever PYTHONDONTWRITEBYTECODE
    # says (every turn starts a Python agent, and an installed package has its .pyc files).
    from benchmarks import run

    with tempfile.TemporaryDirectory(prefix="tinyacp-bench-pycache-") as pycache:
        run.PYCACHE[:] = [pycache]
        try:
            env = run.child_env()
            rows = [row for engine in engines for row in _child(engine, args.turns, levels, args.rounds, env)]
        finally:
            run.PYCACHE.clear()
    print("\n".join(["## Batches: the demo agent's turns, local and on Ray", "", *table(rows)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
