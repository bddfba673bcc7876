"""What ``tinyacp view`` shows, as plain data: turns made from journals and batch records.

Pure: functions of records (as :func:`tinyacp._journal.iter_journal` reads them) and of ``results.jsonl`` lines;
the reading of files is in :mod:`tinyacp.view`. Everything that came from an agent or a file goes through
:func:`clean` before it is kept, so the page receives text in which control characters and bidirectional
overrides are visible marks rather than behaviour; each turn's transcript is bounded by a :class:`Budget`.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import msgspec

from ._files import open_regular_binary
from ._journal import JournalLine, JsonlJournal, line_message
from ._journal import _record as journal_record

__all__ = [
    "Budget",
    "EpochTurns",
    "TurnBuilder",
    "add_finite",
    "clean",
    "is_trace",
    "millis",
    "number",
    "read_journal_lines",
]

_SHORT: Final = 300
"""Characters of a value shown in the table (a prompt, an error) or as a label (a title, a name)."""

_RAW: Final = 2000
"""Characters of a line that could not be rendered, shown as it is."""

_EVENT_COST: Final = 40
"""What an event costs the budget beyond its text: its kind, time and field names in the page."""

_DEPTH: Final = 8
"""Child sessions nested at most this deep in a transcript (the page's data stays shallow, whatever the agent
announces); a deeper one is placed with the turn's own events, naming the child that owns it."""

_OPENING: Final = frozenset({"session/new", "session/fork", "session/load", "session/resume"})
"""Our calls that open a session: while one waits for its answer, an unknown session's updates are its own."""

_TRACE: Final = re.compile("[0-9a-f]{32}")
"""A trace id (W3C Trace Context's): 32 lowercase hex digits."""

_SERVED: Final = frozenset(
    {
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
)
"""The agent's requests for files and terminals: each is an event of the turn, with the answer we sent."""

_UNPARSED: Final = object()
"""A line record whose message is to be parsed from its line."""

_LARGEST: Final = 1.7976931348623157e308
"""The largest finite double: where a sum that went past it is clamped."""

_ITEMS: Final = 100
"""A tool call's content items kept, at most (a diff, text, a terminal each)."""

_STATES: Final = 20
"""The changes of a merged event's status (a compaction's, a subagent's) kept, at most."""

# What the page shows as a visible mark, its code point (ESC as ⟨U+001B⟩: every font has these glyphs, not every
# one has the Control Pictures), rather than passing on: C0 and C1 controls (but newline and tab), DEL, and the
# characters that reorder text (bidi overrides, embeddings, isolates and marks), which could make a file name or a
# command read as something else. A lone surrogate (legal in JSON, not in UTF-8) becomes U+FFFD.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def is_trace(value: Any) -> bool:
    """Whether ``value`` is a trace id as a journal and a batch record carry it (W3C Trace Context's 32 lowercase
    hex digits)."""
    return isinstance(value, str) and _TRACE.fullmatch(value) is not None


def _mark(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char == "\r":
        return "\n"
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"\u27e8U+{code:04X}\u27e9"


def clean(value: object, limit: int | None = None) -> str:
    """Any value from an agent or a file as safe text: a string as it is, None as nothing, anything else as compact
    JSON; control characters (but newline and tab) and bidi controls made visible; at most ``limit`` characters."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (ValueError, TypeError, RecursionError):
            text = repr(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "\u2026"
    if _HIDDEN.search(text) is None:  # the usual text: nothing to mark (a CR is one of the hidden)
        return text
    return _HIDDEN.sub(_mark, text.replace("\r\n", "\n"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def number(value: Any) -> float | None:
    """A JSON number as a finite float; None for anything else (a bool, an int past a double's range, NaN)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int of 400 digits: legal JSON, no double
        return None
    return number if math.isfinite(number) else None


def add_finite(total: float, value: float) -> tuple[float, bool]:
    """``total + value``, clamped to the largest finite double; and whether it had to be (the page says so: JSON
    has no infinity, and a sum of finite numbers can overflow)."""
    result = total + value
    if math.isfinite(result):
        return result, False
    return math.copysign(_LARGEST, result) if not math.isnan(result) else total, True


def _key(value: Any) -> str:
    """A JSON-RPC id of any type as a dictionary key (1 and "1" are different ids)."""
    if isinstance(value, str):
        return clean(value, 200)
    return "\0" + (str(value) if type(value) is int else clean(value, 200))  # ints, the usual ids, quickly


def millis(ts: Any) -> float | None:
    """A journal record's ``ts`` as milliseconds since the epoch; None when it is not one."""
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts).timestamp() * 1000.0
    except ValueError:
        return None


@dataclass(slots=True)
class ViewLine:
    """A journal line as the page reads it (as :class:`tinyacp._journal.JournalLine`, lighter to make): its record,
    and the message of a ``line`` record when it was parsed with it."""

    number: int
    data: bytes
    record: dict[str, Any] | None
    torn: bool = False
    message: dict[str, Any] | None = None


_WHOLE: Final = 1 << 20
"""A journal shorter than this is read at once rather than a line at a time."""

_MSG: Final = b',"msg":'
_AFTER_MSG: Final = len(_MSG) + 1
_decode_line = msgspec.json.Decoder(dict[str, Any]).decode


def read_journal_lines(path: Any) -> Iterator[ViewLine]:
    """The lines of a journal as :func:`tinyacp._journal.iter_journal` gives them, each read in one pass: a line
    record whose line is stored as ``msg`` (every line a client writes today) is parsed once, its record and its
    message together, where the journal's reader takes the record apart from its line and the message is then
    parsed again. What this pass cannot take (a line stored as text or base64, a record it doubts) is read as
    the journal's reader reads it. Strict as :func:`tinyacp._journal.line_message`: no NaN, no number out of range.

    Raises:
        OSError: the file cannot be opened or read, or is not a regular file.
    """
    with open_regular_binary(path) as file:
        head = file.read(_WHOLE)  # a turn's journal, usually: read at once, its lines split in one call
        if len(head) < _WHOLE:
            lines = head.split(b"\n")  # on LF alone, as a file's lines are (a CR inside a line is not an end)
            torn = lines.pop()
            for number, data in enumerate(lines, 1):
                if data.strip():
                    yield _view_line(number, data)
            if torn:
                yield ViewLine(len(lines) + 1, torn, None, torn=True)
            return
        file.seek(0)  # a long journal: a line at a time, memory bounded by the longest line
        for number, line in enumerate(file, 1):
            if not line.endswith(b"\n"):
                yield ViewLine(number, line, None, torn=True)
                return
            data = line[:-1]
            if data.strip():
                yield _view_line(number, data)


def _view_line(number: int, data: bytes) -> ViewLine:
    cut = data.find(_MSG)
    if cut >= 0 and data[-1:] == b"}":
        try:
            record = _decode_line(data)
        except (msgspec.MsgspecError, RecursionError):
            return ViewLine(number, data, journal_record(data))
        message = record.pop("msg", None)
        if (
            type(message) is dict
            and record.pop("len", None) == len(data) - cut - _AFTER_MSG  # the msg at the end, where its len says
            and record.get("type") == "line"
            and type(record.get("epoch")) is int
            and "line" not in record
            and "line_b64" not in record
        ):
            # msgspec took the line, so it is UTF-8: kept as the journal's reader gives it, for the raw view.
            record["line"] = data[cut + _AFTER_MSG - 1 : -1].decode("utf-8", "surrogateescape")
            return ViewLine(number, data, record, message=message)
    return ViewLine(number, data, journal_record(data))


@dataclass
class Budget:
    """The bytes of text a turn's transcript may still take; what did not fit is counted, never kept."""

    left: int
    limit: int
    cut_events: int = 0
    cut_bytes: int = 0

    def take(self, text: str) -> str:
        """As much of ``text`` as fits (all of it, or its start, or nothing)."""
        size = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
        if size <= self.left:
            self.left -= size
            return text
        kept = text.encode("utf-8", "replace")[: max(self.left, 0)].decode("utf-8", "ignore")
        self.cut_bytes += size - len(kept.encode("utf-8"))
        self.left = 0
        return kept

    def charge(self, value: Any) -> bool:
        """Whether ``value`` (a list, a dict, a number: what an event holds besides its text) fits, by the size of
        its JSON in the page; when it does, its size is taken. What does not fit is counted as cut."""
        if isinstance(value, bool) or value is None:
            size = 5
        elif isinstance(value, int | float):
            size = 24
        else:
            try:
                size = len(msgspec.json.encode(value))
            except (TypeError, ValueError, OverflowError):  # cannot be: every value here is made of JSON's own
                size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))
        if size <= self.left:
            self.left -= size
            return True
        self.cut_bytes += size
        return False

    def room(self) -> bool:
        """Whether one more event fits (its fixed cost is taken when it does)."""
        if self.left < _EVENT_COST:
            self.cut_events += 1
            self.left = 0
            return False
        self.left -= _EVENT_COST
        return True

    @property
    def cut(self) -> bool:
        return bool(self.cut_events or self.cut_bytes)


_NEWER: Final = {
    "usage_update": "usage_update",
    "compaction_update": "compaction",
    "compaction_summary_chunk": "compaction",
    "plan_update": "plan_operation",
    "plan_removed": "plan_operation",
    "subagent_update": "subagent",
    "session_message": "session_message",
    "session_message_chunk": "session_message",
}
"""The update kinds a method of :class:`TurnBuilder` of that name renders (each given the update, its time and
where its events go)."""


@dataclass
class TurnBuilder:
    """One turn: its facts (for the table, from every record) and its transcript (for the page, bounded).

    Feed it records with :meth:`add` in journal order; the transcript's events are dicts with ``k`` (the kind) and
    ``t`` (milliseconds since the turn's first record), ready for the page.
    """

    budget: Budget
    start: float | None = None
    end: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    prompt: str = ""
    agent: str = ""
    stop_reason: str | None = None
    error: str = ""
    """The first error answer of the turn, or the prompt's."""
    prompt_error: str = ""
    """The error answer to the turn's prompt: the turn failed."""
    tokens: float | None = None
    cost: float | None = None
    currency: str = ""
    tool_ids: set[str] = field(default_factory=set)
    allowed: int = 0
    rejected: int = 0
    prompts: int = 0
    subagents: int = 0
    session: str | None = None
    """The session the turn's prompt went to: updates of another one are a child's (a subagent's)."""
    skipped: list[int] = field(default_factory=list)
    trace: str = ""
    """The trace id the journal or the epoch carries (32 hex digits), shown with the turn."""
    clamped: list[str] = field(default_factory=list)
    """What of the turn's figures went past a double's range and was clamped to the largest (the page says so)."""
    _ts: Any = None
    _ms: float | None = None
    _tools: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    _pending: dict[str, str] = field(default_factory=dict)
    _children: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each child session announced (or heard from) in the turn: its event, whose ``events`` are its own."""
    _merged: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    """The events the protocol patches in place, by session, kind and id: compactions, plans, session messages."""
    _asks: dict[str, dict[str, Any]] = field(default_factory=dict)
    _served: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The agent's file and terminal requests waiting for our answer, by id."""
    _served_method: dict[str, str] = field(default_factory=dict)
    """The method of each of a terminal's later requests waiting for our answer, by id."""
    _terminals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The event of each terminal the agent made, by its id."""
    _nested: dict[int, tuple[int, str]] = field(default_factory=dict)
    _ours: set[str] = field(default_factory=set)
    """The sessions we opened (new, fork, load, resume): their updates are never a child's."""
    """For each child's list of events (by its id): how deep it is nested, and the child's session id."""

    # ----------------------------------------------------------------------------------------------------------
    # The transcript.

    def _time(self, record: dict[str, Any]) -> float:
        ts = record.get("ts")
        if ts != self._ts:  # the records written together share their time: parsed once
            self._ts, self._ms = ts, millis(ts)
        now = self._ms
        if now is None:
            return 0.0 if self.end is None or self.start is None else self.end - self.start
        if self.start is None:
            self.start = now
        self.end = max(now, self.end or now)
        return round(now - self.start, 3)

    def _event(
        self, kind: str, at: float, into: list[dict[str, Any]] | None = None, /, **fields: Any
    ) -> dict[str, Any] | None:
        """A new event at the end of ``into`` (the turn's own events by default), if the budget has room."""
        if not self.budget.room():
            return None
        event: dict[str, Any] = {"k": kind, "t": at}
        for name, value in fields.items():
            if isinstance(value, str):
                if value:
                    event[name] = self.budget.take(value)
            elif value not in (None, [], {}) and self.budget.charge(value):  # everything in the page counts
                event[name] = value
        (self.events if into is None else into).append(event)
        return event

    def _text(self, kind: str, at: float, text: str, into: list[dict[str, Any]] | None = None) -> None:
        """A message or thought chunk: joined to the event before it when that one is of its kind."""
        events = self.events if into is None else into
        last = events[-1] if events else None
        if last is not None and last["k"] == kind and "x" in last:
            last["x"] += self.budget.take(text)
            return
        self._event(kind, at, events, x=text)

    def _into(self, session_id: Any, at: float) -> list[dict[str, Any]]:
        """Where the events of ``session_id`` go: under its child's event when it is a child session (announced
        by a ``subagent_update``, or any session other than the prompt's and ours once the prompt is sent, so that
        a child's work never mixes with its parent's), else the turn's own events."""
        if not isinstance(session_id, str) or session_id == self.session or session_id in self._ours:
            return self.events
        child = self._children.get(session_id)
        if child is None and self.session is not None:
            if any(method in _OPENING for method in self._pending.values()):  # a fork's history, replayed first
                self._ours.add(session_id)
                return self.events
            child = self._child(session_id, at, self.events, announced=False)
        return child["events"] if child is not None else self.events

    def _child(
        self, session_id: str, at: float, into: list[dict[str, Any]], *, announced: bool
    ) -> dict[str, Any] | None:
        depth, owner = self._nested.get(id(into), (0, ""))
        if depth >= _DEPTH:  # a child of a child of … goes to the turn's own events, saying whose it is
            into, depth = self.events, 0
        else:
            owner = ""
        event = self._event("child", at, into, sid=clean(session_id, 200), owner=owner)
        if event is None:
            return None
        event["events"] = []
        if not announced:
            event["unannounced"] = True
        self._children[session_id] = event
        self._nested[id(event["events"])] = (depth + 1, event["sid"])
        return event

    def _merge(self, into: list[dict[str, Any]], kind: str, ident: Any, at: float) -> dict[str, Any] | None:
        """The event of kind ``kind`` and id ``ident`` in ``into``: the first update of an id places it in the
        transcript, the later ones patch it there (as the protocol says of compactions, plans and messages)."""
        key = (str(id(into)), kind, _key(ident))
        event = self._merged.get(key)
        if event is None:
            event = self._event(kind, at, into, id=clean(ident, 200))
            if event is None:
                return None
            event["n"] = 0
            self._merged[key] = event
        event["n"] += 1
        event["end"] = at
        return event

    # ----------------------------------------------------------------------------------------------------------
    # Records.

    def add(self, line: JournalLine | ViewLine) -> None:
        """One line of the journal: a record, or a line that is none (shown raw)."""
        record = line.record
        if record is None:
            self.bad(line, "is not a record")
            return
        message = line.message if isinstance(line, ViewLine) else None
        try:
            self.record(record, _UNPARSED if message is None else message)
        except Exception:  # a journal is input: a record we cannot make sense of is shown raw, and reading goes on
            self.bad(line, "could not be rendered")

    def bad(self, line: JournalLine | ViewLine, why: str) -> None:
        """A line shown raw, and counted as skipped."""
        self.skipped.append(line.number)
        text = line.data[:_RAW].decode("utf-8", "replace")
        self._event("bad", self._time({}), x=clean(text), n=line.number, why=why, size=len(line.data))

    def record(self, record: dict[str, Any], message: Any = _UNPARSED) -> None:
        """One journal record (and its line's message, when it was parsed with it)."""
        at = self._time(record)
        kind = record["type"]
        if kind == "decision":
            self.decision(record, at)
        elif kind == "serve_decision":
            self.serve_decision(record, at)
        elif kind == "line":
            parsed = line_message(record) if message is _UNPARSED else message
            if record.get("dir") == "out":
                self.outgoing(record, parsed, at)
            else:
                self.incoming(record, parsed, at)
        elif kind != "epoch":
            self._event("other", at, x=clean(record, _RAW))
        trace = record.get("trace_id")
        if trace is not None and not self.trace and is_trace(trace):
            self.trace = str(trace)

    def outgoing(self, record: dict[str, Any], msg: dict[str, Any] | None, at: float) -> None:
        if msg is None:
            return
        method = msg.get("method")
        params = _dict(msg.get("params"))
        if isinstance(method, str) and "id" in msg:
            self._pending[_key(msg["id"])] = method
        forced = True if record.get("forced") is True else None  # sent although the agent did not advertise it
        if method in ("session/load", "session/resume") and isinstance(params.get("sessionId"), str):
            self._ours.add(params["sessionId"])
        if method == "session/prompt":
            self.prompts += 1
            if isinstance(params.get("sessionId"), str):
                self.session = params["sessionId"]
            text = "\n".join(_prompt_block(block) for block in _list(params.get("prompt")))
            if not self.prompt:
                self.prompt = clean(text, _SHORT)
            redacted = record.get("redacted")
            redacted = redacted if isinstance(redacted, int) else None
            self._event("prompt", at, x=clean(text), redacted=redacted, forced=forced)
        elif method == "session/cancel":
            self._event("cancel", at)
        elif isinstance(method, str):
            self._event("call", at, m=clean(method, 100), x=_call_summary(method, params), forced=forced)
        elif "id" in msg:
            self.answer(record, msg, at)

    def answer(self, record: dict[str, Any], msg: dict[str, Any], at: float) -> None:
        """Our answer to a request of the agent's: the decision on its question (``elicitation/create``), which
        the answer carries with who made it, or what a file or terminal request it served came to. (A
        permission's decision has a record of its own.)"""
        event = self._asks.pop(_key(msg.get("id")), None)
        if event is None:
            served = self._served.pop(_key(msg.get("id")), None)
            if served is not None:
                method = self._served_method.pop(_key(msg.get("id")), served.get("m", ""))
                self.served_answer(served, record, msg, at, method)
            return
        result, error = _dict(msg.get("result")), _dict(msg.get("error"))
        content = result.get("content")
        said = {
            "action": clean(result.get("action"), 40) if result else "error: " + clean(error.get("message"), 200),
            "by": clean(record.get("decided_by"), 60),
            "dt": at,
        }
        if self.budget.charge(said):
            said["content"] = self.budget.take(clean(content, _RAW)) if content is not None else ""
            event["answer"] = said

    def incoming(self, record: dict[str, Any], msg: dict[str, Any] | None, at: float) -> None:
        kind = record.get("kind")
        if kind == "update" and msg is not None:
            params = _dict(msg.get("params"))
            self.update(_dict(params.get("update")), at, params.get("sessionId"))
        elif kind == "permission_request" and msg is not None:
            self.permission(msg, at)
        elif kind == "elicitation" and msg is not None:
            self.elicitation(msg, at)
        elif record.get("method") == "elicitation/complete" and msg is not None:
            done = _dict(msg.get("params")).get("elicitationId")
            self._event("call", at, m="elicitation/complete", x=clean(done, 200))
        elif kind == "response" and msg is not None:
            self.response(msg, at)
        elif msg is not None and msg.get("method") in _SERVED and "id" in msg:
            self.served(msg, at)
        else:
            detail = clean(record.get("detail"), _SHORT)
            raw = ""
            with contextlib.suppress(KeyError, ValueError):
                raw = JsonlJournal.raw(record)[:_RAW].decode("utf-8", "replace")
            method = clean(record.get("method"), 100)
            self._event("agentline", at, kind=clean(kind, 40), m=method, why=detail, x=clean(raw))

    def error_answer(self, method: str, error: dict[str, Any], at: float) -> None:
        """An error answer to our request: an event of the transcript; the turn's failure if it is the prompt's."""
        text = f"{clean(error.get('message'), _SHORT)} (code {clean(error.get('code'), 40)})"
        if method == "session/prompt":
            self.prompt_error = f"{method}: {text}"
        if method == "session/prompt" or not self.error:
            self.error = f"{method or 'request'}: {text}"
        data = error.get("data")
        self._event("error", at, m=clean(method, 100), x=text, data=clean(data, _RAW) if data else None)

    def response(self, msg: dict[str, Any], at: float) -> None:
        method = self._pending.pop(_key(msg.get("id")), "")
        error = msg.get("error")
        if isinstance(error, dict):
            self.error_answer(method, error, at)
            return
        result = _dict(msg.get("result"))
        if method == "initialize":
            info = _dict(result.get("agentInfo"))
            if info.get("name"):
                self.agent = clean(info.get("name"), 100)
            version = clean(info.get("version"), 40)
            self._event("call", at, m="initialized", x=f"{self.agent} {version}".strip())
        elif method == "session/prompt":
            self.prompt_answer(result, at)
        elif method in ("session/new", "session/fork"):
            if isinstance(result.get("sessionId"), str):
                self._ours.add(result["sessionId"])
            said = "session" if method == "session/new" else "forked"
            self._event("call", at, m=said, x=clean(result.get("sessionId"), 200))

    def served(self, msg: dict[str, Any], at: float) -> None:
        """A file or terminal request of the agent's (``fs/*``, ``terminal/*``): what it asked; the answer we sent
        is added when it comes (:meth:`served_answer`). A terminal's later requests (its output, its exit, its
        kill and release) are steps of the event of the ``terminal/create`` that made it."""
        method = str(msg["method"])
        params = _dict(msg.get("params"))
        terminal = self._terminals.get(_key(params.get("terminalId"))) if method != "terminal/create" else None
        if terminal is not None:
            if self.budget.charge([method, at]) and len(terminal.setdefault("steps", [])) < _STATES:
                terminal["steps"].append([method, at])
            self._served[_key(msg.get("id"))] = terminal
            self._served_method[_key(msg.get("id"))] = method
            return
        into = self._into(params.get("sessionId"), at)
        if method.startswith("fs/"):
            content = params.get("content")
            event = self._event(
                "served",
                at,
                into,
                m=method,
                path=clean(params.get("path"), _SHORT),
                line=number(params.get("line")),
                limit=number(params.get("limit")),
                size=len(content.encode("utf-8", "replace")) if isinstance(content, str) else None,
                x=clean(content, _RAW) if isinstance(content, str) else None,
            )
        else:
            command = " ".join(clean(word, _SHORT) for word in [params.get("command"), *_list(params.get("args"))])
            env = [clean(_dict(one).get("name"), 100) for one in _list(params.get("env"))[:50]]
            event = self._event(
                "served", at, into, m=method, cmd=command, cwd=clean(params.get("cwd"), _SHORT), env=env,
                tid=clean(params.get("terminalId"), 200),
            )  # fmt: skip
        if event is not None:
            self._served[_key(msg.get("id"))] = event

    def serve_decision(self, record: dict[str, Any], at: float) -> None:
        """The client's decision on a file or terminal request (a ``serve_decision`` record, written before it
        acted): allowed or not, who decided and why, the path as resolved, a write's size and the file's prior
        state. Placed on the request's entry (one of its own when the request is not on the page)."""
        event = self._served.get(_key(record.get("id")))
        if event is None:
            method = clean(record.get("method"), 60)
            event = self._event("served", at, m=method, path=clean(record.get("path"), _SHORT))
            if event is None:
                return
        prior = _dict(record.get("prior"))
        said = {
            "dt": at,
            "allowed": record.get("allowed") is True,
            "by": clean(record.get("decided_by"), 60),
            "reason": clean(record.get("reason"), _SHORT),
            "resolved": clean(record.get("resolved"), _SHORT),
            "size": number(record.get("size")),
            "line": clean(record.get("command_line"), _SHORT),
            "prior": {
                "exists": prior.get("exists") is True,
                "size": number(prior.get("size")),
                "sha256": clean(prior.get("sha256"), 64),
            }
            if prior
            else None,
        }
        said = {name: value for name, value in said.items() if value not in (None, "")}
        if self.budget.charge(said):
            event["decision"] = said

    def served_answer(
        self, event: dict[str, Any], record: dict[str, Any], msg: dict[str, Any], at: float, method: str
    ) -> None:
        """Our answer to a file or terminal request (``method``): its result (a file's text, a terminal's id,
        output and exit status) or its error, and who decided it (``decided_by`` on the answer's record)."""
        result, error = msg.get("result"), _dict(msg.get("error"))
        said: dict[str, Any] = {"dt": at, "by": clean(record.get("decided_by"), 60), "m": method}
        if error:
            said["error"] = f"{clean(error.get('message'), _SHORT)} (code {clean(error.get('code'), 40)})"
        result = _dict(result)
        if isinstance(result.get("terminalId"), str):
            event["tid"] = self.budget.take(clean(result["terminalId"], 200))
            self._terminals[_key(result["terminalId"])] = event
        exit_status = _dict(result.get("exitStatus")) if "exitStatus" in result else result
        if "exitCode" in exit_status or "signal" in exit_status:
            event["exit"] = [number(exit_status.get("exitCode")), clean(exit_status.get("signal"), 40)]
        if isinstance(result.get("output"), str):  # the tail: what a person reads first
            output = result["output"]
            event["out"] = self.budget.take(clean(output[-_RAW:]))
            event["outCut"] = max(0, len(output) - _RAW) or (True if result.get("truncated") is True else None)
        if isinstance(result.get("content"), str):  # a file read
            event["size"] = len(result["content"].encode("utf-8", "replace"))
            event["x"] = self.budget.take(clean(result["content"], _RAW))
        answers = event.setdefault("answers", [])
        if len(answers) < _STATES and self.budget.charge(said):
            answers.append(said)

    def prompt_answer(self, result: dict[str, Any], at: float) -> None:
        """The answer to our prompt: its stop reason and usage (the turn's tokens: the total the agent gave, or its
        input and output tokens added, clamped to a double's range)."""
        self.stop_reason = clean(result.get("stopReason"), 60)
        usage = _dict(result.get("usage"))
        total = number(usage.get("totalTokens"))
        if total is None:
            for name in ("inputTokens", "outputTokens"):
                part = number(usage.get(name))
                if part:
                    total, clamped = add_finite(total or 0.0, part)
                    if clamped:
                        self.clamped.append("its input and output tokens add up past a double's range")
        if total is not None:
            self.tokens = total
        self._event("result", at, stop=self.stop_reason, usage=_shown_usage(usage))

    def update(self, update: dict[str, Any], at: float, session_id: Any = None) -> None:
        kind = update.get("sessionUpdate")
        content = _dict(update.get("content"))
        into = self._into(session_id, at)
        if kind == "agent_message_chunk":
            self._text("msg", at, _block_text(content), into)
        elif kind == "agent_thought_chunk":
            self._text("thought", at, clean(content.get("text")), into)
        elif kind == "user_message_chunk":
            self._text("user", at, clean(content.get("text")), into)
        elif kind in ("tool_call", "tool_call_update"):
            self.tool(update, at, into, session_id)
        elif kind == "plan":
            self._event("plan", at, into, entries=_entries(update.get("entries"), self.budget))
        elif kind == "notice":
            fields = {"severity": clean(update.get("severity"), 20), "title": clean(update.get("title"), _SHORT)}
            self._event("notice", at, into, **fields, x=clean(update.get("description")))
        elif kind in _NEWER and (kind != "subagent_update" or isinstance(update.get("sessionId"), str)):
            getattr(self, _NEWER[kind])(update, at, into)
        else:
            shown = {name: value for name, value in update.items() if name != "sessionUpdate"}
            self._event("update", at, into, kind=clean(kind, 60), x=clean(shown, _RAW))

    def compaction(self, update: dict[str, Any], at: float, into: list[dict[str, Any]]) -> None:
        """A compaction, merged by its id: its status changes, its summary (streamed, or given whole), its error.
        A first-seen id is a compaction in progress."""
        event = self._merge(into, "compaction", update.get("compactionId"), at)
        if event is None:
            return
        if update.get("sessionUpdate") == "compaction_summary_chunk":
            event.setdefault("status", "in_progress")
            event["x"] = event.get("x", "") + self.budget.take(_block_text(_dict(update.get("content"))))
            return
        status = clean(update.get("status"), 40)
        if status:
            event["status"] = self.budget.take(status)
            _state(event, status, at, self.budget)
        if "summary" in update:  # patch semantics: given whole it replaces what was streamed; null clears it
            summary = "".join(_block_text(_dict(block)) for block in _list(update.get("summary"))[:100])
            event["x"] = self.budget.take(summary)
        if "error" in update:
            event["error"] = self.budget.take(clean(update.get("error"), _SHORT))

    def plan_operation(self, update: dict[str, Any], at: float, into: list[dict[str, Any]]) -> None:
        """A plan by its id: each ``plan_update`` replaces its content (entries, a file's URI, or markdown), and
        ``plan_removed`` says when it went."""
        if update.get("sessionUpdate") == "plan_removed":
            event = self._merge(into, "planop", update.get("planId"), at)
            if event is not None:
                event["removed"] = at
            return
        plan = _dict(update.get("plan"))
        event = self._merge(into, "planop", plan.get("planId"), at)
        if event is None:
            return
        for name in ("entries", "uri", "x"):
            event.pop(name, None)
        event["type"] = self.budget.take(clean(plan.get("type"), 40))
        if "entries" in plan:
            event["entries"] = _entries(plan.get("entries"), self.budget)
        elif "uri" in plan:
            event["uri"] = self.budget.take(clean(plan.get("uri"), _SHORT))  # shown as text, never a link
        else:
            event["x"] = self.budget.take(clean(plan.get("content")))

    def subagent(self, update: dict[str, Any], at: float, into: list[dict[str, Any]]) -> None:
        """A child session: announced by its first ``subagent_update`` (under the session that owns it), patched
        by the later ones (a field left out keeps its value, null clears it)."""
        session_id = update["sessionId"]
        event = self._children.get(session_id)
        if event is None:
            event = self._child(session_id, at, into, announced=True)
            if event is None:
                return
            self.subagents += 1
        elif event.pop("unannounced", None):  # heard from before its announcement: counted now
            self.subagents += 1
        for name, limit in (("title", _SHORT), ("description", _SHORT * 3)):
            if name in update:
                event[name] = self.budget.take(clean(update.get(name), limit))
        if "state" in update:
            state = _dict(update.get("state"))
            said = clean(state.get("state"), 40)
            if state.get("stopReason") is not None:
                said += f" ({clean(state.get('stopReason'), 60)})"
            event["state"] = self.budget.take(said)
            _state(event, said, at, self.budget)

    def session_message(self, update: dict[str, Any], at: float, into: list[dict[str, Any]]) -> None:
        """A message between sessions (a parent's task to its child, the child's answer), merged by its id:
        ``session_message`` says who sends it to whom, its chunks stream its text."""
        event = self._merge(into, "smsg", update.get("messageId"), at)
        if event is None:
            return
        if update.get("sessionUpdate") == "session_message_chunk":
            event["x"] = event.get("x", "") + self.budget.take(_block_text(_dict(update.get("content"))))
            return
        for name, field_name in (("from", "senderSessionId"), ("to", "recipientSessionId")):
            if field_name in update:
                event[name] = self.budget.take(clean(update.get(field_name), 200))
        if "content" in update:
            text = "".join(_block_text(_dict(block)) for block in _list(update.get("content"))[:100])
            event["x"] = self.budget.take(text)

    def elicitation(self, msg: dict[str, Any], at: float) -> None:
        """The agent's question (``elicitation/create``): its message, a form's fields or a URL (text, never a
        link); the answer we sent is added when it comes (:meth:`answer`)."""
        params = _dict(msg.get("params"))
        schema = _dict(params.get("requestedSchema"))
        required = {name for name in _list(schema.get("required")) if isinstance(name, str)}
        fields = [
            [clean(name, 100), clean(_dict(spec).get("type"), 20), clean(_dict(spec).get("title"), 100),
             name in required]
            for name, spec in list(_dict(schema.get("properties")).items())[:50]
        ]  # fmt: skip
        event = self._event(
            "ask",
            at,
            self._into(params.get("sessionId"), at),
            mode=clean(params.get("mode"), 20),
            x=clean(params.get("message"), _RAW),
            url=clean(params.get("url"), _RAW),
            fields=fields,
            tool=clean(params.get("toolCallId"), 200),
        )
        if event is not None:
            self._asks[_key(msg.get("id"))] = event

    def usage_update(self, update: dict[str, Any], at: float, into: list[dict[str, Any]]) -> None:
        cost = _dict(update.get("cost"))
        amount = number(cost.get("amount"))
        if amount is not None:
            self.cost = amount
            self.currency = clean(cost.get("currency"), 12)
        used, size = number(update.get("used")), number(update.get("size"))
        currency = self.currency if amount is not None else None
        self._event("usage", at, into, used=used, size=size, cost=amount, cur=currency)

    def tool(self, update: dict[str, Any], at: float, into: list[dict[str, Any]], session_id: Any) -> None:
        tool_id = clean(update.get("toolCallId"), 200)
        key = (clean(session_id, 200), tool_id)  # a child's call_1 is not its parent's
        self.tool_ids.add("\0".join(key))
        event = self._tools.get(key)
        if event is None:
            event = self._event("tool", at, into, id=tool_id)
            if event is None:
                return
            event["n"] = 0
            self._tools[key] = event
        event["n"] += 1
        event["end"] = at
        for name, limit in (("name", 200), ("title", _SHORT), ("kind", 40), ("status", 40)):
            if update.get(name) is not None:
                event[name] = self.budget.take(clean(update[name], limit))
        if "content" in update:
            content = self.contents(update.get("content"))
            earlier = event.get("content")
            if earlier and earlier != content:  # replaced, as the protocol says: kept, so an audit sees what was
                replaced = event.setdefault("replaced", [])  # proposed before what came of it
                if len(replaced) < _STATES and self.budget.charge([0.0, 0.0]):
                    replaced.append({"t": event.get("ct", event["t"]), "until": at, "content": earlier})
                else:
                    event["replacedMore"] = event.get("replacedMore", 0) + 1
            event["content"] = content
            event["ct"] = at
        locations = [clean(_dict(place).get("path"), _SHORT) for place in _list(update.get("locations"))[:20]]
        if locations:
            event["where"] = [self.budget.take(place) for place in locations]
        if "rawInput" in update:
            event["input"] = self.budget.take(clean(update["rawInput"], _RAW))

    def contents(self, value: Any) -> list[dict[str, Any]]:
        """A tool call's content items (at most :data:`_ITEMS`), each charged to the budget."""
        items = []
        for item in _list(value)[:_ITEMS]:
            if not self.budget.charge([None, None]):
                break
            shown = _tool_content(item, self.budget)
            if shown is not None:
                items.append(shown)
        return items

    def permission(self, msg: dict[str, Any], at: float) -> None:
        params = _dict(msg.get("params"))
        tool = _dict(params.get("toolCall"))
        options = {
            _key(option.get("optionId")): [clean(option.get("name"), 100), clean(option.get("kind"), 40)]
            for option in _list(params.get("options"))[:64]
            if isinstance(option, dict)
        }
        title = clean(tool.get("title") or tool.get("toolCallId"), _SHORT)
        event = self._event(
            "perm",
            at,
            self._into(params.get("sessionId"), at),
            title=title,
            kind=clean(tool.get("kind"), 40),
            name=clean(tool.get("name"), 200),
            tool=clean(tool.get("toolCallId"), 200),
            content=self.contents(tool.get("content")) if "content" in tool else None,
        )
        self._requests[_key(msg.get("id"))] = {"event": event, "options": options}

    def decision(self, record: dict[str, Any], at: float) -> None:
        asked = self._requests.pop(_key(record.get("id")), {"event": None, "options": {}})
        outcome = _dict(record.get("outcome"))
        chosen = outcome.get("optionId")
        name, option_kind = asked["options"].get(_key(chosen), ["", ""])
        allowed = outcome.get("outcome") == "selected" and str(option_kind).startswith("allow")
        if allowed:
            self.allowed += 1
        else:
            self.rejected += 1
        said = {
            "allowed": allowed,
            "outcome": clean(outcome.get("outcome"), 40),
            "option": clean(chosen, 100),
            "optionName": name,
            "optionKind": option_kind,
            "by": clean(record.get("decided_by"), 60),
            "reason": clean(record.get("reason"), _SHORT),
            "dt": at,
        }
        event = asked["event"]
        if event is None:  # a decision whose request was cut or is not in the journal
            event = self._event("perm", at, title="(request not shown)")
        if event is not None and self.budget.charge(said):
            event["decision"] = said

    # ----------------------------------------------------------------------------------------------------------
    # The result.

    @property
    def seconds(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return round((self.end - self.start) / 1000.0, 3)

    @property
    def ok(self) -> bool:
        """Whether the turn's prompt ended with ``end_turn``, as a batch record's ``ok`` says (another stop reason,
        ``cancelled`` or ``refusal``, is not ok; :attr:`stop_reason` says which). An error answer to another request
        of the turn (a refused ``set_mode``) is an event of its transcript, not the turn's outcome; a prompt
        answered with an error, or not at all (the agent exited, the run timed out), is a failed turn."""
        return self.stop_reason == "end_turn"

    def transcript(self) -> dict[str, Any]:
        """The page's data for the turn's transcript: its events, and what the budget cut."""
        data: dict[str, Any] = {"events": self.events}
        if self.budget.cut:
            data["cut"] = {
                "events": self.budget.cut_events,
                "bytes": self.budget.cut_bytes,
                "limit": self.budget.limit,
            }
        return data


def _prompt_block(block: Any) -> str:
    block = _dict(block)
    if block.get("type") == "text":
        return clean(block.get("text"))
    return _block_label(block)


def _block_text(block: dict[str, Any]) -> str:
    """A content block's text, or a label for a block that is not text."""
    return clean(block["text"]) if "text" in block else _block_label(block)


def _entries(entries: Any, budget: Budget) -> list[list[str]]:
    """A plan's entries (at most 50): each one's content, status and priority."""
    return [
        [
            budget.take(clean(e.get(name), limit))
            for name, limit in (("content", _SHORT), ("status", 20), ("priority", 20))
        ]
        for e in _list(entries)[:50]
        if isinstance(e, dict)
    ]


def _state(event: dict[str, Any], said: str, at: float, budget: Budget) -> None:
    """One more status of a merged event, with its time (the first :data:`_STATES` are kept, as the budget
    allows)."""
    states = event.setdefault("states", [])
    if len(states) < _STATES and budget.charge([said, at]):
        states.append([said, at])


def _block_label(block: dict[str, Any]) -> str:
    resource = _dict(block.get("resource"))
    where = block.get("uri") or resource.get("uri") or block.get("mimeType") or ""
    return f"[{clean(block.get('type'), 40)} {clean(where, _SHORT)}]".replace(" ]", "]")


def _call_summary(method: str, params: dict[str, Any]) -> str:
    if method == "session/new":
        return f"in {clean(params.get('cwd'), _SHORT)}"
    if method == "session/fork":
        return f"{clean(params.get('sessionId'), 200)} in {clean(params.get('cwd'), _SHORT)}"
    if method in ("session/set_mode", "session/set_model", "session/set_config_option"):
        shown = {name: value for name, value in params.items() if name != "sessionId"}
        return clean(shown, _SHORT)
    return ""


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _shown_usage(usage: dict[str, Any]) -> dict[str, float]:
    """The numbers of a turn's usage by the snake_case names tinyacp writes everywhere (``input_tokens``, as in a
    batch record and the command's ``result`` event), whatever the agent's line spelt."""
    return {
        _CAMEL_HUMP.sub("_", clean(name, 40)).lower(): figure
        for name, value in usage.items()
        if (figure := number(value)) is not None
    }


def _tool_content(item: Any, budget: Budget) -> dict[str, Any] | None:
    item = _dict(item)
    kind = item.get("type")
    if kind == "diff":
        return {
            "type": "diff",
            "path": budget.take(clean(item.get("path"), _SHORT)),
            "old": budget.take(clean(item.get("oldText"))),
            "new": budget.take(clean(item.get("newText"))),
        }
    if kind == "terminal":
        return {"type": "terminal", "x": budget.take(clean(item.get("terminalId"), 200))}
    inner = _dict(item.get("content"))
    if "text" in inner:
        return {"type": "text", "x": budget.take(clean(inner.get("text")))}
    return {"type": "other", "x": budget.take(clean(item, _RAW))}


class EpochTurns:
    """The turns of one epoch, fed a line at a time: a new turn at each prompt after the first (what came before
    the first prompt, such as ``initialize``, belongs to the first turn). An epoch with no prompt is one turn."""

    def __init__(self, max_turn_bytes: int) -> None:
        self.max_turn_bytes = max_turn_bytes
        self.turns = [TurnBuilder(Budget(max_turn_bytes, max_turn_bytes))]

    def add(self, line: JournalLine | ViewLine) -> None:
        """One line of the epoch, in journal order."""
        record = line.record
        last = self.turns[-1]
        if record is not None and last.prompts and _is_prompt(record):
            turn = TurnBuilder(Budget(self.max_turn_bytes, self.max_turn_bytes), agent=last.agent, trace=last.trace)
            turn._asks = last._asks  # so may our answer to a question of the agent's
            turn._served, turn._terminals = last._served, last._terminals  # and a terminal outlive its turn
            turn._served_method = last._served_method
            turn._ours = last._ours
            turn._pending = last._pending  # an answer to a request of the turn before may come later
            self.turns.append(turn)
        self.turns[-1].add(line)


def _is_prompt(record: dict[str, Any]) -> bool:
    return record.get("type") == "line" and record.get("dir") == "out" and record.get("method") == "session/prompt"
