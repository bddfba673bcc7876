"""A shell for tests of the pure core: runs each line's effects in the order the core asks for, and logs them.

The real shells call the observer and write to a pipe; this one appends ``(name, value)`` to ``events``, so a test
can read the exact order of records and writes. Subclasses answer permission requests and take the answers.

With it, the scripted side of the core's tests: ``make_core``, a ``Driver`` that feeds bytes whole or one at a
time, and the agent's lines (``line``, ``result``, ``update``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tinyacp import (
    ClientInfo,
    LineReader,
    OutgoingMessage,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    ReaderLimits,
    TransferLimits,
    Update,
)
from tinyacp._conversation import Conversation, Record, Write


class CoreDriver:
    def __init__(self, core: Conversation) -> None:
        self.core = core
        self.events: list[tuple[str, Any]] = []

    def answer(self, request: PermissionRequest) -> PermissionReply | None:
        """What the observer's ``on_permission_request`` returns (None: leave it to the policy)."""
        return None

    def finished(self, value: object) -> None:
        """The call in flight has its answer."""

    def _write(self, message: OutgoingMessage) -> None:
        self.events.append(("on_send", message))
        self.events.append(("write", message.raw + b"\n"))

    def _handle(self, line: bytes) -> None:
        event = self.core.receive(line)
        if isinstance(event, Update):
            self.events.append(("on_update", event))
            cancel = self.core.update_recorded(event)
            if cancel is not None:
                self._write(cancel)
            return
        answer: Any = None
        try:
            while True:
                effect = event.send(answer)
                answer = None
                if isinstance(effect, Record):
                    self.events.append((effect.callback, effect.value))
                    if effect.callback == "on_permission_request":
                        answer = self.answer(effect.value)  # type: ignore[arg-type]
                else:
                    assert isinstance(effect, Write), "no act: these cores serve nothing"
                    self._write(effect.message)
        except StopIteration as stop:
            if stop.value is not None:
                self.finished(stop.value.value)


EPOCH = 3
SESSION = "s1"
MAX_LINE = 1024 * 1024  # the default max_update_bytes: the least line limit the core accepts with it
NO_CAPABILITIES = {"protocolVersion": 1, "agentInfo": {"name": "scripted", "version": "1"}}
Decide = Callable[[PermissionRequest], PermissionReply | None]


class Driver(CoreDriver):
    """Plays the shell around one core: feeds bytes through the reader in ``piece``-byte pieces, runs steps."""

    def __init__(self, core: Conversation, piece: int | None, decide: Decide | None = None) -> None:
        super().__init__(core)
        self.reader = LineReader(None, ReaderLimits(MAX_LINE))
        self.piece = piece
        self.decide = decide
        self.done: list[object] = []

    def send(self, message: OutgoingMessage) -> OutgoingMessage:
        """Write one of our own lines, as the shell does: recorded with on_send, then written."""
        self._write(message)
        return message

    def feed(self, data: bytes) -> None:
        """The agent's bytes arrive; every complete line is handled at once (errors propagate)."""
        pos = 0
        while pos < len(data):
            view = self.reader.writable()
            n = min(len(view), len(data) - pos, self.piece or len(data))
            view[:n] = data[pos : pos + n]
            self.reader.commit(n)
            pos += n
            while type(line := self.reader.poll()) is bytes:
                self._handle(line)

    def writes(self) -> list[dict[str, Any]]:
        return [json.loads(data) for name, data in self.events if name == "write"]

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def of(self, name: str) -> list[Any]:
        return [value for event, value in self.events if event == name]

    def answer(self, request: PermissionRequest) -> PermissionReply | None:
        return self.decide(request) if self.decide is not None else None

    def finished(self, value: object) -> None:
        self.done.append(value)
        self.core.end_call()


def make_core(
    *,
    policy: PermissionPolicy | None = None,
    limits: TransferLimits | None = None,
    has_observer: bool = True,
) -> Conversation:
    return Conversation(
        epoch=EPOCH,
        transfer_limits=limits or TransferLimits(),
        reader_limits=ReaderLimits(MAX_LINE),
        policy=policy or PermissionPolicy(),
        client_info=ClientInfo("tinyacp-tests", "1"),
        has_observer=has_observer,
    )


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def result(request_id: object, value: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "result": value})


def update(fields: dict[str, Any], session: str = SESSION) -> bytes:
    return line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": fields}})
