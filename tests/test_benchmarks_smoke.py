"""The benchmark still runs, and the memory claim it reports holds as behaviour.

``benchmarks/`` is not part of the suite and asserts no time; running it with tiny floods here keeps it from
rotting. The memory claim is a behaviour, so it is asserted: past the reply limit, handling more updates leaves
nothing behind and the peak of what is allocated does not grow with their number.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import tinyacp
from conftest import TESTS, ClientLike

ROOT = TESTS.parent
FLOOD_AGENT = ROOT / "benchmarks" / "flood_agent.py"
KiB = 1024
SMALL, LARGE = 10_000, 100_000


def test_the_benchmark_runs_end_to_end_and_prints_every_row_and_target(tmp_path: Path) -> None:
    env = dict(os.environ)
    src = str(Path(tinyacp.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    output = tmp_path / "report.md"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--output", str(output)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = done.stdout.decode()
    assert output.read_text().strip() == report.strip()
    for label in (
        "tinyacp `Client`",
        "tinyacp `AsyncClient`",
        "official SDK (`acp`)",
        "bare `readline` + tinyacp's msgspec decoder",
        "bare `readline` only",
        "flood agent's own rate",
        "`import tinyacp`",
        "finished `initialize`",
        "1 ignores SIGTERM",
        "## Targets",
    ):
        assert label in report, label
    teardowns = [line for line in report.splitlines() if "teardown" in line]
    assert len(teardowns) == 2
    assert all(line.endswith("processes left: 0 |") for line in teardowns), teardowns


def retained_and_peak(client: ClientLike, session_id: str, updates: int) -> tuple[int, int]:
    """Blocks left allocated by one flooded prompt, and the peak of traced memory while it ran."""
    gc.collect()
    before = sys.getallocatedblocks()
    tracemalloc.reset_peak()
    result = client.prompt(session_id, str(updates), timeout=60)
    peak = tracemalloc.get_traced_memory()[1]
    assert result.chunk_count == updates
    assert result.overflow is not None
    del result
    gc.collect()
    return sys.getallocatedblocks() - before, peak


def test_updates_past_the_reply_limit_leave_nothing_behind_and_do_not_raise_the_peak(
    make_client: Callable[..., ClientLike],
) -> None:
    limits = tinyacp.TransferLimits(max_reply_bytes=64 * KiB)
    command = [sys.executable, str(FLOOD_AGENT)]
    client = make_client(command=command, observer=tinyacp.BaseObserver(), transfer_limits=limits)
    client.initialize(timeout=30)
    session = client.new_session(ROOT, timeout=30)
    tracemalloc.start()
    try:
        retained_and_peak(client, session.id, SMALL)  # warm-up: caches and lazy imports fill here
        small = retained_and_peak(client, session.id, SMALL)
        large = retained_and_peak(client, session.id, LARGE)
    finally:
        tracemalloc.stop()
    # One block kept per update would leave 90 000 more; a few hundred is noise from the interpreter.
    assert large[0] - small[0] < 500, (small, large)
    # Peak: the kept reply (64 KiB, then joined), the reader's batch (16 KiB) and transients; one Update at a time.
    assert large[1] < 1024 * KiB, (small, large)
    assert large[1] < small[1] + 256 * KiB, (small, large)
