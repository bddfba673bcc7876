"""The ``tinyacp`` command run as a person or a CI job runs it: a child process, or one on a terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import shlex
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import AGENTS, pid_alive

SRC = Path(__file__).resolve().parents[2] / "src"
CLI = [sys.executable, "-m", "tinyacp.cli"]
MARKER = "TINYACP_TEST_RUN"
TIMEOUT = 30.0  # a CLI run that hangs fails its test after this long


# What the agent sends to test sanitizing: escape sequences, an OSC title and hyperlink, CR, BEL, a bidi override.
EVIL_TITLE = "Read \x1b]0;pwned\x07notes\x1b[2J"
EVIL_OUTPUT = "line1\rOVER\x1b]8;;http://evil.example\x07link\x1b]8;;\x07"
EVIL_REPLY = "safe \x1b[2Jabc\rXYZ\x07 \u202eevil\u009b31m\n"


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment holds this test's marker."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue
        if needle in environ.split(b"\0") and pid_alive(int(name)):
            found.append(int(name))
    return found


class Cli:
    """Runs ``tinyacp`` in a scratch home: its own config and state dirs, a work dir with two files."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.work = tmp / "work"
        self.work.mkdir()
        (self.work / "a.txt").write_text("hello\n")
        (self.work / "b.md").write_text("x\ny\n")
        self.marker = uuid.uuid4().hex
        env = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
            XDG_STATE_HOME=str(tmp / "state"),
            XDG_CONFIG_HOME=str(tmp / "config"),
            TERM="dumb",
        )
        env[MARKER] = self.marker
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []

    def run(
        self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*CLI, *args],
            input=input if input is not None else b"",
            capture_output=True,
            cwd=self.work,
            env=env or self.env,
            timeout=TIMEOUT,
            check=False,
        )

    def popen(self, *args: str, stderr: Path) -> subprocess.Popen[bytes]:
        with open(stderr, "wb") as err:
            proc = subprocess.Popen(
                [*CLI, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=self.work,
                env=self.env,
            )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        """Stop what a failed test left running, close the pipes."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=TIMEOUT)
            if proc.stdout is not None:
                proc.stdout.close()

    def expected_reply(self, prompt: str = "hello") -> str:
        return (
            f"You said: {prompt}\nI read 2 files in {self.work}:\n- a.txt: 6 bytes, 1 line\n- b.md: 4 bytes, 2 lines\n"
        )

    def scripted(self, steps: list[dict[str, Any]], name: str = "agent") -> str:
        """An --agent value for a scripted agent (tests/agents/scripted.py)."""
        script = self.tmp / f"{name}.json"
        script.write_text(json.dumps(steps))
        return shlex.join([sys.executable, str(AGENTS / "scripted.py"), str(script), str(self.tmp / f"{name}.log")])


def json_events(stdout: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


class Lines:
    """Reads a child's stdout line by line with a deadline (no thread, no blocking read)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.lines: list[bytes] = []
        self.seen = 0
        """Lines already looked at by ``until`` (a line read with an earlier match is looked at next time)."""

    def until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            while self.seen < len(self.lines):
                event = json.loads(self.lines[self.seen])
                self.seen += 1
                if predicate(event):
                    return event  # type: ignore[no-any-return]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no such event in time; got {self.lines!r}")
            readable, _, _ = select.select([self.fd], [], [], remaining)
            if readable:
                data = os.read(self.fd, 65536)
                if not data:
                    raise AssertionError(f"stdout closed; got {self.lines!r}")
                self.buffer += data
                *complete, self.buffer = self.buffer.split(b"\n")
                self.lines += complete

    def rest(self) -> list[dict[str, Any]]:
        while data := os.read(self.fd, 65536):
            self.buffer += data
        self.lines += [line for line in self.buffer.split(b"\n") if line]
        self.buffer = b""
        return [json.loads(line) for line in self.lines]


class Terminal:
    """``tinyacp`` on a pseudo-terminal: stdin, stdout and stderr are the pty, as in an interactive shell."""

    def __init__(self, cli: Cli, *args: str) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = dict(cli.env, TERM="xterm-256color")
        self.proc = subprocess.Popen([*CLI, *args], stdin=slave, stdout=slave, stderr=slave, cwd=cli.work, env=env)
        os.close(slave)
        self.master = master
        self.output = b""

    def _read(self, timeout: float) -> bool:
        readable, _, _ = select.select([self.master], [], [], timeout)
        if not readable:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the pty has exited
            return False
        self.output += data
        return bool(data)

    def wait_for(self, text: bytes, timeout: float = TIMEOUT, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while self.output.count(text) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._read(min(remaining, 0.5)):
                raise AssertionError(f"{text!r} never appeared; got {self.output!r}")

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, timeout: float = TIMEOUT) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            if self.proc.poll() is not None and not select.select([self.master], [], [], 0.05)[0]:
                break
        os.close(self.master)
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))


def init_answer(**capabilities: Any) -> dict[str, Any]:
    methods = capabilities.pop("authMethods", [])
    return {
        "protocolVersion": 1,
        "agentCapabilities": {"promptCapabilities": {}, **capabilities},
        "agentInfo": {"name": "scripted", "version": "1"},
        "authMethods": methods,
    }


def lines_received(cli: Cli, name: str = "agent") -> list[dict[str, Any]]:
    """What the scripted agent received, in order."""
    lines = (cli.tmp / f"{name}.log").read_bytes().splitlines()
    return [json.loads(line) for line in lines]


def name_scripted_agent(cli: Cli, steps: list[dict[str, Any]], extra: str = "") -> None:
    """A config entry `scripted` for a scripted agent (the same name across runs, so --continue finds it)."""
    command = cli.scripted(steps)
    config = cli.tmp / "config" / "tinyacp"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(f"[agents.scripted]\ncommand = {json.dumps(command)}\n{extra}")


SESSION_WITH_SETTINGS: dict[str, Any] = {
    "sessionId": "s1",
    "modes": {
        "currentModeId": "default",
        "availableModes": [{"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan"}],
    },
    "configOptions": [
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": "small",
            "options": [{"value": "small", "name": "Small"}, {"value": "large", "name": "Large"}],
        },
        {
            "id": "effort",
            "name": "Effort",
            "type": "select",
            "currentValue": "low",
            "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}],
        },
    ],
}


def steps_with_settings(then: list[dict[str, Any]], capabilities: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer(**(capabilities or {}))},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": SESSION_WITH_SETTINGS},
        *then,
    ]
