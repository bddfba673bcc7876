"""What the bubblewrap sandbox costs an agent's start: ``python -m benchmarks.sandbox``.

The demo agent is started with and without ``Options(sandbox=Bubblewrap())``, the rows taking turns so that a burst
of load hits both alike; each start is timed from making the client to the agent's answer to ``initialize``, and
its teardown from ``close()`` to the group reaped. The first round fills the bytecode cache and the availability
probe's cache (one bwrap run per process) and is not counted; that probe is timed on its own. A served command
(``Serve(terminal=True)``, with and without ``sandbox=Bubblewrap()``) is timed as the demo's ``with-terminal`` turn:
``ls -l`` run in a client's terminal, from the prompt sent to the turn's end. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import tinyacp
from benchmarks.common import child_env, median_range, ms, table
from tinyacp import _sandbox

ROWS = (
    ("no sandbox", None),
    ("Bubblewrap()", tinyacp.Bubblewrap()),
    ("network off", tinyacp.Bubblewrap(network=False)),
)


def start(sandbox: tinyacp.Bubblewrap | None, cwd: str) -> tuple[float, float]:
    """(ms from making the client to the answer to initialize, ms of close)."""
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"],
        cwd=cwd,
        env=child_env(),
        observer=tinyacp.BaseObserver(),
        sandbox=sandbox,
        timeout=60,
    )
    began = time.perf_counter()
    client = tinyacp.Client(options)
    try:
        client.initialize()
        started = time.perf_counter()
    finally:
        client.close()
    return (started - began) * 1000, (time.perf_counter() - started) * 1000


SERVED_ROWS = (("served, no sandbox", None), ("served, Bubblewrap()", tinyacp.Bubblewrap()))


def served(sandbox: tinyacp.Bubblewrap | None, cwd: str) -> float:
    """ms of a ``with-terminal`` turn of the demo agent: one served command (``ls -l``) in ``sandbox`` or not."""
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"],
        cwd=cwd,
        env=child_env(),
        observer=tinyacp.BaseObserver(),
        serve=tinyacp.Serve(terminal=True, sandbox=sandbox),
        policy=tinyacp.PermissionPolicy(kinds=["execute"]),
        timeout=60,
    )
    with tinyacp.Client(options) as client:
        client.initialize()
        session = client.new_session(cwd)
        began = time.perf_counter()
        result = client.prompt(session.id, "with-terminal", timeout=60)
        took = (time.perf_counter() - began) * 1000
    if "in the client's terminal: exit 0" not in result.text:  # the demo says where it ran the command and how
        raise RuntimeError(f"the demo did not use the client's terminal: {result.text!r}")
    return took


def probe_ms() -> float:
    """One availability probe, uncached: a bwrap that starts ``true`` in the sandbox's namespaces."""
    _sandbox._probe.cache_clear()
    began = time.perf_counter()
    _sandbox.check_available(network=True)
    return (time.perf_counter() - began) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in ROWS}
    with tempfile.TemporaryDirectory() as cwd:
        for round_ in range(args.runs + 1):
            for name, sandbox in ROWS:
                sample = start(sandbox, cwd)
                if round_:
                    samples[name].append(sample)
        turns: dict[str, list[float]] = {name: [] for name, _ in SERVED_ROWS}
        for round_ in range(args.runs + 1):
            for name, sandbox in SERVED_ROWS:
                took = served(sandbox, cwd)
                if round_:
                    turns[name].append(took)
    probes = [probe_ms() for _ in range(args.runs)]
    base = sorted(s[0] for s in samples[ROWS[0][0]])[len(samples[ROWS[0][0]]) // 2]
    rows = []
    for name, _ in ROWS:
        starts = [s[0] for s in samples[name]]
        median = sorted(starts)[len(starts) // 2]
        extra = "" if name == ROWS[0][0] else f"+{median - base:.0f} ms"
        rows.append([name, median_range(starts, ms(1)), extra, median_range([s[1] for s in samples[name]], ms(1))])
    print(f"The demo agent's start, {args.runs} rounds (median (min-max)):\n")
    print("\n".join(table(["sandbox", "start to initialize answered", "over no sandbox", "close"], rows)))
    plain = sorted(turns[SERVED_ROWS[0][0]])[len(turns[SERVED_ROWS[0][0]]) // 2]
    served_rows = []
    for name, _ in SERVED_ROWS:
        median = sorted(turns[name])[len(turns[name]) // 2]
        extra = "" if name == SERVED_ROWS[0][0] else f"+{median - plain:.0f} ms"
        served_rows.append([name, median_range(turns[name], ms(1)), extra])
    print(f"\nA with-terminal turn (one served command), {args.runs} rounds (median (min-max)):\n")
    print("\n".join(table(["served command", "prompt to end of turn", "over no sandbox"], served_rows)))
    print(f"\nThe availability probe, once per process and configuration: {median_range(probes, ms(1))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
