"""Memory proof for served terminals: what a command prints and how often the agent asks for it do not grow the
client's peak memory.

As in ``test_memory.py``, the client runs in a fresh Python process (its ``ru_maxrss`` is its own), once against a
command that prints 20 MiB and an agent that asks ``terminal/output`` 20 times at once, once with 200 MiB and 200
times: each answer holds the last 1 MiB (``Serve.output_limit``), and the client stops reading the agent while
8 MiB of answers wait for it, so the peak is the same. The figures are in the assertion messages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import AGENTS, INIT_RESULT, TESTS, end_turn

MiB = 1024 * 1024
BUDGET = 24 * MiB
"""What serving lets one client hold beyond its baseline: the terminal's buffer (1 MiB), an answer being built
(its text, its JSON line and the copy in the queue, 1 MiB each), the queue of answers (8 MiB and one answer), and
allocator slack."""
GROWTH = 4 * MiB
"""How much more ten times the output and the requests may cost: noise, nothing that scales."""

CLIENT = r"""
import asyncio
import json
import resource
import sys

import tinyacp
from tinyacp._process import _live_group_members


class Counter(tinyacp.BaseObserver):
    def __init__(self):
        self.answers = 0

    def on_send(self, message):
        if message.method is None:
            self.answers += 1


def main():
    config = json.loads(sys.argv[1])
    counter = Counter()
    options = tinyacp.Options(
        command=config["agent"],
        observer=counter,
        serve=tinyacp.Serve(terminal=True),
        policy=tinyacp.PermissionPolicy(kinds=["execute"]),
        timeout=90,
    )
    out = {}

    def sync():
        with tinyacp.Client(options) as client:
            out["pid"] = client.pid
            client.initialize()
            client.new_session("/")
            out["stop"] = str(client.prompt("s1", "go").stop_reason)

    async def run_async():
        async with tinyacp.AsyncClient(options) as client:
            out["pid"] = client.pid
            await client.initialize()
            await client.new_session("/")
            out["stop"] = str((await client.prompt("s1", "go")).stop_reason)

    if config["kind"] == "sync":
        sync()
    else:
        asyncio.run(run_async())
    out["answers"] = counter.answers
    out["left_behind"] = _live_group_members(out["pid"])
    out["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


main()
"""

LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
"""A small parent, so that the client's ``ru_maxrss`` does not start at the test runner's (see test_memory)."""


def run(tmp_path: Path, kind: str, mib: int, requests: int) -> dict[str, Any]:
    code = f"import sys\nblock = 'x' * {MiB}\nfor _ in range({mib}): sys.stdout.write(block)\nsys.stdout.flush()"
    steps = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": INIT_RESULT},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": "s1"}},
        {"op": "expect", "method": "session/prompt"},
        {
            "op": "request",
            "id": 1,
            "method": "terminal/create",
            "params": {"sessionId": "s1", "command": sys.executable, "args": ["-c", code]},
        },
        {
            "op": "request",
            "id": 2,
            "method": "terminal/wait_for_exit",
            "params": {"sessionId": "s1", "terminalId": "term-1"},
        },
        {
            "op": "requests",
            "count": requests,
            "first": 1000,
            "method": "terminal/output",
            "params": {"sessionId": "s1", "terminalId": "term-1"},
        },
        {"op": "request", "id": 3, "method": "terminal/release", "params": {"sessionId": "s1", "terminalId": "term-1"}},
        end_turn(),
    ]
    script = tmp_path / f"steps{mib}.json"
    script.write_text(json.dumps(steps))
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    agent = [sys.executable, os.fspath(AGENTS / "scripted.py"), os.fspath(script)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.fspath(TESTS.parent / "src"), env.get("PYTHONPATH")]))
    config = json.dumps({"kind": kind, "agent": agent})
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, sys.executable, os.fspath(client), config],
        capture_output=True,
        env=env,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["left_behind"] == [] and report["stop"] == "end_turn"
    assert report["answers"] == requests + 3
    return report


def mib(size: int) -> str:
    return f"{size / MiB:.1f} MiB"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_command_printing_200_mib_and_200_output_requests_leave_peak_memory_where_20_leave_it(
    tmp_path: Path, kind: str
) -> None:
    bound = run(tmp_path, kind, 0, 1)["maxrss"] + BUDGET
    small = run(tmp_path, kind, 20, 20)["maxrss"]
    big = run(tmp_path, kind, 200, 200)["maxrss"]
    figures = f"bound {mib(bound)}, 20 MiB and 20 requests {mib(small)}, 200 MiB and 200 requests {mib(big)}"
    assert small < bound, figures
    assert big < bound, figures
    assert big - small < GROWTH, figures
