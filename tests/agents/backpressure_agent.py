"""An ACP agent that floods one prompt turn with updates and says where it got stuck, for back-pressure tests.

Run as ``python backpressure_agent.py STATUS COUNT``. It answers ``initialize`` and ``session/new`` (session ``flood``);
on a prompt it writes COUNT ``agent_message_chunk`` updates of equal length (texts ``00000000``, ``00000001``,
…) as fast as its stdout takes them, then answers ``end_turn``.

Its stdout is non-blocking, so it always knows how many bytes the pipe has taken. When a write has found the
pipe full for ``STUCK_AFTER`` seconds on end, it writes ``stuck <bytes written> <line length> <pipe size>`` to
STATUS; ``done <bytes written> ...`` once every update is out. STATUS is replaced atomically, so a test reading
it never sees half a status. A client that does not read makes it wait here for ever (until stdin closes).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import sys
from typing import Any

# Long enough that a client which reads at all empties some of the pipe first; the test never waits on it
# for a pass, only to learn that the agent is stuck.
STUCK_AFTER = 0.1


class Flood:
    def __init__(self, status_path: str, count: int) -> None:
        self.status_path = status_path
        self.count = count
        self.written = 0
        self.pipe_size = fcntl.fcntl(1, fcntl.F_GETPIPE_SZ)
        self.line_length = len(self.update(0))

    def update(self, number: int) -> bytes:
        content = {"type": "text", "text": f"{number:08d}"}
        params = {"sessionId": "flood", "update": {"sessionUpdate": "agent_message_chunk", "content": content}}
        return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}).encode() + b"\n"

    def status(self, state: str) -> None:
        temporary = self.status_path + ".tmp"
        with open(temporary, "w") as status:
            status.write(f"{state} {self.written} {self.line_length} {self.pipe_size}\n")
        os.replace(temporary, self.status_path)

    def write(self, data: bytes) -> None:
        """Write all of ``data`` to the non-blocking stdout, reporting when the pipe stays full."""
        view = memoryview(data)
        poller = select.poll()
        poller.register(1, select.POLLOUT)
        while view:
            try:
                written = os.write(1, view)
            except BlockingIOError:
                if not poller.poll(STUCK_AFTER * 1000):
                    self.status("stuck")
                    poller.poll()
                continue
            self.written += written
            view = view[written:]

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def run(self) -> None:
        os.set_blocking(1, False)
        for line in sys.stdin.buffer:
            message = json.loads(line)
            method = message.get("method")
            if method == "initialize":
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}})
            elif method == "session/new":
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "flood"}})
            elif method == "session/prompt":
                for number in range(self.count):
                    self.write(self.update(number))
                self.status("done")
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}})


def main() -> None:
    with contextlib.suppress(BrokenPipeError):  # the client went away: nobody is left to read
        Flood(sys.argv[1], int(sys.argv[2])).run()


if __name__ == "__main__":
    main()
