"""An agent process on raw pipes, for the tests that drive the demo agent (or the SDK-built one) line by line.

Every line the agent writes is checked against each vendored ACP schema that knows what the line is: the
release ``schema-v1.21.0`` and the TypeScript SDK 2.4.0's stable and unstable files (the unstable one knows every
line; a line the other two know must fit them too, so a client that opted in to nothing gets nothing newer than
v1.21). A line is checked against the ``Agent`` branch of the top level and against the precise definition of
what it is (a ``SessionNotification``, a ``RequestPermissionRequest``, the result type of the request it answers,
or an ``Error``), because the ``Agent`` branch alone accepts any extension message.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"
SCHEMA_PATH = TESTS / "acp" / "schema" / "v1" / "schema.json"
STABLE_PATH = TESTS / "acp" / "sdk-2.4.0" / "v1" / "schema.json"
UNSTABLE_PATH = TESTS / "acp" / "sdk-2.4.0" / "v1" / "schema.unstable.json"
SCHEMAS = (SCHEMA_PATH, STABLE_PATH, UNSTABLE_PATH)
SDK_AGENT = TESTS / "agents" / "sdk_agent.py"


# Generous: an agent that never answers fails the test after this long instead of hanging it.
READ_TIMEOUT = 10.0

RESULT_DEFS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "logout": "LogoutResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
    "session/fork": "ForkSessionResponse",
    "session/set_title": "SetSessionTitleResponse",
    "providers/list": "ListProvidersResponse",
    "providers/set": "SetProviderResponse",
    "providers/disable": "DisableProviderResponse",
}
"""The result type of each request the tests send; a method not here (an extension) is checked as ``Agent`` only."""

AGENT_METHOD_DEFS = {
    "session/update": "SessionNotification",
    "session/request_permission": "RequestPermissionRequest",
    "elicitation/create": "CreateElicitationRequest",
    "elicitation/complete": "CompleteElicitationNotification",
}
"""The params type of each method the agent may send."""

Message = dict[str, Any]


@functools.cache
def schema(path: Path = SCHEMA_PATH) -> Message:
    loaded: Message = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def validator(name: str, path: Path = SCHEMA_PATH) -> Draft202012Validator:
    """A validator for one ``$defs`` entry, or for ``"Agent"``: the top-level branch of agent-sent lines."""
    whole = schema(path)
    if name == "Agent":
        (branch,) = [branch for branch in whole["anyOf"] if branch.get("title") == "Agent"]
        return Draft202012Validator({**branch, "$defs": whole["$defs"]})
    return Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": whole["$defs"]})


@functools.cache
def update_kinds(path: Path) -> frozenset[str]:
    """The ``sessionUpdate`` kinds a schema knows."""
    return frozenset(
        branch["properties"]["sessionUpdate"]["const"] for branch in schema(path)["$defs"]["SessionUpdate"]["oneOf"]
    )


def check_agent_line(message: Message, part: str | None, inner: Any) -> None:
    """Checks one line against every schema that knows ``part`` (and, for an update, its kind).

    ``part`` names the definition ``inner`` (the params, result or error) must fit; None checks the branch only.
    """
    kind = inner.get("update", {}).get("sessionUpdate") if part == "SessionNotification" else None
    for path in SCHEMAS:
        known = part is None or part in schema(path)["$defs"]
        known = known and (kind is None or kind in update_kinds(path))
        if path == UNSTABLE_PATH:
            assert known, f"not even the unstable schema knows {part} {kind}: {message}"
        if not known:
            continue
        validator("Agent", path).validate(message)
        if part is not None:
            validator(part, path).validate(inner)


def _id_key(request_id: object) -> tuple[str, object]:
    # JSON 1 and "1" are different ids (and Python's True == 1): compare with the type.
    return (type(request_id).__name__, request_id)


class AgentPipe:
    """One agent process on raw pipes: writes JSON lines, reads them back with deadlines, never hangs."""

    def __init__(self, argv: list[str], stderr_path: Path, *, compact: bool) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
        self._stderr = stderr_path.open("wb")
        self._stderr_path = stderr_path
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        self._compact = compact
        self._buffer = bytearray()
        self._next_id = 1
        self._sent: dict[tuple[str, object], str] = {}

    # -- writing

    def send(self, message: Message) -> None:
        self.send_raw(json.dumps(message, separators=(",", ":")))

    def send_raw(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Message, request_id: int | str | None = None) -> int | str:
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        self._sent[_id_key(request_id)] = method
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def answer(self, request: Message, result: Message) -> None:
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    # -- reading

    def read(self, timeout: float = READ_TIMEOUT) -> Message:
        """The next line, parsed and checked against the schemas."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while (newline := self._buffer.find(b"\n")) < 0:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([fd], [], [], max(0.0, remaining))
            if not readable:
                raise AssertionError(f"no line from the agent within {timeout}s; stderr:\n{self.stderr()}")
            data = os.read(fd, 65536)
            if not data:
                raise AssertionError(f"agent closed stdout; stderr:\n{self.stderr()}")
            self._buffer += data
        raw = self._buffer[:newline].decode("utf-8")
        del self._buffer[: newline + 1]
        message: Message = json.loads(raw)
        if self._compact:
            assert raw == json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        self._check(message)
        return message

    def read_turn(
        self, prompt_id: int | str, on_request: Callable[[Message], None] | None = None
    ) -> tuple[list[Message], Message]:
        """Reads until the response to ``prompt_id``: (the updates of any session, in order; the response).

        Agent requests go to ``on_request``; without one they fail the test.
        """
        traffic, response = self.read_traffic(prompt_id, on_request)
        updates = [message["params"]["update"] for message in traffic if message.get("method") == "session/update"]
        return updates, response

    def read_traffic(
        self, prompt_id: int | str, on_request: Callable[[Message], None] | None = None
    ) -> tuple[list[Message], Message]:
        """As `read_turn`, with every message the agent wrote before the response, whole and in order (requests
        included, each after ``on_request`` saw it)."""
        traffic: list[Message] = []
        while True:
            message = self.read()
            if "method" in message and "id" in message:
                assert on_request is not None, f"unexpected request from the agent: {message}"
                on_request(message)
            elif "method" not in message and message["id"] == prompt_id:
                return traffic, message
            traffic.append(message)

    def _check(self, message: Message) -> None:
        method = message.get("method")
        if method is not None:
            assert method in AGENT_METHOD_DEFS, f"the agent sent an unexpected method: {message}"
            check_agent_line(message, AGENT_METHOD_DEFS[method], message["params"])
            return
        sent_method = self._sent.pop(_id_key(message["id"]), None)
        assert sent_method is not None, f"answer to an id we never sent (or answered twice): {message}"
        if "error" in message:
            check_agent_line(message, "Error", message["error"])
        else:
            check_agent_line(message, RESULT_DEFS.get(sent_method), message["result"])

    # -- ending

    def close(self, timeout: float = READ_TIMEOUT) -> int:
        """Closes the agent's stdin; returns its exit status once it has exited."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        """Kills the agent's process group, reaps the agent and closes our ends of its pipes."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=READ_TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()

    def stderr(self) -> str:
        self._stderr.flush()
        return self._stderr_path.read_text(encoding="utf-8", errors="replace")

    # -- conversation helpers

    def initialize(self, client_capabilities: Message | None = None) -> Message:
        """``initialize`` with these client capabilities (none by default); returns the result."""
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": client_capabilities or {}})
        result: Message = self.read()["result"]
        return result

    def start_session(self, cwd: Path, client_capabilities: Message | None = None) -> str:
        self.initialize(client_capabilities)
        new_id = self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        response = self.read()
        assert response["id"] == new_id
        session_id: str = response["result"]["sessionId"]
        return session_id

    def prompt(self, session_id: str, text: str) -> int | str:
        return self.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})


Spawn = Callable[..., AgentPipe]


def spawning(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spawn]:
    """The body of a ``spawn`` fixture: starts agents; afterwards kills whatever is left and checks that no
    process survived."""
    agents: list[AgentPipe] = []

    def start(*args: str, sdk: bool = False) -> AgentPipe:
        program = [str(SDK_AGENT)] if sdk else ["-m", "tinyacp.demo"]
        stderr_path = tmp_path_factory.mktemp("stderr") / "agent.err"
        agent = AgentPipe([sys.executable, *program, *args], stderr_path, compact=not sdk)
        agents.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            agent.kill()
        for agent in agents:
            # Nothing is left in the agent's process group (its id is the agent's pid).
            with pytest.raises(ProcessLookupError):
                os.killpg(agent.proc.pid, 0)


def assert_end_turn(response: Message) -> None:
    """A finished turn: ``end_turn``, with the turn's token counts."""
    result = response["result"]
    assert result["stopReason"] == "end_turn"
    usage = result.get("usage")
    if usage is not None:  # the all-kinds turn reports its usage as an update only
        assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] > 0


def kinds(updates: list[Message]) -> list[str]:
    return [update["sessionUpdate"] for update in updates]


def message_text(updates: list[Message]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def selecting(option_id: str, seen: list[Message], agent: AgentPipe) -> Callable[[Message], None]:
    """An on_request handler that records permission requests and selects ``option_id``."""

    def handle(request: Message) -> None:
        assert request["method"] == "session/request_permission"
        seen.append(request)
        agent.answer(request, {"outcome": {"outcome": "selected", "optionId": option_id}})

    return handle
