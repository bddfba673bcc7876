"""The protocol loop: `DemoAgent` reads JSON-RPC lines from its input, hands each request to its handler (the
tables ``REQUESTS`` and ``NOTIFICATIONS`` of ``_sessions.py``, ``_turn.py`` and ``_unstable.py``), and within a turn
sends updates, asks the client and waits for its answer while it keeps reading, so that a ``session/cancel`` is seen
as soon as it arrives."""

from __future__ import annotations

import collections
import importlib
import json
import os
import select
import sys
import time

from . import _sessions
from ._store import Store, default_state_dir
from ._wire import METHOD_NOT_FOUND, EndOfInput, RpcError, notification, params_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

    from ._settings import DemoSettings
    from ._store import Session
    from ._turn import Turn
    from ._wire import JsonObject

# os.read() size: one pipe buffer on Linux, so a burst of lines is picked up in one system call.
_READ_SIZE = 65536

# The methods whose module is imported when the first of them comes (its tables are taken then): a start that only
# answers `initialize` (`tinyacp agents --check`) loads no turn. Each module costs a start about 0.15 ms.
LATER = {
    "session/prompt": "_turn",
    "session/cancel": "_turn",
    "providers/list": "_unstable",
    "providers/set": "_unstable",
    "providers/disable": "_unstable",
    "_tinyacp/echo": "_unstable",
}


class DemoAgent:
    """The agent: reads messages from ``in_fd``, writes lines to ``out_fd``.

    Everything runs on one thread. Inside a turn the agent keeps reading its input whenever it pauses or waits
    for the permission answer, so a ``session/cancel`` is seen as soon as it arrives. The modules of the package
    reach its state through these attributes and its methods (``emit``, ``ask``, ``send``, ...).
    """

    def __init__(self, options: DemoSettings, in_fd: int = 0, out_fd: int = 1, log: TextIO = sys.stderr) -> None:
        self.options = options
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._log_file = log
        self._buffer = bytearray()
        self._eof = False
        self.sessions: dict[str, Session] = {}
        """The sessions opened, loaded or resumed in this process."""
        self.turn: Turn | None = None
        self._deferred: collections.deque[JsonObject] = collections.deque()
        self.next_session = 1
        self.authenticated = False
        self.store = Store(options.state_dir or default_state_dir())
        self._next_tool_call = 1
        self._next_request_id = 0
        self.counters: dict[str, int] = {}
        self.features: set[str] = set()
        """What the client opted in to at ``initialize`` (see ``_sessions.client_features``)."""
        self.providers: dict[str, JsonObject | None] = {
            "demo": {"apiType": "openai", "baseUrl": "https://example.com/tinyacp-demo/v1"}
        }
        """The providers of ``_unstable.py``: the one the agent starts with, ``demo``; None is a disabled one."""
        self._requests: dict[str, Callable[[DemoAgent, JsonObject], JsonObject]] = dict(_sessions.REQUESTS)
        self._notifications: dict[str, Callable[[DemoAgent, JsonObject], None]] = {}
        self._later = dict(LATER)
        self.extension_notes: collections.deque[str] = collections.deque(maxlen=100)
        """Extension notifications received, newest last (the echo method reports them); bounded."""
        # Ids of our requests still waiting for an answer, and the answers that came back.
        self._awaiting: set[int] = set()
        self._answers: dict[int, JsonObject] = {}

    def run(self) -> int:
        """Serve until stdin closes (or stdout is gone); returns the exit status, 0."""
        try:
            while True:
                if self._deferred:
                    self._handle(self._deferred.popleft())
                    continue
                message = self._read_message(None)
                if message is not None:
                    self._handle(message)
        except (EndOfInput, BrokenPipeError):
            return 0

    # -- dispatch ------------------------------------------------------------------------------------------

    def _handle(self, message: JsonObject) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" not in message:
                handler = self._notifications.get(method)
                if handler is None and self._load(method):
                    handler = self._notifications.get(method)
                if method.startswith("_"):
                    self.extension_notes.append(method)
                if handler is None:
                    self.debug(f"ignored notification {method}")
                else:
                    handler(self, params_of(message))
                return
            if method == "session/prompt" and self.turn is not None:
                # One turn at a time: answer this prompt once the running one is over.
                self._deferred.append(message)
                return
            self._answer_request(message, method)
        elif "id" in message and ("result" in message or "error" in message):
            self._take_answer(message)
        else:
            self.debug(f"ignored message without a method: {message!r}")

    def _answer_request(self, message: JsonObject, method: str) -> None:
        request_id = message["id"]
        handler = self._requests.get(method)
        if handler is None and self._load(method):
            handler = self._requests.get(method)
        try:
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found")
            result = handler(self, params_of(message))
        except RpcError as error:
            error_object = {"code": error.code, "message": error.message}
            self.send({"jsonrpc": "2.0", "id": request_id, "error": error_object})
            return
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _load(self, method: str) -> bool:
        """Imports the module `LATER` names for ``method`` and takes its handlers; False if it names none."""
        name = self._later.pop(method, None)
        if name is None:
            return False
        module = importlib.import_module(f"{__package__}.{name}")
        self._requests.update(module.REQUESTS)
        self._notifications.update(getattr(module, "NOTIFICATIONS", {}))
        return True

    def _take_answer(self, message: JsonObject) -> None:
        answer_id = message["id"]
        # `type(...) is int`: True == 1 in Python, and a JSON `true` id is not one we sent.
        if type(answer_id) is int and answer_id in self._awaiting:
            self._awaiting.discard(answer_id)
            self._answers[answer_id] = message
        else:
            self.debug(f"ignored answer to an id we did not send or no longer wait for: {answer_id!r}")

    def ask(self, turn: Turn, method: str, params: JsonObject) -> JsonObject | None:
        """Sends a request to the client and waits for the answer, handling input meanwhile.

        Returns:
            The answer (a result or an error), or None when the turn was cancelled first.
        """
        if self._paused_and_cancelled(turn):
            return None
        request_id = self._next_request_id
        self._next_request_id += 1
        self._awaiting.add(request_id)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while request_id not in self._answers:
            if turn.cancelled:
                # Do not wait for the client's answer: the turn is over; a late answer is ignored.
                self._awaiting.discard(request_id)
                return None
            message = self._read_message(None)
            if message is not None:
                self._handle(message)
        return self._answers.pop(request_id)

    def new_tool_call_id(self) -> str:
        tool_call_id = f"call_{self._next_tool_call}"
        self._next_tool_call += 1
        return tool_call_id

    def count(self, what: str) -> int:
        """The next number of a kind of thing the agent names (plans, compactions, children, messages)."""
        self.counters[what] = number = self.counters.get(what, 0) + 1
        return number

    def save(self, session: Session) -> None:
        try:
            self.store.save(session)
        except OSError as error:  # a read-only home must not stop the demo: the session just won't outlive us
            self.debug(f"could not save {session.session_id}: {error}")

    def emit_all(self, turn: Turn, updates: list[JsonObject]) -> bool:
        """Emits the updates one by one; False, with the rest left unsent, once the turn is cancelled."""
        return all(self.emit(turn, update) for update in updates)

    def emit(self, turn: Turn, update: JsonObject, session_id: str | None = None) -> bool:
        """Pauses (see `_paused_and_cancelled`), then sends the update; False if the turn got cancelled."""
        if self._paused_and_cancelled(turn):
            return False
        self.update(turn, update, session_id)
        return True

    def _paused_and_cancelled(self, turn: Turn) -> bool:
        """Waits ``--delay`` seconds handling input (polls it if 0); True if the turn is cancelled.

        The first update of a turn goes out at once: the delay is *between* updates.
        """
        if not turn.cancelled:
            delay = self.options.delay if turn.updates_sent else 0.0
            deadline = time.monotonic() + delay
            while not turn.cancelled:
                message = self._read_message(deadline)
                if message is None:
                    break
                self._handle(message)
        return turn.cancelled

    def update(self, turn: Turn, update: JsonObject, session_id: str | None = None) -> None:
        """Sends one update for the turn's session, or for ``session_id`` (a child's), and keeps track of it."""
        session_id = session_id or turn.session.session_id
        kind = update["sessionUpdate"]
        if kind == "tool_call":
            turn.open_tool_call = (session_id, update["toolCallId"])
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            turn.open_tool_call = None
        elif kind == "agent_message_chunk" and session_id == turn.session.session_id:
            turn.reply.append(update["content"]["text"])
        elif kind == "subagent_update":
            turn.open_child = update["sessionId"] if update["state"]["state"] == "running" else None
        turn.updates_sent += 1
        self.send(notification(session_id, update))

    # -- I/O -------------------------------------------------------------------------------------------

    def _read_message(self, deadline: float | None) -> JsonObject | None:
        """Next JSON object from stdin; None once ``deadline`` passes (None = wait for ever).

        Raises:
            EndOfInput: waiting with no deadline, and stdin is closed with every line handled.
        """
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0 or (self._eof and self._buffer):
                end = newline if newline >= 0 else len(self._buffer)
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                message = self._parse(line)
                if message is not None:
                    return message
                continue
            if self._eof:
                if deadline is None:
                    raise EndOfInput
                # Nothing more can arrive, but a turn that needs no answer still runs to its end.
                time.sleep(max(0.0, deadline - time.monotonic()))
                return None
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._in_fd], [], [], timeout)
            if not readable:
                return None
            data = os.read(self._in_fd, _READ_SIZE)
            if data:
                self._buffer += data
            else:
                self._eof = True

    def _parse(self, line: bytes) -> JsonObject | None:
        if not line.strip():
            return None
        self.debug(f"<- {line.decode('utf-8', 'replace')}")
        try:
            message = json.loads(line)
        except ValueError:
            self.debug("ignored a line that is not JSON")
            return None
        if not isinstance(message, dict):
            self.debug("ignored a JSON value that is not an object")
            return None
        return message

    def send(self, message: JsonObject) -> None:
        # "replace": a lone surrogate (legal in JSON text, not in UTF-8) must not crash the agent.
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        self.debug(f"-> {text}")
        data = (text + "\n").encode("utf-8", "replace")
        while data:
            written = os.write(self._out_fd, data)
            data = data[written:]

    def debug(self, text: str) -> None:
        if self.options.verbose:
            print(f"tinyacp-demo: {text}", file=self._log_file, flush=True)
