"""An ACP agent that reports how it was started: its environment, working directory and process group.

Run as ``python report_agent.py``. It answers ``initialize`` and ``session/new`` (session ``report``); each
prompt gets one ``agent_message_chunk`` whose text is a JSON object ``{"env", "cwd", "pid", "pgid"}``, then
``end_turn``. It needs nothing but the standard library, so it runs under an environment the test chose
exactly (no ``PYTHONPATH``, no ``PATH``). It exits when its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def report() -> str:
    return json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid(), "pgid": os.getpgid(0)})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "report"}})
        elif method == "session/prompt":
            content = {"type": "text", "text": report()}
            update = {"sessionUpdate": "agent_message_chunk", "content": content}
            params = {"sessionId": "report", "update": update}
            send({"jsonrpc": "2.0", "method": "session/update", "params": params})
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
