"""A shell for tests of the pure core: runs each line's effects in the order the core asks for, and logs them.

The real shells call the observer and write to a pipe; this one appends ``(name, value)`` to ``events``, so a test
can read the exact order of records and writes. Subclasses answer permission requests and take the answers.
"""

from __future__ import annotations

from typing import Any

from tinyacp import OutgoingMessage, PermissionReply, PermissionRequest, Update
from tinyacp._conversation import Conversation, Record


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
                    self._write(effect.message)
        except StopIteration as stop:
            if stop.value is not None:
                self.finished(stop.value.value)
