"""Memory proofs: the client's peak memory does not grow with what the agent sends.

Each proof runs the client in a fresh Python process (so ``ru_maxrss`` is the peak of that client alone, not of
the test runner) against the firehose agent, for the sync and the asyncio client:

- 200 MiB of reply text in one prompt with ``max_reply_bytes=1 MiB``: the prompt returns with an overflow, the
  agent got exactly one ``session/cancel``, and the peak RSS is the same as after 20 MiB;
- one 1 GiB line: ``ReaderExhaustion``, within the same bound.

The bound is the same client's peak after a one-chunk prompt (the interpreter, tinyacp, and the reader's line
buffer, which is allocated before the agent starts) plus :data:`BUDGET`, which covers what the limits let the
client hold on top: the kept reply (1 MiB, and 1 MiB more while it is joined into ``PromptResult.text``), one
line in flight and its decoded update (twice 64 KiB here), and allocator slack. It is a behaviour test, not a
benchmark: the figures appear in the assertion messages and are never compared to a speed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import AGENTS, TESTS

MiB = 1024 * 1024
BUDGET = 8 * MiB
"""What the limits let one client hold beyond its own baseline (see the module docstring)."""
GROWTH = 2 * MiB
"""How much more a ten times bigger flood may cost: allocator noise, nothing that scales with the flood."""
CHUNK_BYTES = 64 * 1024
REPLY_LIMIT = 1 * MiB

CLIENT = r'''
"""Run one client against the agent given on the command line; print what happened and the peak RSS."""

import asyncio
import json
import resource
import sys

import tinyacp
from tinyacp._process import _live_group_members


class Counter(tinyacp.BaseObserver):
    """Counts, keeps nothing: what the client itself holds is what is measured."""

    def __init__(self):
        self.updates = 0
        self.cancels = 0

    def on_update(self, update):
        self.updates += 1

    def on_send(self, message):
        if message.method == "session/cancel":
            self.cancels += 1


def describe(result):
    overflow = result.overflow
    return {
        # Read with getattr: a client without these bounds fails the memory proof, not the script.
        "notices": len(result.notices),
        "notices_dropped": getattr(result, "notices_dropped", None),
        "subagents": len(result.subagents),
        "subagents_dropped": getattr(result, "subagents_dropped", None),
        "text_bytes": len(result.text.encode()),
        "chunk_count": result.chunk_count,
        "stop_reason": str(result.stop_reason),
        "overflow": None if overflow is None else [str(overflow.kind), overflow.kept_bytes, overflow.kept_chunks,
                                                   overflow.left_out_seq],
    }


def run_sync(options, out):
    with tinyacp.Client(options) as client:
        out["pid"] = client.pid
        client.initialize()
        client.new_session("/")
        try:
            for _ in range(out["prompts"]):
                out.update(describe(client.prompt("s1", "flood")))
            client.new_session("/")  # answered only after the agent logged all we wrote before it
        except tinyacp.LimitExceeded as exc:
            out["error"] = type(exc).__name__
            out["seen"] = getattr(exc, "seen", None)
        out["closed_after_call"] = client.closed
    out["returncode"] = client.returncode


async def run_async(options, out):
    async with tinyacp.AsyncClient(options) as client:
        out["pid"] = client.pid
        await client.initialize()
        await client.new_session("/")
        try:
            for _ in range(out["prompts"]):
                out.update(describe(await client.prompt("s1", "flood")))
            await client.new_session("/")
        except tinyacp.LimitExceeded as exc:
            out["error"] = type(exc).__name__
            out["seen"] = getattr(exc, "seen", None)
        out["closed_after_call"] = client.closed
    out["returncode"] = client.returncode


def main():
    config = json.loads(sys.argv[1])
    counter = Counter()
    options = tinyacp.Options(
        command=config["agent"],
        observer=counter,
        transfer_limits=tinyacp.TransferLimits(max_reply_bytes=config["max_reply_bytes"]),
        features=tinyacp.ClientFeatures(subagents=True),
        timeout=60,
    )
    out = {"prompts": config.get("prompts", 1)}
    if config["kind"] == "sync":
        run_sync(options, out)
    else:
        asyncio.run(run_async(options, out))
    out["updates_seen"] = counter.updates
    out["cancels_sent"] = counter.cancels
    out["left_behind"] = _live_group_members(out["pid"])
    out["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    print(json.dumps(out))


main()
'''


# On Linux a new program's ru_maxrss starts at its parent's peak: exec records the peak of the memory it
# replaces, which for a process spawned with vfork (what subprocess does) is the parent's, here the test
# runner's. The client is therefore started by this small launcher, whose own peak is below the client's.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


COMMAND = r'''
"""Run the command in this process (argv: the report's path, then the command's arguments); write its exit
status and the peak RSS to the report."""

import json
import resource
import sys

from tinyacp.cli import main

code = main(sys.argv[2:])
maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
with open(sys.argv[1], "w") as report:
    json.dump({"code": code, "maxrss": maxrss}, report)
'''


def run_client(
    tmp_path: Path, kind: str, name: str, agent_args: list[str], prompts: int = 1
) -> tuple[dict[str, Any], list[str | None]]:
    """Run the client script against the firehose agent; return its report and the methods the agent received.

    ``kind`` is ``sync``, ``async`` or ``command`` (``tinyacp prompt``, with no journal, its reply and display
    thrown away, whose report holds its exit status and peak RSS).
    """
    log = tmp_path / f"{name}.log"
    agent = [sys.executable, os.fspath(AGENTS / "firehose_agent.py"), os.fspath(log), *agent_args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.fspath(TESTS.parent / "src"), env.get("PYTHONPATH")]))
    if kind == "command":
        return run_command(tmp_path, name, agent, env), methods_in(log)
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    config = {"kind": kind, "agent": agent, "max_reply_bytes": REPLY_LIMIT, "prompts": prompts}
    client = [sys.executable, os.fspath(script), json.dumps(config)]
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *client],
        capture_output=True,
        env=env,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["left_behind"] == []
    assert report["returncode"] is not None
    return report, methods_in(log)


def run_command(tmp_path: Path, name: str, agent: list[str], env: dict[str, str]) -> dict[str, Any]:
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    report_path = tmp_path / f"{name}.json"
    for variable in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env[variable] = os.fspath(tmp_path / variable.lower())
    argv = ["prompt", "--agent-command", shlex.join(agent), "--no-journal", "--no-input"]
    argv += ["--max-reply-bytes", str(REPLY_LIMIT), "--timeout", "60", "flood"]
    with (tmp_path / f"{name}.stderr").open("wb") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", LAUNCHER, sys.executable, os.fspath(script), os.fspath(report_path), *argv],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            timeout=100,
            check=False,
        )
    shown = (tmp_path / f"{name}.stderr").read_bytes()[-2000:].decode(errors="replace")
    assert done.returncode == 0, shown
    report: dict[str, Any] = json.loads(report_path.read_text())
    # 6: the reply was cut at a limit (the reply floods); 0: a whole turn
    assert report["code"] == (6 if "--await-cancel" in agent else 0), shown
    report["display"] = shown
    return report


def methods_in(log: Path) -> list[str | None]:
    """The methods of the lines the agent received, in order."""
    return [json.loads(line).get("method") for line in log.read_bytes().splitlines()] if log.exists() else []


def flood(tmp_path: Path, kind: str, mib: int) -> tuple[dict[str, Any], list[str | None]]:
    count = mib * MiB // CHUNK_BYTES
    args = ["--count", str(count), "--chunk-bytes", str(CHUNK_BYTES), "--await-cancel", "30"]
    return run_client(tmp_path, kind, f"flood{mib}", args)


def baseline(tmp_path: Path, kind: str) -> int:
    """The same client's peak after a one-chunk reply: everything but what the flood could add."""
    report, _ = run_client(tmp_path, kind, "baseline", ["--count", "1", "--chunk-bytes", str(CHUNK_BYTES)])
    assert report["overflow"] is None
    return int(report["maxrss"])


def mib(size: int) -> str:
    return f"{size / MiB:.1f} MiB"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_200_mib_flood_past_the_reply_limit_leaves_peak_memory_where_20_mib_leaves_it(
    tmp_path: Path, kind: str
) -> None:
    bound = baseline(tmp_path, kind) + BUDGET
    small, _ = flood(tmp_path, kind, 20)
    big, methods = flood(tmp_path, kind, 200)

    count = 200 * MiB // CHUNK_BYTES
    kept = REPLY_LIMIT // CHUNK_BYTES
    assert big["overflow"] == ["reply_bytes", REPLY_LIMIT, kept, kept + 1]
    assert (big["text_bytes"], big["chunk_count"], big["updates_seen"]) == (REPLY_LIMIT, count, count)
    assert big["stop_reason"] == "cancelled"
    assert big["cancels_sent"] == 1
    assert methods == ["initialize", "session/new", "session/prompt", "session/cancel", "session/new"]
    assert small["overflow"] == big["overflow"]

    figures = f"bound {mib(bound)}, 20 MiB flood {mib(small['maxrss'])}, 200 MiB flood {mib(big['maxrss'])}"
    assert small["maxrss"] < bound, figures
    assert big["maxrss"] < bound, figures
    assert big["maxrss"] - small["maxrss"] < GROWTH, figures


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_1_gib_line_stops_the_reader_within_the_same_bound(tmp_path: Path, kind: str) -> None:
    bound = baseline(tmp_path, kind) + BUDGET

    report, methods = run_client(tmp_path, kind, "big_line", ["--big-line", str(1 << 30)])

    assert report["error"] == "ReaderExhaustion"
    assert report["seen"] == 2 * MiB + 1  # the default line limit, and one byte more: nothing further was read
    assert report["closed_after_call"] is True
    assert report["updates_seen"] == 0
    assert methods[:3] == ["initialize", "session/new", "session/prompt"]
    assert report["maxrss"] < bound, f"bound {mib(bound)}, 1 GiB line {mib(report['maxrss'])}"


# -- the newer updates: notices, subagents, children over many turns --------------------------------------------
#
# Each flood is about 200 MB of one kind of update in one turn, each update under the default max_update_bytes
# (1 MiB); the bound is the same client's peak after a 20 MiB reply flood past max_reply_bytes=1 MiB (the proof
# above), plus NEWER_SLACK for the longer lines (800 KB, where the reply flood's are 64 KiB) that the decoder
# holds one at a time beside the line buffer.

NEWER_SLACK = 4 * MiB
"""What an 800 KB update costs while it is handled, beyond a 64 KiB one: its line, its decoded text and the
pieces the display cuts from it, held at once (about four copies of 800 KB). The same flood ten times smaller
must leave the peak within GROWTH of it: nothing in the slack grows with the flood."""
KINDS = ["sync", "async", "command"]


def reply_peak(tmp_path: Path, kind: str) -> int:
    """The peak after a 20 MiB reply flood past the 1 MiB reply limit: what the newer floods must stay at."""
    count = 20 * MiB // CHUNK_BYTES
    args = ["--count", str(count), "--chunk-bytes", str(CHUNK_BYTES), "--await-cancel", "30"]
    report, _ = run_client(tmp_path, kind, "reply20", args)
    return int(report["maxrss"])


def newer_flood(
    tmp_path: Path, kind: str, update: str, count: int, size: int, *, prompts: int = 1
) -> tuple[dict[str, Any], list[str | None]]:
    args = ["--update", update, "--count", str(count), "--chunk-bytes", str(size)]
    return run_client(tmp_path, kind, f"{update}{count}x{prompts}", args, prompts)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_200_mb_of_notices_in_a_turn_leave_peak_memory_where_a_20_mib_reply_flood_leaves_it(
    tmp_path: Path, kind: str
) -> None:
    bound = reply_peak(tmp_path, kind) + NEWER_SLACK

    small, _ = newer_flood(tmp_path, kind, "notice", 25, 800_000)
    report, methods = newer_flood(tmp_path, kind, "notice", 250, 800_000)
    figures = f"bound {mib(bound)}, 25 notices {mib(small['maxrss'])}, 250 notices {mib(report['maxrss'])}"
    assert report["maxrss"] < bound, figures
    assert report["maxrss"] - small["maxrss"] < GROWTH, figures

    if kind != "command":
        assert (report["notices"], report["notices_dropped"]) == (1, 249)  # one fits in the default 1 MiB
        assert methods == ["initialize", "session/new", "session/prompt", "session/new"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_200_mb_of_subagents_in_a_turn_leave_peak_memory_where_a_20_mib_reply_flood_leaves_it(
    tmp_path: Path, kind: str
) -> None:
    bound = reply_peak(tmp_path, kind) + NEWER_SLACK

    small, _ = newer_flood(tmp_path, kind, "subagent", 25, 800_000)
    report, _ = newer_flood(tmp_path, kind, "subagent", 250, 800_000)
    figures = f"bound {mib(bound)}, 25 children {mib(small['maxrss'])}, 250 children {mib(report['maxrss'])}"
    assert report["maxrss"] < bound, figures
    assert report["maxrss"] - small["maxrss"] < GROWTH, figures

    if kind != "command":
        # each child costs 800 KB (its id and its description, 400 KB each): one fits in the default 1 MiB
        assert (report["subagents"], report["subagents_dropped"]) == (1, 249)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_children_of_many_turns_leave_peak_memory_where_one_turn_leaves_it(tmp_path: Path, kind: str) -> None:
    bound = reply_peak(tmp_path, kind) + NEWER_SLACK

    # 5 turns of 120 children, each with an id of 400 KB (and a description as long): 480 MB announced in all
    report, _ = newer_flood(tmp_path, kind, "subagent", 120, 800_000, prompts=5)
    assert report["maxrss"] < bound, f"bound {mib(bound)}, 5 turns of 120 children {mib(report['maxrss'])}"

    assert (report["subagents"], report["subagents_dropped"]) == (1, 119)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("update", "what"),
    [
        ("child-reply", "a child's reply"),
        ("summary", "a compaction summary that never completes"),
        ("thought", "a thought"),
    ],
)
def test_the_commands_display_keeps_only_what_it_shows_of_200_mb_of_one_text(
    tmp_path: Path, update: str, what: str
) -> None:
    bound = reply_peak(tmp_path, "command") + NEWER_SLACK

    # 200 MiB of one text, in 64 KiB chunks: the display shows a line of it (and the status line its end)
    small, _ = newer_flood(tmp_path, "command", update, 20 * MiB // CHUNK_BYTES, CHUNK_BYTES)
    report, _ = newer_flood(tmp_path, "command", update, 200 * MiB // CHUNK_BYTES, CHUNK_BYTES)
    figures = f"bound {mib(bound)}, 20 MiB of {what} {mib(small['maxrss'])}, 200 MiB {mib(report['maxrss'])}"
    assert report["maxrss"] < bound, figures
    assert report["maxrss"] - small["maxrss"] < GROWTH, figures
