"""What the benchmarks share: how a measured process is started (:func:`child_env`) and how a report's tables
and times are written. Every benchmark module imports from here, and none imports another benchmark's module
for it: ``benchmarks.run``, the entry, is the one that imports the parts (:mod:`benchmarks.batch`,
:mod:`benchmarks.commands`)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import tinyacp

ROOT = Path(__file__).resolve().parent.parent

PYCACHE: list[str] = []
"""The private bytecode cache of this run, once made (the entry of a run sets it and clears it at the end)."""


def child_env() -> dict[str, str]:
    """Our environment, with the tinyacp we imported first on the path: the rows measure the same code.

    Bytecode is cached in a directory of this run's own, whatever PYTHONDONTWRITEBYTECODE says: an installed
    package has its .pyc files, and compiling on every start would be timed as importing. The demo agent keeps
    its sessions there too (unless ``TINYACP_DEMO_STATE_DIR`` says where), not in the user's state directory: a
    run adds hundreds.
    """
    env = dict(os.environ)
    if PYCACHE:
        env.setdefault("TINYACP_DEMO_STATE_DIR", os.path.join(PYCACHE[0], "demo-sessions"))
    src = str(Path(tinyacp.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if PYCACHE:
        env["PYTHONPYCACHEPREFIX"] = PYCACHE[0]
    return env


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def median_range(values: Sequence[float], scale: Callable[[float], str]) -> str:
    """The median and, for more than one value, the range: ``12 ms (11 ms-14 ms)``."""
    if len(values) == 1:
        return scale(values[0])
    return f"{scale(statistics.median(values))} ({scale(min(values))}-{scale(max(values))})"


def ms(digits: int) -> Callable[[float], str]:
    """Milliseconds with ``digits`` decimals."""
    return lambda v: f"{v:.{digits}f} ms"
