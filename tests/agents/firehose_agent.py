"""A fast flooding ACP agent for the limit and memory tests: plain Python, no SDK, no per-line work.

Run as ``python firehose_agent.py LOG [options]``. It answers ``initialize`` and ``session/new`` (session ``s1``)
and answers every ``session/prompt`` with a flood:

- ``--count N --chunk-bytes B``: N ``agent_message_chunk`` updates whose text is B bytes of ``x``, then the
  prompt's response. The lines are built once and written in batches of about 1 MiB, so the agent writes as
  fast as the pipe drains and the client is what the test measures.
- ``--await-cancel SECONDS``: after the flood, wait up to SECONDS for a ``session/cancel`` before answering;
  the answer is ``cancelled`` if one came, else ``end_turn``. It keeps flooding while the cancel waits in its
  input, as a runaway agent would.
- ``--update KIND``: what the flood is made of (``chunk`` by default). ``notice``: N notices whose title is B
  bytes; ``subagent``: N children of the session, each announced once with an id and a description of B/2 bytes
  each (every id different); ``thought``: N thought chunks of B bytes; ``summary``: N chunks of B bytes of one
  compaction's summary that never completes; ``child-reply``: one child announced, then N chunks of B bytes of
  its reply.
- ``--big-line BYTES``: instead of a flood, one ``session/update`` line that never ends: its text is BYTES of
  ``x`` and no closing quote or newline follows.

A reader thread appends every line the agent receives to LOG before the agent acts on it, so once the agent
has answered a request, everything the client wrote before that request is in LOG. When the client tears the
agent down in the middle of a write (EPIPE), the agent exits quietly.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
from typing import Any

BATCH_BYTES = 1 << 20

INIT_RESULT = {
    "protocolVersion": 1,
    "agentCapabilities": {"promptCapabilities": {"image": False, "audio": False, "embeddedContext": False}},
    "agentInfo": {"name": "firehose", "version": "1"},
}


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def update_line(session: str, update: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})


def write_all(data: bytes | memoryview) -> None:
    """Write everything to stdout (a blocking pipe); exit quietly if the client is gone."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(1, view) :]
    except (BrokenPipeError, ConnectionResetError):
        os._exit(0)


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log_fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.cancelled = threading.Event()
        self.turns = 0

    def read_input(self) -> None:
        """Log every line as it arrives; hand requests to the main thread; note cancels at once."""
        for line in sys.stdin.buffer:
            os.write(self.log_fd, line)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("method") == "session/cancel":
                self.cancelled.set()
            elif "method" in message and "id" in message:
                self.requests.put(message)
        self.requests.put(None)

    def run(self) -> None:
        threading.Thread(target=self.read_input, daemon=True).start()
        while True:
            request = self.requests.get()
            if request is None:
                os._exit(0)
            method = request["method"]
            if method == "initialize":
                self.reply(request, INIT_RESULT)
            elif method == "session/new":
                self.reply(request, {"sessionId": "s1"})
            elif method == "session/prompt":
                self.prompt(request)
            else:
                error = {"code": -32601, "message": "Method not found"}
                write_all(encode({"jsonrpc": "2.0", "id": request["id"], "error": error}))

    def reply(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        write_all(encode({"jsonrpc": "2.0", "id": request["id"], "result": result}))

    def prompt(self, request: dict[str, Any]) -> None:
        session = request["params"]["sessionId"]
        self.turns += 1
        self.cancelled.clear()
        if self.args.big_line:
            self.big_line(session)
            return  # the line never ends, so no response could follow it
        self.flood(session)
        reason = "end_turn"
        if self.args.await_cancel and self.cancelled.wait(self.args.await_cancel):
            reason = "cancelled"
        self.reply(request, {"stopReason": reason})

    def flood(self, session: str) -> None:
        kind, size = self.args.update, self.args.chunk_bytes
        if kind == "subagent":
            self.children(session)
            return
        content = {"type": "text", "text": "x" * size}
        if kind == "notice":
            update: dict[str, Any] = {"sessionUpdate": "notice", "severity": "warning", "title": "x" * size}
        elif kind == "thought":
            update = {"sessionUpdate": "agent_thought_chunk", "content": content}
        elif kind == "summary":
            write_all(
                update_line(
                    session, {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"}
                )
            )
            update = {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": content}
        elif kind == "child-reply":
            write_all(
                update_line(session, {"sessionUpdate": "subagent_update", "sessionId": "child", "title": "Helper"})
            )
            session = "child"
            update = {"sessionUpdate": "agent_message_chunk", "content": content}
        else:
            update = {"sessionUpdate": "agent_message_chunk", "content": content}
        line = update_line(session, update)
        per_batch = max(1, BATCH_BYTES // len(line))
        batch = line * per_batch
        full, rest = divmod(self.args.count, per_batch)
        for _ in range(full):
            write_all(batch)
        write_all(line * rest)

    def children(self, session: str) -> None:
        """N children, each with its own id: every announcement is a line of its own."""
        half = self.args.chunk_bytes // 2
        for index in range(self.args.count):
            child = f"{self.turns}.{index}.".ljust(half, "x")
            write_all(
                update_line(
                    session, {"sessionUpdate": "subagent_update", "sessionId": child, "description": "d" * half}
                )
            )

    def big_line(self, session: str) -> None:
        params = {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}}
        opening = encode({"jsonrpc": "2.0", "method": "session/update", "params": params})
        # Everything up to the first byte of a text that never ends: the line looks like an update to the last.
        write_all(opening[: opening.index(b'"text"}') + len(b'"text"')] + b',"text":"')
        block = memoryview(b"x" * (8 * BATCH_BYTES))
        left = self.args.big_line
        while left > 0:
            write_all(block[: min(left, len(block))])
            left -= len(block)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--chunk-bytes", type=int, default=1)
    parser.add_argument("--await-cancel", type=float, default=0.0)
    parser.add_argument("--big-line", type=int, default=0)
    parser.add_argument(
        "--update", choices=["chunk", "notice", "subagent", "thought", "summary", "child-reply"], default="chunk"
    )
    Agent(parser.parse_args()).run()


if __name__ == "__main__":
    main()
