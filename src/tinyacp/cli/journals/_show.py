"""``tinyacp show JOURNAL``: a journal as a readable conversation, or as JSON Lines with each line parsed.

The journal is read a line at a time and every line is shown as soon as it is read, so memory is bounded by the
longest line whatever the size of the journal (what the renderer remembers between lines, such as tool titles and
open permission requests, is capped too).

A journal is input like any other: a line that is not a record, or a record this renderer cannot make sense of, is
shown raw (sanitized and cut) and the rendering goes on; the exit status is 0 whenever the file could be read,
2 when it could not. Everything the journal holds is sanitized in one place before it is written
(:meth:`_Renderer.put`, with :func:`tinyacp.cli.shared._display.sanitize`); the journal itself keeps the raw bytes.
``--format json`` writes strict JSON (RFC 8259): ASCII only, no ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..._journal import JournalLine, iter_journal, line_message
from ..._messages import PlanEntry
from ..shared._display import one_line, plan_lines, sanitize, shown, tool_output_lines
from ._journals import resolve_journal, show_note

__all__ = ["cmd_show", "render_json", "render_text", "show"]

EXIT_OK = 0
EXIT_UNREADABLE = 2

# What the renderer remembers between lines, capped so a journal of any size renders in bounded memory: tool
# titles and kinds, permission requests awaiting their decision, our requests awaiting their answer. Past the cap
# the oldest is forgotten (its later lines then show less: an id instead of a title).
_MAX_REMEMBERED = 1024
_MAX_OPTIONS = 64  # options remembered per permission request (ACP agents offer two to four)
_MAX_KEY = 256  # ids longer than this are remembered by their start
_RAW_BYTES = 600  # how much of a line that cannot be rendered is shown


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _key(value: Any) -> str:
    """An id of any JSON type as a dictionary key, of bounded size."""
    return shown(value)[:_MAX_KEY] if isinstance(value, str) else "\0" + shown(value)[:_MAX_KEY]


_BEFORE_A_RECORD = 20
"""Lines that are not records before the first one: more, and the file is no journal (a binary file, say); it is
read no further and nothing of it is shown."""


def _raw(data: bytes) -> str:
    """A line that is not a record as it may be shown: its text, cut; never the bytes of a line that is not text."""
    text: str | None
    try:
        text = data[:_RAW_BYTES].decode("utf-8")
    except UnicodeDecodeError as exc:
        # A line cut inside a character is text; an undecodable byte before the cut is not.
        text = data[: exc.start].decode("utf-8") if exc.start >= _RAW_BYTES - 3 else None
    if text is None or "\x00" in text:
        return f"({len(data)} bytes that are not text)"
    more = f" … ({len(data)} bytes)" if len(data) > _RAW_BYTES else ""
    return one_line(text, _RAW_BYTES) + more


@dataclass
class Skipped:
    """The lines left out or shown raw: how many, and the numbers of the first few (a count, not a list, so a
    journal of any size is tallied in bounded memory)."""

    count: int = 0
    first: list[int] = field(default_factory=list)
    gave_up: bool = False
    """The file was read no further: its first lines are no records (see ``_BEFORE_A_RECORD``)."""

    def add(self, number: int) -> None:
        self.count += 1
        if len(self.first) < 10:
            self.first.append(number)

    def __str__(self) -> str:
        more = f" and {self.count - len(self.first)} more" if self.count > len(self.first) else ""
        return ", ".join(map(str, self.first)) + more


class _Remembered(collections.OrderedDict[str, Any]):
    """A dict that forgets its oldest entry past ``_MAX_REMEMBERED``."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if len(self) > _MAX_REMEMBERED:
            self.popitem(last=False)


def _json_line(record: dict[str, Any]) -> str | None:
    """One record as strict JSON, with ``message``: its line parsed (null when the line is not strict JSON)."""
    shown_record = {**record, "message": line_message(record)} if record.get("type") == "line" else record
    for candidate in (shown_record, {**record, "message": None}):
        try:
            return json.dumps(candidate, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
        except (ValueError, TypeError, RecursionError):
            continue
    return None


def render_json(lines: Iterable[JournalLine], out: TextIO) -> Skipped:
    """Each record as written, plus ``message``: its line parsed as JSON (null when the line is not JSON).

    Returns:
        The lines left out (not records, or not expressible as strict JSON).
    """
    left_out = Skipped()
    for line in lines:
        text = _json_line(line.record) if line.record is not None else None
        if text is None:
            if not line.torn:
                left_out.add(line.number)
            continue
        out.write(text + "\n")
    return left_out


class _Renderer:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.in_reply = False  # a "reply:" block is open
        self.mid_line = False  # inside a reply line (no newline written yet)
        self.thought: str | None = None  # the start of the thought gathered so far
        self.tools: _Remembered = _Remembered()
        self.requests: _Remembered = _Remembered()  # permission requests by id: their options' kinds
        self.pending: _Remembered = _Remembered()  # our request ids -> method
        self.asks: _Remembered = _Remembered()  # the agent's questions (elicitation/create) awaiting our answer
        self.children: _Remembered = _Remembered()  # child sessions (subagents) by id -> their name
        self.served: _Remembered = _Remembered()  # the agent's requests for files and terminals -> method

    # The boundary: every character this renderer writes goes through here.
    def put(self, text: str) -> None:
        self.out.write(sanitize(text))

    def write(self, line: str = "") -> None:
        self.put(line + "\n")

    def flush(self) -> None:
        if self.thought is not None:
            self.write(f"  thought: {one_line(self.thought, 300)}")
            self.thought = None
        if self.in_reply:
            if self.mid_line:
                self.put("\n")
            self.in_reply = self.mid_line = False

    def reply(self, text: str) -> None:
        """Reply text as it comes, each line indented: nothing of it is held back."""
        if self.thought is not None:
            self.flush()
        if not self.in_reply:
            self.write("  reply:")
            self.in_reply = True
        for index, part in enumerate(sanitize(text).split("\n")):
            if index:
                self.put("\n")
                self.mid_line = False
            if part:
                self.put(part if self.mid_line else "    " + part)
                self.mid_line = True

    def think(self, text: str) -> None:
        thought = self.thought or ""
        if len(thought) < 2000:  # more than one_line(…, 300) could ever show
            thought += text[:2000]
        self.thought = thought

    def unreadable(self, number: int, why: str, shown: str) -> None:
        """A line shown raw (``shown``: what `_raw` makes of it)."""
        self.flush()
        self.write(f"  ! journal line {number} {why}: {shown}")

    def record(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        if kind == "epoch":
            self.flush()
            self.write(f"== epoch {record['epoch']} · {one_line(record.get('ts'), 40)}{_sandboxed(record)}")
        elif kind == "decision":
            self.decision(record)
        elif kind == "serve_decision":
            self.serve_decision(record)
        elif kind == "line":
            message = line_message(record)
            if record.get("dir") == "out":
                self.outgoing(message)
                self.answer(record, message)
                self.served_answer(message)
                self.marks(record)
            else:
                self.incoming(record, message)

    def marks(self, record: dict[str, Any]) -> None:
        """What the journal says about a line of ours: secrets it replaced, a call sent with force=True."""
        redacted = record.get("redacted")
        if isinstance(redacted, int) and not isinstance(redacted, bool) and redacted > 0:
            self.write(f"    ({redacted} secret{'s' if redacted != 1 else ''} not stored: shown as <secret>)")
        if record.get("forced") is True:
            self.write("    (sent with force=True: the agent did not advertise it)")

    def outgoing(self, message: dict[str, Any] | None) -> None:
        if message is None:
            return
        method = message.get("method")
        params = _dict(message.get("params"))
        if isinstance(method, str) and "id" in message:
            self.pending[_key(message["id"])] = method
        if method == "initialize":
            self.flush()
            self.write("> initialize")
        elif method == "session/new":
            self.write(f"> session/new in {one_line(params.get('cwd'), 300)}")
        elif method in ("session/fork", "session/load", "session/resume"):
            session = one_line(params.get("sessionId"), 100)
            self.write(f"> {method} {session} in {one_line(params.get('cwd'), 300)}")
        elif method == "session/prompt":
            self.flush()
            self.write("> prompt:")
            for block in _list(params.get("prompt")):
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
            for line in sanitize(shown(block.get("text"))).splitlines() or [""]:
                self.write(f"    {line}")
        elif block.get("type") == "resource":
            resource = _dict(block.get("resource"))
            self.write(f"    [file {one_line(resource.get('uri'), 300)}]")
        else:
            where = block.get("uri") or block.get("mimeType") or ""
            self.write(f"    [{one_line(block.get('type'), 40)} {one_line(where, 300)}]")

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
        if kind == "elicitation" and message is not None:
            self.question(message)
            return
        if kind == "served" and message is not None:
            self.served_request(message)
            return
        detail = f": {one_line(record['detail'], 200)}" if record.get("detail") else ""
        method = f" {one_line(record['method'], 80)}" if record.get("method") else ""
        self.flush()
        self.write(f"  ! agent line ({one_line(kind, 40)}{method}){detail}")

    def response(self, message: dict[str, Any]) -> None:
        method = self.pending.pop(_key(message.get("id")), "")
        self.flush()
        error = message.get("error")
        if isinstance(error, dict):
            text = f"{one_line(error.get('message'), 300)} (code {one_line(error.get('code'), 40)})"
            self.write(f"< {method or 'response'}: error: {text}")
            return
        result = _dict(message.get("result"))
        if method == "initialize":
            info = _dict(result.get("agentInfo"))
            name = one_line(f"{shown(info.get('name', '?'))} {shown(info.get('version'))}", 100)
            self.write(f"< agent {name}, protocol {one_line(result.get('protocolVersion'), 40)}")
        elif method in ("session/new", "session/fork"):  # a fork's own session is the one its turn runs in
            self.write(f"< session {one_line(result.get('sessionId'), 100)}")
        elif method == "session/prompt":
            self.write(f"< stop reason: {one_line(result.get('stopReason'), 60)}")
        else:
            self.write(f"< {one_line(method, 80) or 'response'}")

    def update(self, message: dict[str, Any]) -> None:
        params = _dict(message.get("params"))
        update = _dict(params.get("update"))
        kind = update.get("sessionUpdate")
        content = _dict(update.get("content"))
        session_id = params.get("sessionId")
        child = self.children.get(session_id) if isinstance(session_id, str) else None
        if child is not None and kind == "agent_message_chunk":  # a child's reply is not the run's
            self.flush()
            self.write(f"  [{child}] says: {one_line(content.get('text'), 300)}")
            return
        if kind == "agent_message_chunk":
            self.reply(shown(content["text"]) if "text" in content else f"[{one_line(content.get('type'), 40)}]")
            return
        if kind == "agent_thought_chunk":
            self.think(shown(content.get("text")))
            return
        self.flush()
        if kind in ("tool_call", "tool_call_update"):
            self.tool(update)
        elif kind == "plan":
            entries = [
                PlanEntry(shown(entry.get("content")), shown(entry.get("priority")), shown(entry.get("status")))
                for entry in _list(update.get("entries"))
                if isinstance(entry, dict)
            ]
            self.write("  plan:")
            for line in plan_lines(entries):
                self.write(f"  {line}")
        elif kind == "user_message_chunk":
            self.write(f"  user: {one_line(content.get('text'), 300)}")
        else:
            self.write(f"  {self.newer(kind, update)}")

    def newer(self, kind: Any, update: dict[str, Any]) -> str:
        """One line for a newer update (a notice, compaction, a plan by id, a child session); ``(kind)`` for the
        others."""
        if kind == "notice":
            more = f" — {one_line(update.get('description'), 300)}" if update.get("description") else ""
            return f"notice ({one_line(update.get('severity'), 20)}): {one_line(update.get('title'), 200)}{more}"
        if kind == "compaction_update":
            return f"compaction: {one_line(update.get('status'), 40)}"
        if kind == "plan_update":
            plan = _dict(update.get("plan"))
            entries = [_dict(entry) for entry in _list(plan.get("entries"))]
            done = sum(entry.get("status") == "completed" for entry in entries)
            what = f"{done}/{len(entries)} done" if entries else one_line(plan.get("type"), 20)
            return f"plan {one_line(plan.get('planId'), 60)}: {what}"
        if kind == "subagent_update" and isinstance(update.get("sessionId"), str):
            name = one_line(update.get("title") or self.children.get(update["sessionId"]) or update["sessionId"], 60)
            self.children[update["sessionId"]] = name
            state = one_line(_dict(update.get("state")).get("state"), 40)
            return f"subagent [{name}]" + (f": {state}" if state else "")
        return f"({one_line(kind, 60)})"

    def tool(self, update: dict[str, Any]) -> None:
        tool_id = one_line(update.get("toolCallId"), 60)
        state = self.tools.get(tool_id) or {"title": "", "kind": ""}
        self.tools[tool_id] = state
        for key, limit in (("title", 200), ("kind", 20)):
            if update.get(key) is not None:
                state[key] = one_line(update[key], limit)
        status = update.get("status") or ("pending" if update.get("sessionUpdate") == "tool_call" else "")
        kind = f" [{state['kind']}]" if state["kind"] else ""
        self.write(f"  tool {tool_id}{kind} {state['title']}: {one_line(status, 20)}")
        if status in ("completed", "failed"):
            for line in tool_output_lines(update.get("content")):
                self.write(f"  {line}")

    def permission(self, message: dict[str, Any]) -> None:
        self.flush()
        params = _dict(message.get("params"))
        tool = _dict(params.get("toolCall"))
        options = {
            _key(option.get("optionId")): one_line(option.get("kind", "?"), 40)
            for option in _list(params.get("options"))[:_MAX_OPTIONS]
            if isinstance(option, dict)
        }
        self.requests[_key(message.get("id"))] = options
        kind = f" [{one_line(tool['kind'], 20)}]" if tool.get("kind") else ""
        title = one_line(tool.get("title") or tool.get("toolCallId"))
        self.write(f"  ? permission asked: {title}{kind}")

    def question(self, message: dict[str, Any]) -> None:
        """The agent's question (``elicitation/create``): its message, then a form's field names or the URL it
        asks the user to open, as plain text (never a link); :meth:`answer` shows what we said."""
        self.flush()
        params = _dict(message.get("params"))
        self.asks[_key(message.get("id"))] = True
        session_id = params.get("sessionId")
        child = self.children.get(session_id) if isinstance(session_id, str) else None
        who = f"[{child}] " if child is not None else ""
        self.write(f"  ? {who}question asked: {one_line(params.get('message'), 300)}")
        if params.get("mode") == "url" or "url" in params:
            self.write(f"    url (not opened): {one_line(params.get('url'), 300)}")
        else:
            names = list(_dict(_dict(params.get("requestedSchema")).get("properties")))[:_MAX_OPTIONS]
            self.write(f"    fields: {one_line(', '.join(map(shown, names)), 300) or '(none)'}")

    def answer(self, record: dict[str, Any], message: dict[str, Any] | None) -> None:
        """Our answer to one of the agent's questions: accept (with what was sent), decline or cancel, and who
        decided it (the record's ``decided_by``)."""
        if message is None or "method" in message or self.asks.pop(_key(message.get("id")), None) is None:
            return
        error = message.get("error")
        result = _dict(message.get("result"))
        if isinstance(error, dict):
            said = f"error: {one_line(error.get('message'), 200)}"
        else:
            said = one_line(result.get("action"), 40) or "?"
            if result.get("content") is not None:
                said += f" {one_line(result['content'], 300)}"
        who = one_line(record.get("decided_by"), 40) or "None"
        self.write(f"    -> {said} (decided by {who})")

    def decision(self, record: dict[str, Any]) -> None:
        options = self.requests.pop(_key(record.get("id")), {})
        outcome = _dict(record.get("outcome"))
        said = "cancelled"
        if outcome.get("outcome") == "selected":
            chosen = one_line(outcome.get("optionId"), 40)
            said = f"{options.get(_key(outcome.get('optionId')), '?')} (option {chosen!r})"
        who = one_line(record.get("decided_by"), 40) or "None"
        reason = one_line(record.get("reason"), 200)
        self.write(f"    -> {said} (decided by {who}: {reason})")

    def served_request(self, message: dict[str, Any]) -> None:
        """A read, write or command the agent asks the client for (``Options(serve=...)``), or a terminal's."""
        method = one_line(message.get("method"), 40)
        params = _dict(message.get("params"))
        self.served[_key(message.get("id"))] = method
        self.flush()
        if method == "fs/read_text_file":
            self.write(f"  ? asks the client to read {one_line(params.get('path'), 300)}")
        elif method == "fs/write_text_file":
            size = len(str(params.get("content", "")).encode("utf-8", "surrogatepass"))
            self.write(f"  ? asks the client to write {one_line(params.get('path'), 300)} ({size:,} bytes)")
        elif method == "terminal/create":
            line = " ".join([str(params.get("command")), *(shlex.quote(str(arg)) for arg in _list(params.get("args")))])
            self.write(f"  ? asks the client to run {one_line(line, 300)}")
        else:
            self.write(f"  {method} {one_line(params.get('terminalId'), 40)}")

    def serve_decision(self, record: dict[str, Any]) -> None:
        """The decision on a served request, who made it, and a write's file as it was."""
        said = "allowed" if record.get("allowed") is True else "refused"
        who = one_line(record.get("decided_by"), 40) or "None"
        prior = _dict(record.get("prior"))
        was = ""
        if prior:
            was = f"; it was {prior.get('size', 0):,} bytes, sha256 {one_line(prior.get('sha256'), 16)}…"
            if prior.get("exists") is not True:
                was = "; a new file"
        self.write(f"    -> {said} (decided by {who}: {one_line(record.get('reason'), 200)}){was}")

    def served_answer(self, message: dict[str, Any] | None) -> None:
        """Our answer to a served request: what was read, the terminal, how the command ended, or the error."""
        if message is None or "method" in message:
            return
        method = self.served.pop(_key(message.get("id")), None)
        if method is None:
            return
        result, error = _dict(message.get("result")), message.get("error")
        if isinstance(error, dict):
            said = f"error: {one_line(error.get('message'), 200)}"
        elif method == "fs/read_text_file":
            said = f"{len(str(result.get('content', '')).encode('utf-8', 'surrogatepass')):,} bytes read"
        elif method == "terminal/create":
            said = one_line(result.get("terminalId"), 40)
        elif method in ("terminal/wait_for_exit", "terminal/output"):
            status = _dict(result.get("exitStatus")) if method == "terminal/output" else result
            ended = f"signal {status.get('signal')}" if status.get("signal") else f"exit {status.get('exitCode')}"
            said = ended if status else "running"
            if method == "terminal/output":
                tail = one_line(str(result.get("output", ""))[-200:], 200)
                said += f"; output {'(truncated) ' if result.get('truncated') else ''}…{tail}"
        else:
            return
        self.write(f"    -> {said}")


def render_text(lines: Iterable[JournalLine], out: TextIO) -> Skipped:
    """The conversation, readable: ``>`` what the client sent, ``<`` the agent's answers, indented updates.

    Returns:
        The lines shown raw (not records, or records that could not be rendered).
    """
    renderer = _Renderer(out)
    raw = Skipped()
    waiting: list[tuple[int, str]] | None = []  # lines that are not records, held until the first record comes
    for line in lines:
        if line.torn:
            continue
        if line.record is None:
            raw.add(line.number)
            if waiting is None:
                renderer.unreadable(line.number, "is not a record", _raw(line.data))
            elif len(waiting) < _BEFORE_A_RECORD:
                waiting.append((line.number, _raw(line.data)))
            else:  # no journal: show nothing of it
                raw.gave_up = True
                break
            continue
        if waiting is not None:
            for number, shown in waiting:
                renderer.unreadable(number, "is not a record", shown)
            waiting = None
        try:
            renderer.record(line.record)
        except Exception:  # a journal is input: a record we cannot render is shown raw, and the rendering goes on
            renderer.unreadable(line.number, "could not be rendered", _raw(line.data))
            raw.add(line.number)
    renderer.flush()
    return raw


def show(path: str | os.PathLike[str], fmt: str, out: TextIO, err: TextIO) -> int:
    """Render the journal at ``path`` to ``out`` (``fmt`` ``text`` or ``json``); notes and errors to ``err``.

    Returns:
        The exit status: 0 when the file is a journal (whatever else it holds), 2 when it could not be read or
        holds not one journal record (empty, random bytes, JSON that is not a journal).
    """
    torn: list[JournalLine] = []
    failed: list[OSError] = []
    records = 0

    def lines() -> Iterable[JournalLine]:
        nonlocal records
        try:
            for line in iter_journal(path):
                if line.torn:
                    torn.append(line)
                records += line.record is not None
                yield line
        except OSError as exc:  # reading failed; writing fails as it will (a closed pipe is the caller's to handle)
            failed.append(exc)

    skipped = render_json(lines(), out) if fmt == "json" else render_text(lines(), out)
    out.flush()
    if failed:
        print(
            f"tinyacp: error: {one_line(os.fspath(path), 300)}: {one_line(failed[0].strerror or failed[0])}", file=err
        )
        return EXIT_UNREADABLE
    if not records:
        what = "it is empty" if not (torn or skipped.count) else "not one line of it is a journal record"
        if skipped.gave_up:
            what = f"its first {_BEFORE_A_RECORD} lines are not journal records"
        print(f"tinyacp: error: {one_line(os.fspath(path), 300)}: not a tinyacp journal: {what}", file=err)
        return EXIT_UNREADABLE
    if torn:
        print(f"tinyacp: the journal's last line is torn ({len(torn[0].data)} bytes): ignored", file=err)
    if skipped.count:
        what = "ignored" if fmt == "json" else "shown raw"
        print(f"tinyacp: unreadable (torn) lines {what}: {skipped}", file=err)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """``tinyacp show JOURNAL|last|SESSION_ID``."""
    path, note = resolve_journal(args.journal)
    show_note(note)
    return show(path, args.format, sys.stdout, sys.stderr)


def _sandboxed(record: dict[str, Any]) -> str:
    """What an epoch record says of its agent's sandbox, for the epoch's heading ("" when it says nothing)."""
    sandbox = record.get("sandbox")
    if not isinstance(sandbox, dict):
        return ""
    writable = sandbox.get("writable")
    where = ", ".join(one_line(path, 200) for path in writable) if isinstance(writable, list) else "?"
    network = {True: "shared", False: "off"}.get(sandbox.get("network"), "?")  # type: ignore[arg-type]
    return f" · in a sandbox ({one_line(sandbox.get('kind'), 40)}): writable {where}; network {network}"
