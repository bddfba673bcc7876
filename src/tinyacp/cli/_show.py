"""``tinyacp show JOURNAL``: a journal as a readable conversation, or as JSON Lines with each line parsed.

Everything the agent wrote is sanitized before it is shown (see :func:`tinyacp.cli._display.sanitize`); the journal
itself keeps the raw bytes.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from .._journal import JournalContents, JsonlJournal
from .._messages import PlanEntry
from ._display import one_line, plan_lines, sanitize, tool_output_lines

__all__ = ["render_json", "render_text"]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _message(record: dict[str, Any]) -> dict[str, Any] | None:
    try:
        message = json.loads(JsonlJournal.raw(record))
    except (ValueError, KeyError):
        return None
    return message if isinstance(message, dict) else None


def render_json(contents: JournalContents, out: TextIO) -> None:
    """Each record as written, plus ``message``: its line parsed as JSON (null when the line is not JSON)."""
    for record in contents.records:
        shown = {**record, "message": _message(record)} if record["type"] == "line" else record
        out.write(json.dumps(shown, ensure_ascii=True, separators=(",", ":")) + "\n")


class _Renderer:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.reply: list[str] = []
        self.thought: list[str] = []
        self.tools: dict[str, dict[str, Any]] = {}
        self.requests: dict[str, dict[str, Any]] = {}  # permission requests by id, for their decisions
        self.pending: dict[str, str] = {}  # our request ids -> method

    def write(self, line: str = "") -> None:
        self.out.write(line + "\n")

    def flush(self) -> None:
        if self.thought:
            self.write(f"  thought: {one_line(''.join(self.thought), 300)}")
            self.thought.clear()
        if self.reply:
            self.write("  reply:")
            for line in sanitize("".join(self.reply)).splitlines():
                self.write(f"    {line}")
            self.reply.clear()

    def record(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        if kind == "epoch":
            self.flush()
            self.write(f"== epoch {record['epoch']} · {one_line(str(record.get('ts', '')), 40)}")
        elif kind == "decision":
            self.decision(record)
        elif kind == "line":
            message = _message(record)
            if record.get("dir") == "out":
                self.outgoing(record, message)
            else:
                self.incoming(record, message)

    def outgoing(self, record: dict[str, Any], message: dict[str, Any] | None) -> None:
        if message is None:
            return
        method = message.get("method")
        params = _dict(message.get("params"))
        if isinstance(method, str) and "id" in message:
            self.pending[json.dumps(message["id"])] = method
        if method == "initialize":
            self.flush()
            self.write("> initialize")
        elif method == "session/new":
            self.write(f"> session/new in {one_line(str(params.get('cwd', '')), 300)}")
        elif method == "session/prompt":
            self.flush()
            self.write("> prompt:")
            for block in params.get("prompt") or []:
                self.prompt_block(block)
        elif method == "session/cancel":
            self.flush()
            self.write("> cancel")
        elif method is not None:
            self.write(f"> {one_line(method, 80)}")

    def prompt_block(self, block: Any) -> None:
        if not isinstance(block, dict):
            return
        if block.get("type") == "text":
            for line in sanitize(str(block.get("text", ""))).splitlines() or [""]:
                self.write(f"    {line}")
        elif block.get("type") == "resource":
            resource = _dict(block.get("resource"))
            self.write(f"    [file {one_line(str(resource.get('uri', '')), 300)}]")
        else:
            where = block.get("uri") or block.get("mimeType") or ""
            self.write(f"    [{one_line(str(block.get('type')), 40)} {one_line(str(where), 300)}]")

    def incoming(self, record: dict[str, Any], message: dict[str, Any] | None) -> None:
        kind = record.get("kind")
        if kind == "update" and message is not None:
            self.update(message)
            return
        if kind == "permission_request" and message is not None:
            self.permission(message)
            return
        if kind == "response" and message is not None:
            self.response(message)
            return
        detail = f": {one_line(str(record['detail']), 200)}" if record.get("detail") else ""
        method = f" {one_line(str(record['method']), 80)}" if record.get("method") else ""
        self.flush()
        self.write(f"  ! agent line ({one_line(str(kind), 40)}{method}){detail}")

    def response(self, message: dict[str, Any]) -> None:
        method = self.pending.pop(json.dumps(message.get("id")), "")
        self.flush()
        error = message.get("error")
        if isinstance(error, dict):
            text = f"{one_line(str(error.get('message', '')), 300)} (code {error.get('code')})"
            self.write(f"< {method or 'response'}: error: {text}")
            return
        result = _dict(message.get("result"))
        if method == "initialize":
            info = _dict(result.get("agentInfo"))
            name = one_line(f"{info.get('name', '?')} {info.get('version', '')}", 100)
            self.write(f"< agent {name}, protocol {result.get('protocolVersion')}")
        elif method == "session/new":
            self.write(f"< session {one_line(str(result.get('sessionId')), 100)}")
        elif method == "session/prompt":
            self.write(f"< stop reason: {one_line(str(result.get('stopReason')), 60)}")
        else:
            self.write(f"< {one_line(method, 80) or 'response'}")

    def update(self, message: dict[str, Any]) -> None:
        params = _dict(message.get("params"))
        update = _dict(params.get("update"))
        kind = update.get("sessionUpdate")
        content = _dict(update.get("content"))
        if kind == "agent_message_chunk":
            if self.thought:
                self.flush()
            self.reply.append(str(content.get("text", f"[{content.get('type')}]")))
            return
        if kind == "agent_thought_chunk":
            self.thought.append(str(content.get("text", "")))
            return
        self.flush()
        if kind in ("tool_call", "tool_call_update"):
            self.tool(update)
        elif kind == "plan":
            entries = [
                PlanEntry(str(entry.get("content", "")), str(entry.get("priority", "")), str(entry.get("status", "")))
                for entry in update.get("entries") or []
                if isinstance(entry, dict)
            ]
            self.write("  plan:")
            for line in plan_lines(entries):
                self.write(f"  {line}")
        elif kind == "user_message_chunk":
            self.write(f"  user: {one_line(str(content.get('text', '')), 300)}")
        else:
            self.write(f"  ({one_line(str(kind), 60)})")

    def tool(self, update: dict[str, Any]) -> None:
        tool_id = str(update.get("toolCallId", ""))
        state = self.tools.setdefault(tool_id, {"title": "", "kind": ""})
        for key in ("title", "kind"):
            if isinstance(update.get(key), str):
                state[key] = update[key]
        status = update.get("status") or ("pending" if update.get("sessionUpdate") == "tool_call" else "")
        kind = f" [{one_line(state['kind'], 20)}]" if state["kind"] else ""
        self.write(f"  tool {one_line(tool_id, 60)}{kind} {one_line(state['title'])}: {one_line(str(status), 20)}")
        content = update.get("content")
        if status in ("completed", "failed") and isinstance(content, list):
            for line in tool_output_lines(content):
                self.write(f"  {line}")

    def permission(self, message: dict[str, Any]) -> None:
        self.flush()
        params = _dict(message.get("params"))
        tool = _dict(params.get("toolCall"))
        self.requests[json.dumps(message.get("id"))] = params
        kind = f" [{one_line(str(tool['kind']), 20)}]" if tool.get("kind") else ""
        title = one_line(str(tool.get("title") or tool.get("toolCallId", "")))
        self.write(f"  ? permission asked: {title}{kind}")

    def decision(self, record: dict[str, Any]) -> None:
        params = self.requests.pop(json.dumps(record.get("id")), {})
        outcome = _dict(record.get("outcome"))
        said = "cancelled"
        if outcome.get("outcome") == "selected":
            options = {
                option.get("optionId"): option for option in params.get("options") or [] if isinstance(option, dict)
            }
            option = options.get(outcome.get("optionId"), {})
            chosen = one_line(str(outcome.get("optionId")), 40)
            said = f"{one_line(str(option.get('kind', '?')), 40)} (option {chosen!r})"
        who = one_line(str(record.get("decided_by")), 40)
        reason = one_line(str(record.get("reason", "")), 200)
        self.write(f"    -> {said} (decided by {who}: {reason})")


def render_text(contents: JournalContents, out: TextIO) -> None:
    """The conversation, readable: ``>`` what the client sent, ``<`` the agent's answers, indented updates."""
    renderer = _Renderer(out)
    for record in contents.records:
        renderer.record(record)
    renderer.flush()
