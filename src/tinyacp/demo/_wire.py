"""What every module of the demo agent writes and reads on the wire: the JSON-RPC error codes, the error a request
handler raises, and the small builders of ACP messages and updates. Imports nothing of tinyacp."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing: 2.6 ms more per start, paid by every test and batch turn (benchmarks/RESULTS.md)
    from typing import Any

    JsonObject = dict[str, Any]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
AUTH_REQUIRED = -32000
NOT_FOUND = -32002


class RpcError(Exception):
    """Raised by a request handler; becomes a JSON-RPC error response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class EndOfInput(Exception):
    """The client closed our stdin."""


def text(text: str) -> JsonObject:
    """A text content block."""
    return {"type": "text", "text": text}


def chunk(kind: str, text_: str) -> JsonObject:
    """A message or thought chunk update of ``kind`` (``agent_message_chunk``, ...)."""
    return {"sessionUpdate": kind, "content": text(text_)}


def tool_status(tool_call_id: str, status: str) -> JsonObject:
    """A ``tool_call_update`` that only moves the call's status."""
    return {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": status}


def child_state(child: str, stop_reason: str) -> JsonObject:
    """A ``subagent_update``: the child session's work is over, it is idle, with the stop reason of its work."""
    state = {"state": "idle", "stopReason": stop_reason}
    return {"sessionUpdate": "subagent_update", "sessionId": child, "state": state}


def notification(session_id: str, update: JsonObject) -> JsonObject:
    """The ``session/update`` notification that carries ``update`` for ``session_id``."""
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def params_of(message: JsonObject) -> JsonObject:
    """A message's params, or ``{}`` when they are missing or no object."""
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def elicitation_action(answer: JsonObject) -> str | None:
    """The ``action`` of an answer to ``elicitation/create``; None for an error answer or a malformed one."""
    result = answer.get("result")
    action = result.get("action") if isinstance(result, dict) else None
    return action if isinstance(action, str) else None


def plural(number: int, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
