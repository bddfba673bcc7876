"""Helpers the tests share: paths, scripted agents' steps, a recording observer, waiting for a condition."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tinyacp

TESTS = Path(__file__).resolve().parents[1]
AGENTS = TESTS / "agents"
ACP = TESTS / "acp"
"""The copy of the ACP schema and examples the tests read (see acp/README.md for its origin and licence)."""
SCHEMA_PATH = ACP / "schema" / "v1" / "schema.json"

UPDATE_KINDS = [
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
]
"""The 11 stable ``sessionUpdate`` kinds of ACP v1, in the schema's order."""

INIT_RESULT: dict[str, Any] = {
    "protocolVersion": 1,
    "agentCapabilities": {"promptCapabilities": {"image": False, "audio": False, "embeddedContext": False}},
    "agentInfo": {"name": "scripted", "version": "1"},
}


def handshake(session: str = "s1", init: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Steps that answer initialize and session/new, then wait for the prompt."""
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init or INIT_RESULT},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": session}},
        {"op": "expect", "method": "session/prompt"},
    ]


def chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def end_turn(reason: str = "end_turn") -> dict[str, Any]:
    return {"op": "reply", "result": {"stopReason": reason}}


def agent_request(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    """A scripted agent's request to the client in session ``s1`` (a served file or terminal, a question)."""
    return {"op": "request", "id": request_id, "method": method, "params": {"sessionId": "s1", **params}}


def turn_steps(*middle: dict[str, Any]) -> list[dict[str, Any]]:
    """A scripted agent's whole run: ``initialize``, session ``s1``, one turn doing ``middle``, then its end."""
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": INIT_RESULT},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": "s1"}},
        {"op": "expect", "method": "session/prompt"},
        *middle,
        end_turn(),
    ]


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll a condition until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def pytest_child_env(**extra: str) -> dict[str, str]:
    """The environment for a pytest a test starts: ours, without what configures *this* run (CI passes its
    coverage floor in ``PYTEST_ADDOPTS``, which a core-only child run would fail; an xdist worker's id)."""
    env = {name: value for name, value in os.environ.items() if name not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    return {**env, **extra}


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except FileNotFoundError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] != b"Z"


class Recorder(tinyacp.BaseObserver):
    """Records every call in order: ``events`` is a list of (callback name, record)."""

    def __init__(
        self,
        decide: Callable[[tinyacp.PermissionRequest], tinyacp.PermissionReply | None] | None = None,
        on_decision: Callable[[tinyacp.PermissionRequest], None] | None = None,
    ) -> None:
        self.events: list[tuple[str, Any]] = []
        self._decide = decide
        self._on_decision = on_decision
        self.lock = threading.Lock()

    def _add(self, name: str, value: Any) -> None:
        with self.lock:
            self.events.append((name, value))

    def on_update(self, update: tinyacp.Update) -> None:
        self._add("update", update)

    def on_permission_request(self, request: tinyacp.PermissionRequest) -> tinyacp.PermissionReply | None:
        self._add("permission_request", request)
        return self._decide(request) if self._decide else None

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        self._add("permission_decision", request)
        if self._on_decision:
            self._on_decision(request)

    def on_message(self, message: tinyacp.AgentMessage) -> None:
        self._add("message", message)

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        self._add("send", message)

    def of(self, name: str) -> list[Any]:
        with self.lock:
            return [value for event, value in self.events if event == name]

    @property
    def updates(self) -> list[tinyacp.Update]:
        return self.of("update")


class Journaled(Recorder):
    """A Recorder that also forwards every call to a journal, so the two records can be compared."""

    def __init__(self, journal: tinyacp.JsonlJournal, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.journal = journal

    def on_update(self, update: tinyacp.Update) -> None:
        self.journal.on_update(update)
        super().on_update(update)

    def on_permission_request(self, request: tinyacp.PermissionRequest) -> tinyacp.PermissionReply | None:
        self.journal.on_permission_request(request)
        return super().on_permission_request(request)

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        self.journal.on_permission_decision(request)
        super().on_permission_decision(request)

    def on_message(self, message: tinyacp.AgentMessage) -> None:
        self.journal.on_message(message)
        super().on_message(message)

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        self.journal.on_send(message)
        super().on_send(message)

    def flush(self) -> None:
        self.journal.flush()


class Background:
    """Run a function in a thread; ``join`` waits (bounded) and re-raises what it raised."""

    def __init__(self, function: Callable[[], Any], timeout: float = 20.0) -> None:
        self.error: BaseException | None = None
        self.result: Any = None
        self.timeout = timeout

        def run() -> None:
            try:
                self.result = function()
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Any:
        self.thread.join(self.timeout)
        assert not self.thread.is_alive(), "the background call did not return"
        if self.error is not None:
            raise self.error
        return self.result


class Scripted:
    """A scripted agent's command line and the log of what it received."""

    def __init__(self, tmp_path: Path, steps: list[dict[str, Any]], name: str = "agent") -> None:
        self.script = tmp_path / f"{name}.json"
        self.log = tmp_path / f"{name}.log"
        self.script.write_text(json.dumps(steps))
        self.argv = [sys.executable, str(AGENTS / "scripted.py"), str(self.script), str(self.log)]

    def received(self) -> list[dict[str, Any]]:
        """Every JSON line the agent received, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_bytes().splitlines() if line.strip()]

    def methods(self) -> list[str | None]:
        return [message.get("method") for message in self.received()]


class AsyncFacade:
    """The sync client API over an AsyncClient, each call run to completion on a private event loop.

    ``cancel`` and ``kill`` may be called from another thread while a call runs, as with ``Client``.
    """

    def __init__(self, options: tinyacp.Options) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._client: tinyacp.AsyncClient = self._loop.run_until_complete(self._make(options))
        except BaseException:
            self._loop.close()  # a client that failed to start must not leak its loop's fds
            raise

    @staticmethod
    async def _make(options: tinyacp.Options) -> tinyacp.AsyncClient:
        return tinyacp.AsyncClient(options)

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    @property
    def inner(self) -> tinyacp.AsyncClient:
        return self._client

    @property
    def pid(self) -> int:
        return self._client.pid

    @property
    def closed(self) -> bool:
        return self._client.closed

    @property
    def returncode(self) -> int | None:
        return self._client.returncode

    def stderr_tail(self) -> bytes | None:
        return self._client.stderr_tail()

    def initialize(self, **kwargs: Any) -> tinyacp.Initialize:
        return self._run(self._client.initialize(**kwargs))  # type: ignore[no-any-return]

    def new_session(self, *args: Any, **kwargs: Any) -> tinyacp.Session:
        return self._run(self._client.new_session(*args, **kwargs))  # type: ignore[no-any-return]

    def prompt(self, *args: Any, **kwargs: Any) -> tinyacp.PromptResult:
        return self._run(self._client.prompt(*args, **kwargs))  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        """Every other call of the client: a coroutine method is run to completion, anything else returned."""
        if name.startswith("_"):
            raise AttributeError(name)
        attribute = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._run(attribute(*args, **kwargs))

        return run

    def cancel(self, session_id: str, *, meta: dict[str, Any] | None = None) -> None:
        if self._loop.is_running() and threading.current_thread() is not threading.main_thread():
            future = asyncio.run_coroutine_threadsafe(self._client.cancel(session_id, meta=meta), self._loop)
            future.result(timeout=10)
        else:
            self._run(self._client.cancel(session_id, meta=meta))

    def kill(self) -> None:
        self._client.kill()

    def close(self) -> None:
        self._run(self._client.close())

    def dispose(self) -> None:
        """Close the client if still open, then the private loop (the fixture does this after the test)."""
        try:
            if not self._client.closed:
                self._run(self._client.close())
        finally:
            self._loop.close()

    def __enter__(self) -> AsyncFacade:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ClientLike = tinyacp.Client | AsyncFacade
MakeClient = Callable[..., ClientLike]
MakeScripted = Callable[..., Scripted]


class Flood:
    """The back-pressure agent's flood of ``count`` updates (about 140 bytes each), with the limits that make it
    far larger than the pipe and the client's line buffer together; ``status()`` is what the agent says of itself
    (``starting``, ``writing``, ``stuck WRITTEN LINE_LENGTH PIPE_SIZE``, ``done``)."""

    def __init__(self, tmp_path: Path, count: int = 5000) -> None:
        self.count = count
        self.status_path = tmp_path / "flood.status"
        self.reader_limits = tinyacp.ReaderLimits(max_line=8192)
        self.transfer_limits = tinyacp.TransferLimits(max_update_bytes=8192)
        self.recorder = Recorder()
        self.command = [sys.executable, str(AGENTS / "backpressure_agent.py"), str(self.status_path), str(count)]

    def options(self) -> dict[str, Any]:
        """The client's options for the flood: the recorder and the limits."""
        return {
            "observer": self.recorder,
            "reader_limits": self.reader_limits,
            "transfer_limits": self.transfer_limits,
        }

    def status(self) -> list[str]:
        return self.status_path.read_text().split() if self.status_path.exists() else ["starting"]

    def held_back(self) -> bool:
        """Whether what the agent wrote while stuck fits in the pipe, the line buffer and one line: the client did
        not read while the consumer held back."""
        written, line_length, pipe_size = map(int, self.status()[1:])
        return written <= pipe_size + self.reader_limits.capacity + line_length
