"""The flood agent: a plain-Python ACP agent that answers one prompt with as many chunks as it can write.

``python benchmarks/flood_agent.py --updates N`` answers ``initialize`` and ``session/new``, then answers every
``session/prompt`` with N ``agent_message_chunk`` updates of :data:`TEXT` (40 bytes) and ``end_turn`` (or
``cancelled`` when a ``session/cancel`` arrived meanwhile). A prompt whose text is a number asks for that many
updates instead. It ignores the cancel while it floods: a runaway agent
is exactly what the reply limits are for, and a flood that stops early would prove nothing about them.

It must never be the bottleneck, so the update line is encoded once and written in batches of about 1 MiB with
``os.write``. It uses the standard library only, so its start-up and its speed do not depend on tinyacp.

``--grandchildren K --stubborn S`` first starts K sleeping processes in its group, S of them ignoring SIGTERM,
for the teardown benchmark; they are running (their SIGTERM disposition set) before ``initialize`` is answered.
``--escaped E --pid-file PATH`` also starts E sleepers that leave the group the way daemonising tools do (fork,
``setsid``, fork) and ignore SIGTERM, and writes their pids to PATH, one a line, before answering ``initialize``:
only ``Options(supervise=True)`` can stop those.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
from typing import Any

TEXT = "The quick brown fox jumps over a lazy do"
"""40 bytes of ASCII: a typical streamed chunk of a few tokens."""
assert len(TEXT.encode()) == 40

SESSION_ID = "flood-session-1"
BATCH_BYTES = 1 << 20
GRANDCHILD_LIFETIME = 60.0
"""A grandchild left behind by a broken run ends by itself after this many seconds."""
GRANDCHILDREN: list[subprocess.Popen[bytes]] = []


def update_line(session_id: str) -> bytes:
    """The one pre-encoded line every update of the flood repeats, newline included."""
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session_id,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": TEXT}},
        },
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def send(message: dict[str, Any]) -> None:
    write_all(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def flood(updates: int, session_id: str) -> None:
    line = update_line(session_id)
    per_batch = max(1, BATCH_BYTES // len(line))
    batch = line * per_batch
    full, rest = divmod(updates, per_batch)
    for _ in range(full):
        write_all(batch)
    write_all(line * rest)


def cancel_pending(stdin: Any) -> bool:
    """Whether a ``session/cancel`` is already waiting on stdin (read without blocking)."""
    seen = False
    while select.select([stdin], [], [], 0)[0]:
        raw = stdin.readline()
        if not raw:
            break
        seen = seen or json.loads(raw).get("method") == "session/cancel"
    return seen


def start_grandchildren(count: int, stubborn: int) -> list[subprocess.Popen[bytes]]:
    """Sleepers in our process group; the first ``stubborn`` ignore SIGTERM (an ignored signal stays ignored
    across exec, so the disposition holds from the moment Popen returns)."""
    sleeper = [sys.executable, "-S", "-c", f"import time; time.sleep({GRANDCHILD_LIFETIME})"]
    children = []
    for i in range(count):
        previous = signal.signal(signal.SIGTERM, signal.SIG_IGN if i < stubborn else signal.SIG_DFL)
        try:
            children.append(subprocess.Popen(sleeper, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        finally:
            signal.signal(signal.SIGTERM, previous)
    return children


ESCAPING_SLEEPER = f"""
import os, signal, sys, time
ready = int(sys.argv[1])
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.write(ready, b"%d\\n" % os.getpid())
os.close(ready)
time.sleep({GRANDCHILD_LIFETIME})
"""
"""Double-forks into a session of its own, ignores SIGTERM, then reports its pid on the fd it was given."""


def start_escaped(count: int) -> list[int]:
    """Sleepers that left our process group (and session) and ignore SIGTERM, running when this returns."""
    pids = []
    for _ in range(count):
        ready_r, ready_w = os.pipe()
        try:
            launcher = subprocess.Popen(
                [sys.executable, "-S", "-c", ESCAPING_SLEEPER, str(ready_w)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(ready_w,),
            )
        finally:
            os.close(ready_w)
        report = b""
        while chunk := os.read(ready_r, 64):  # EOF once the sleeper reported and closed its end
            report += chunk
        os.close(ready_r)
        launcher.wait()
        pids.append(int(report))
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=1000, help="agent_message_chunk updates per prompt")
    parser.add_argument("--grandchildren", type=int, default=0, help="sleeping processes to start first")
    parser.add_argument("--stubborn", type=int, default=0, help="how many of them ignore SIGTERM")
    parser.add_argument("--escaped", type=int, default=0, help="sleepers that leave the group (setsid) to start")
    parser.add_argument("--pid-file", help="where to write the escaped sleepers' pids")
    args = parser.parse_args()
    if args.escaped and not args.pid_file:
        parser.error("--escaped needs --pid-file")
    # Kept referenced and never waited for, like the tools of a careless agent.
    GRANDCHILDREN.extend(start_grandchildren(args.grandchildren, args.stubborn))
    if args.escaped:
        escaped = start_escaped(args.escaped)
        with open(args.pid_file, "w") as pid_file:
            pid_file.write("".join(f"{pid}\n" for pid in escaped))
    stdin = sys.stdin.buffer
    for raw in stdin:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification: the only one we get is session/cancel, ignored while idle
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False, "promptCapabilities": {}},
                "agentInfo": {"name": "flood", "version": "1"},
                "authMethods": [],
            }
        elif method == "session/new":
            result = {"sessionId": SESSION_ID}
        elif method == "session/prompt":
            params = message["params"]
            text = params["prompt"][0].get("text", "") if params["prompt"] else ""
            flood(int(text) if text.isdigit() else args.updates, params["sessionId"])
            result = {"stopReason": "cancelled" if cancel_pending(stdin) else "end_turn"}
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
