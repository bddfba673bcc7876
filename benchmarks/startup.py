"""What the modules tinyacp leaves out at start-up would add: ``python -m benchmarks.startup``.

Some modules do without a standard module that a start would otherwise pay for: ``typing`` (through the
``TYPE_CHECKING = False`` flag, so that annotations name types that only the type checker imports), and the
process module's ``_thread`` and ``_signal`` in place of ``threading`` and ``signal``. For each, a fresh
interpreter (bytecode cached) imports the module as a program would, then times the import of what it left out:
what that module would cost every such start. The rounds take turns, so a burst of load hits every row alike.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from benchmarks.common import child_env, median_range, ms, table

CASES = (
    ("tinyacp", "typing", "`import tinyacp` (every program)"),
    ("tinyacp.demo", "typing", "each start of the demo agent (tests, batches, benchmarks)"),
    ("tinyacp._supervisor", "typing", "each start of a supervised agent (`Options(supervise=True)`)"),
    ("tinyacp._client", "threading", "`tinyacp.Client` (the process module's `_thread`)"),
    ("tinyacp._client", "signal", "`tinyacp.Client` (the process module's `_signal`)"),
)

CODE = """
import sys, time
t = time.perf_counter()
import {module}
own = time.perf_counter() - t
loaded = {left_out!r} in sys.modules
t = time.perf_counter()
import {left_out}
print(own * 1000, (time.perf_counter() - t) * 1000, loaded)
"""


def measure(module: str, left_out: str) -> tuple[float, float, bool]:
    """(the module's own import, then the left-out module's, in ms; whether it was loaded already)."""
    done = subprocess.run(
        [sys.executable, "-c", CODE.format(module=module, left_out=left_out)],
        env=child_env(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    own, extra, loaded = done.stdout.split()
    return float(own), float(extra), loaded == b"True"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    samples: dict[int, list[tuple[float, float, bool]]] = {i: [] for i in range(len(CASES))}
    for round_ in range(args.runs + 1):
        for i, (module, left_out, _) in enumerate(CASES):
            sample = measure(module, left_out)
            if round_:  # the first round fills the bytecode cache and is not counted
                samples[i].append(sample)
    rows = []
    for i, (_, left_out, where) in enumerate(CASES):
        own = [s[0] for s in samples[i]]
        extra = [s[1] for s in samples[i]]
        loaded = any(s[2] for s in samples[i])
        cost = "loaded already" if loaded else median_range(extra, ms(2))
        rows.append([where, f"`{left_out}`", cost, median_range(own, ms(1))])
    header = ["where it is left out", "module", "what importing it would add", "the import itself, for scale"]
    print("\n".join(table(header, rows)))
    print(f"\n{args.runs} runs each, Python {sys.version.split()[0]}; median (min-max).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
