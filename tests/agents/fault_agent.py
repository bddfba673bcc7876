"""The scripted agent of ``scripted.py`` that also logs every byte it writes, for the fault matrix.

Run as ``python fault_agent.py SCRIPT.json RECEIVED_LOG SENT_LOG``. It plays the same steps as ``scripted.py``
(see its docstring) and appends one JSON object per write to SENT_LOG *before* the write, so a test can compare
the observer's record with exactly what the agent wrote, up to the fault:

- ``{"data": BASE64}``: bytes written as they were (whole lines, or part of one);
- ``{"flood": BASE64, "count": N}``: the ``flood`` step, one line (without its newline) N times;
- ``{"big": SIZE, "newline": BOOL}``: the ``big_line`` step, SIZE bytes of ``x``.

Two more steps: ``report`` sends an ``agent_message_chunk`` whose text is a JSON object telling how the agent
was started (``argv`` beyond the three above, ``environ``: its initial environment in base64, ``cwd``, ``pid``,
``ppid``, ``pgid``, ``sid``); ``tool`` starts ``fault_tool.py`` (``ignore_term``, ``escape``, ``hold_stdout`` as
there; with ``hold_stdout`` the tool's stdout is ours), waits until it reports ready, and appends its pid to
``pidfile``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from scripted import Script

TOOL = Path(__file__).resolve().parent / "fault_tool.py"


class LoggingScript(Script):
    def __init__(self, steps: list[dict[str, Any]], received_log: str, sent_log: str) -> None:
        super().__init__(steps, received_log)
        self.sent = open(sent_log, "ab", buffering=0)  # noqa: SIM115

    def note(self, **entry: Any) -> None:
        self.sent.write(json.dumps(entry).encode() + b"\n")

    def write(self, data: bytes) -> None:
        self.note(data=base64.b64encode(data).decode())
        super().write(data)

    def op_flood(self, step: dict[str, Any]) -> None:
        params = {
            "sessionId": step.get("session", "s1"),
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": step["text"]}},
        }
        line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}, separators=(",", ":"))
        self.note(flood=base64.b64encode(line.encode()).decode(), count=step["count"])
        super().op_flood(step)

    def op_big_line(self, step: dict[str, Any]) -> None:
        self.note(big=step["size"], newline=step.get("newline", True))
        super().op_big_line(step)

    def op_report(self, step: dict[str, Any]) -> None:
        with open("/proc/self/environ", "rb") as environ:
            env = base64.b64encode(environ.read()).decode()
        ids = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0)}
        report = {"argv": sys.argv[4:], "environ": env, "cwd": os.getcwd(), **ids}
        text = json.dumps(report)
        self.op_update({"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}})

    def op_tool(self, step: dict[str, Any]) -> None:
        ready_r, ready_w = os.pipe()
        flags = [flag for flag in ("ignore_term", "escape") if step.get(flag)]
        tool = subprocess.Popen(
            [sys.executable, str(TOOL), str(ready_w), *("--" + flag.replace("_", "-") for flag in flags)],
            stdin=subprocess.DEVNULL,
            stdout=1 if step.get("hold_stdout") else subprocess.DEVNULL,
            pass_fds=(ready_w,),
        )
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as ready:
            pid = ready.readline().decode().strip()
        if step.get("escape"):
            tool.wait()  # the launcher exits at once; the escaped grandchild reported
        self.children.append(tool)
        with open(step["pidfile"], "a") as pidfile:
            pidfile.write(f"{pid}\n")


def main() -> None:
    with open(sys.argv[1]) as script_file:
        steps = json.load(script_file)
    LoggingScript(steps, sys.argv[2], sys.argv[3]).run()


if __name__ == "__main__":
    main()
