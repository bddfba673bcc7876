"""An ACP agent whose whole process group floods its stdout, for the tests of deadlines under any flood.

Run as ``python group_flood_agent.py PROCESSES METHOD``. It answers ``initialize`` and ``session/new`` (session
``s1``); when ``METHOD`` arrives (``session/new`` or ``session/prompt``) it forks until PROCESSES processes of its
group write ``agent_message_chunk`` updates to the shared stdout as fast as the pipe takes them, for ever: the pipe
is never empty, and nobody answers or reads stdin again. They stop when the client tears the group down.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    os.write(1, json.dumps(message, separators=(",", ":")).encode() + b"\n")


def flood(processes: int) -> None:
    for _ in range(processes - 1):
        if os.fork() == 0:
            break
    content = {"type": "text", "text": f"from {os.getpid()}"}
    params = {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": content}}
    line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}).encode() + b"\n"
    batch = line * 512
    try:
        while True:
            os.write(1, batch)
    except OSError:  # the client is gone (EPIPE)
        os._exit(0)


def main() -> None:
    processes, flood_on = int(sys.argv[1]), sys.argv[2]
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method = message.get("method")
        if method == flood_on:
            flood(processes)
        elif method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}})


if __name__ == "__main__":
    main()
