"""A scripted ACP agent for tests: it plays a list of steps from a JSON file, nothing more.

Run as ``python scripted.py SCRIPT.json [LOG]``. Every line the agent receives is appended to LOG (when given),
so a test can check exactly what reached the agent and when. Steps (one JSON object each, ``op`` says which):

- ``expect``: read until a message with ``method`` arrives (``null`` method: a response); later ``reply`` steps
  answer it. Lines read meanwhile are only logged.
- ``reply`` / ``reply_error``: answer the last expected request with ``result`` / ``code`` and ``message``.
- ``send``: write ``message`` as one compact JSON line. ``update``: a ``session/update`` for ``session``.
- ``raw``: write ``line`` (text) plus a newline; ``raw_b64``: write ``data`` (base64) exactly, no newline added.
- ``request``: send a request (``method``, ``params``, ``id``) and wait for the client's response to that id.
  With ``check_file`` set, the agent then checks that file exists and sends an ``agent_message_chunk`` saying
  ``file:yes`` or ``file:no`` (so a test can prove the observer wrote it before the answer arrived). With
  ``check_journal`` set, it counts the complete lines of that journal file that record an update, a permission
  request and a decision, and sends ``journal:U:P:D`` the same way (what was written before the answer came).
- ``flood``: ``count`` agent_message_chunk updates of ``text`` for ``session``, as fast as the pipe allows.
- ``big_line``: write ``size`` bytes of ``x`` and then a newline (``newline: false`` to leave it out).
- ``sleep``: ``seconds``. ``exit``: exit with ``code`` (or by ``signal``). ``close_stdout``: close stdout and
  keep running; ``close_stdin``: the same with stdin (the client's next write fails).
  ``wait_eof``: read until stdin closes. ``hang``: sleep for ever.
- ``await``: wait for the client's response to ``id`` (one that came while waiting for another counts).
  ``requests``: send ``count`` requests of ``method`` with ``params`` (ids from ``first``) without waiting, then
  wait for every response (a flood of ``terminal/output``, say).
- ``ignore_sigterm``: from now on SIGTERM does nothing. ``spawn``: start ``argv`` in our process group and
  append its pid to ``pidfile``. ``stderr``: write ``size`` bytes to stderr (or ``text``).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any


class Script:
    def __init__(self, steps: list[dict[str, Any]], log_path: str | None) -> None:
        self.steps = steps
        self.log = open(log_path, "ab", buffering=0) if log_path else None  # noqa: SIM115
        self.stdin = sys.stdin.buffer
        self.stdout = sys.stdout.buffer
        self.last_id: Any = None
        self.children: list[subprocess.Popen[bytes]] = []
        self.responses: dict[Any, dict[str, Any]] = {}

    def read(self) -> dict[str, Any] | None:
        line = self.stdin.readline()
        if not line:
            return None
        if self.log is not None:
            self.log.write(line)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def write(self, data: bytes) -> None:
        self.stdout.write(data)
        self.stdout.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def expect(self, method: str | None) -> dict[str, Any]:
        while True:
            message = self.read()
            if message is None:
                sys.exit(0)
            if message.get("method") == method:
                if "id" in message:  # a notification (session/cancel) leaves the request to answer as it was
                    self.last_id = message["id"]
                return message

    def await_response(self, request_id: Any) -> dict[str, Any]:
        while request_id not in self.responses:
            message = self.read()
            if message is None:
                sys.exit(0)
            if "method" not in message and "id" in message:
                self.responses[message["id"]] = message
        return self.responses[request_id]

    def op_await(self, step: dict[str, Any]) -> None:
        self.await_response(step["id"])

    def op_requests(self, step: dict[str, Any]) -> None:
        first = step.get("first", 1000)
        ids = range(first, first + step["count"])
        lines = b"".join(
            json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": step["method"], "params": step["params"]}
            ).encode()
            + b"\n"
            for request_id in ids
        )
        # Written by a thread while this one reads the answers: a client whose queue is full stops reading
        # until its answers are taken, so writing the whole flood first could wait for ever.
        writer = threading.Thread(target=self.write, args=(lines,), daemon=True)
        writer.start()
        for request_id in ids:
            self.await_response(request_id)

    def run(self) -> None:
        for step in self.steps:
            getattr(self, "op_" + step["op"])(step)
        while self.read() is not None:  # stay until the client closes our stdin
            pass

    def op_expect(self, step: dict[str, Any]) -> None:
        self.expect(step.get("method"))

    def op_reply(self, step: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": self.last_id, "result": step.get("result", {})})

    def op_reply_error(self, step: dict[str, Any]) -> None:
        error = {"code": step["code"], "message": step["message"]}
        if "data" in step:
            error["data"] = step["data"]
        self.send({"jsonrpc": "2.0", "id": self.last_id, "error": error})

    def op_send(self, step: dict[str, Any]) -> None:
        self.send(step["message"])

    def op_update(self, step: dict[str, Any]) -> None:
        params = {"sessionId": step.get("session", "s1"), "update": step["update"]}
        self.send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def op_raw(self, step: dict[str, Any]) -> None:
        self.write(step["line"].encode() + b"\n")

    def op_raw_b64(self, step: dict[str, Any]) -> None:
        self.write(base64.b64decode(step["data"]))

    def op_request(self, step: dict[str, Any]) -> None:
        request_id = step.get("id", 0)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": step["method"], "params": step.get("params", {})})
        self.await_response(request_id)
        if "check_file" in step:
            present = "yes" if os.path.exists(step["check_file"]) else "no"
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"file:{present}"}}
            self.op_update({"update": chunk, "session": step.get("session", "s1")})
        if "check_journal" in step:
            with open(step["check_journal"], "rb") as file:
                lines = file.read().split(b"\n")[:-1]  # complete lines only
            marks = (b'"kind":"update"', b'"kind":"permission_request"', b'"type":"decision"')
            counts = ":".join(str(sum(mark in line for line in lines)) for mark in marks)
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"journal:{counts}"}}
            self.op_update({"update": chunk, "session": step.get("session", "s1")})

    def op_flood(self, step: dict[str, Any]) -> None:
        session = step.get("session", "s1")
        line = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": session,
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": step["text"]},
                    },
                },
            },
            separators=(",", ":"),
        ).encode()
        batch = (line + b"\n") * 256
        count = step["count"]
        try:
            while count >= 256:
                self.stdout.write(batch)
                count -= 256
            self.stdout.write((line + b"\n") * count)
            self.stdout.flush()
        except BrokenPipeError:
            sys.exit(0)

    def op_big_line(self, step: dict[str, Any]) -> None:
        chunk = b"x" * (1 << 20)
        size = step["size"]
        try:
            while size > 0:
                self.stdout.write(chunk[: min(size, len(chunk))])
                size -= len(chunk)
            if step.get("newline", True):
                self.stdout.write(b"\n")
            self.stdout.flush()
        except BrokenPipeError:
            sys.exit(0)

    def op_sleep(self, step: dict[str, Any]) -> None:
        time.sleep(step["seconds"])

    def op_exit(self, step: dict[str, Any]) -> None:
        self.stdout.flush()
        if "signal" in step:
            os.kill(os.getpid(), step["signal"])
        os._exit(step.get("code", 0))

    def op_close_stdout(self, step: dict[str, Any]) -> None:
        self.stdout.flush()
        os.close(1)
        self.stdout = open(os.devnull, "wb")  # noqa: SIM115

    def op_close_stdin(self, step: dict[str, Any]) -> None:
        os.close(0)

    def op_wait_eof(self, step: dict[str, Any]) -> None:
        while self.read() is not None:
            pass

    def op_hang(self, step: dict[str, Any]) -> None:
        while True:
            time.sleep(3600)

    def op_ignore_sigterm(self, step: dict[str, Any]) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def op_spawn(self, step: dict[str, Any]) -> None:
        child = subprocess.Popen(step["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.children.append(child)
        with open(step["pidfile"], "a") as pidfile:
            pidfile.write(f"{child.pid}\n")

    def op_stderr(self, step: dict[str, Any]) -> None:
        if "text" in step:
            sys.stderr.buffer.write(step["text"].encode())
            sys.stderr.buffer.flush()
            return
        chunk = b"e" * 65536
        size = step["size"]
        while size > 0:
            sys.stderr.buffer.write(chunk[: min(size, len(chunk))])
            size -= len(chunk)
        sys.stderr.buffer.flush()


def main() -> None:
    with open(sys.argv[1]) as script_file:
        steps = json.load(script_file)
    Script(steps, sys.argv[2] if len(sys.argv) > 2 else None).run()


if __name__ == "__main__":
    main()
