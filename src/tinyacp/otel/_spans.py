"""What spans a conversation makes: the one model, fed by a live client's observer or by a journal, pure.

It takes what the observer is handed (or what a journal recorded), as decoded JSON messages with their times, and
tells a :class:`Sink` which span to start, which event to add and which span to end, following OpenTelemetry's
GenAI semantic conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/):

* ``agent process`` (the process lifetime) is the root, or a child of the caller's span;
* ``initialize`` and each session call (``session/new``, ``session/load``…) are its children;
* each prompt turn is ``invoke_agent {agent}``, with each tool call as a child ``execute_tool {title}``, and a
  subagent's work as a child ``invoke_agent {title}`` of its parent's tool call (or turn);
* permission decisions, notices, compaction and cancellation are events of the span they belong to.

No OpenTelemetry here: a :class:`Sink` turns the calls into spans (:mod:`tinyacp.otel._sink`). Bounded: every
attribute value is cut to :data:`MAX_ATTRIBUTE_LENGTH` characters, a span keeps at most :data:`MAX_EVENTS` events
(then counts the rest in ``tinyacp.events.dropped``), and the captured reply to :data:`MAX_CAPTURED_CHARS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

__all__ = [
    "KINDS_READ",
    "MAX_ATTRIBUTE_LENGTH",
    "MAX_CAPTURED_CHARS",
    "MAX_EVENTS",
    "PROCESS",
    "Sink",
    "SpanModel",
    "cut",
]

MAX_ATTRIBUTE_LENGTH: Final = 1024
"""The longest attribute value (a str, in characters): longer ones end in ``…`` after 1023 of theirs."""

MAX_EVENTS: Final = 64
"""The most events one span keeps; the others are counted in its ``tinyacp.events.dropped``."""

MAX_CAPTURED_CHARS: Final = 16384
"""With ``capture_content=True``, the most characters of the prompt and of the reply kept (then cut as above)."""

PROCESS: Final = "process"
"""The key of the process's span."""

Attributes = dict[str, str | bool | int | float | list[str]]


class Sink(Protocol):
    """Where the spans go: spans are named by a key the model picks (``process``, ``request:3``…)."""

    def start(self, key: str, name: str, parent: str | None, ts: int, attributes: Attributes, *, client: bool) -> None:
        """Start a span (``client``: of kind CLIENT, else INTERNAL) at ``ts`` (ns since the epoch)."""

    def event(self, key: str, name: str, ts: int, attributes: Attributes) -> None:
        """Add an event to a started span."""

    def end(self, key: str, ts: int, attributes: Attributes, error: tuple[str, str] | None) -> None:
        """Set the last attributes and end the span; ``error`` is (``error.type``, description)."""


def cut(value: str, limit: int = MAX_ATTRIBUTE_LENGTH) -> str:
    """``value`` within ``limit`` characters: a longer one ends with ``…``."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclass(slots=True)
class _Span:
    key: str
    session: str | None = None
    events: int = 0
    dropped: int = 0
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class _Turn:
    span: _Span
    request_id: Any
    reply: list[str] = field(default_factory=list)
    reply_chars: int = 0
    updates: int = 0


class SpanModel:
    """The spans of one agent process's conversation.

    Args:
        sink: where the spans go.
        agent_name: the agent's name for ``invoke_agent {agent}`` (None: the ``agentInfo.name`` it gives in
            ``initialize``, else ``agent``).
        capture_content: put the prompt's and the reply's text in ``gen_ai.input.messages`` and
            ``gen_ai.output.messages`` (never a secret: the lines are redacted before they come here).
    """

    def __init__(self, sink: Sink, *, agent_name: str | None = None, capture_content: bool = False) -> None:
        self.sink = sink
        self.agent_name = agent_name
        self.capture = capture_content
        self._named = agent_name is not None
        self._spans: dict[str, _Span] = {}
        self._requests: dict[Any, tuple[str, str]] = {}
        """Each request of ours in flight: its span's key and method."""
        self._unbound: str | None = None
        """A request's span started before its id was known (:meth:`open_request`)."""
        self._turns: dict[str, _Turn] = {}
        """The prompt turn in flight of each session."""
        self._tools: dict[tuple[str, str], str] = {}
        self._subagents: dict[str, str] = {}
        """Each announced child session, and its span's key."""
        self._parent_session: dict[str, str] = {}
        """Each announced child session, and the session that announced it."""
        self._permissions: dict[Any, tuple[str, str | None, list[Any]]] = {}
        """Each permission request of the agent's: its session, tool call id and options."""
        self._count = 0

    # ----------------------------------------------------------------------------------------------------------
    # The process.

    def begin(self, ts: int, attributes: Attributes) -> None:
        """The agent's process starts: the root span (or the child of the caller's span)."""
        self._start(PROCESS, "agent process", None, ts, attributes, client=False)

    def finish(self, ts: int, attributes: Attributes, error: tuple[str, str] | None = None) -> None:
        """The process is gone: every span still open ends (with ``error`` when given, else as unanswered), the
        process's last."""
        left = error or ("Unanswered", "the agent never answered")
        for key in [key for key in self._spans if key != PROCESS]:
            self._end(key, ts, {}, left)
        if PROCESS in self._spans:
            if self.agent_name is not None:
                attributes = {**attributes, "gen_ai.agent.name": cut(self.agent_name)}
            self._end(PROCESS, ts, attributes, error)

    # ----------------------------------------------------------------------------------------------------------
    # Our lines.

    def open_request(self, ts: int, method: str) -> str:
        """Start the span of the request about to be sent (its id comes with :meth:`sent`): its key, whose
        context the request carries."""
        if self._unbound is not None:  # built but never sent (it was refused): it ends here
            self._end(self._unbound, ts, {}, ("NotSent", "the request was never written"))
        key = self._new_key("request")
        self._start_request(key, ts, method)
        self._unbound = key
        return key

    def sent(self, ts: int, message: Mapping[str, Any]) -> None:
        """A line we wrote (decoded, secrets redacted)."""
        method = message.get("method")
        if not isinstance(method, str):
            return  # our answer to one of the agent's requests
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            if method == "session/cancel":
                self._cancel(ts, params)
            return
        key = self._unbound
        self._unbound = None
        if key is None:
            key = self._new_key("request")
            self._start_request(key, ts, method)
        self._requests[message["id"]] = (key, method)
        span = self._spans[key]
        session = params.get("sessionId")
        if isinstance(session, str):
            span.session = session
            self._set(key, {"gen_ai.conversation.id": cut(session)})
        if method == "session/prompt" and isinstance(session, str):
            self._turns[session] = _Turn(span, message["id"])
            if self.capture:
                self._set(key, {"gen_ai.input.messages": _messages("user", _texts(params.get("prompt")))})

    # ----------------------------------------------------------------------------------------------------------
    # The agent's lines.

    def received(self, ts: int, message: Mapping[str, Any]) -> None:
        """A line the agent wrote other than an update (decoded): a response ends its request's span."""
        method = message.get("method")
        if method == "session/request_permission":
            params = message.get("params") or {}
            tool = params.get("toolCall") if isinstance(params, dict) else None
            tool_id = tool.get("toolCallId") if isinstance(tool, dict) else None
            options = params.get("options") if isinstance(params, dict) else None
            self._permissions[message.get("id")] = (
                str(params.get("sessionId", "")),
                tool_id if isinstance(tool_id, str) else None,
                options if isinstance(options, list) else [],
            )
            return
        if method is not None or "id" not in message:
            return
        found = self._requests.pop(message["id"], None)
        if found is None:
            return
        key, sent_method = found
        error = message.get("error")
        result = message.get("result")
        failure = None
        attributes: Attributes = {}
        if isinstance(error, dict):
            code = error.get("code")
            failure = (_error_type(code), cut(str(error.get("message", ""))))
            if isinstance(code, int):
                attributes["rpc.jsonrpc.error_code"] = code
        if sent_method == "initialize" and isinstance(result, dict):
            self._initialized(key, result)
        elif sent_method in ("session/new", "session/fork") and isinstance(result, dict):
            session = result.get("sessionId")
            if isinstance(session, str):
                attributes["gen_ai.conversation.id"] = cut(session)
        if sent_method == "session/prompt":
            self._turn_done(key, ts, result if isinstance(result, dict) else {}, attributes)
        self._end(key, ts, attributes, failure)

    def update(self, ts: int, session: str, kind: str, update: Mapping[str, Any] | None) -> None:
        """A ``session/update`` (``update``: its decoded ``update`` object; None for a reply chunk when no
        content is captured, which the model only counts)."""
        turn = self._turn_of(session)
        if turn is not None:
            turn.updates += 1
        if update is None:
            return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, ts, session, update, turn)

    def decision(self, ts: int, request_id: Any, decided_by: str, outcome: Mapping[str, Any]) -> None:
        """A permission decision: an event of the tool call's span (else the turn's)."""
        session, tool_id, options = self._permissions.pop(request_id, ("", None, []))
        option_id = outcome.get("optionId")
        attributes: Attributes = {"tinyacp.permission.decided_by": decided_by}
        attributes["tinyacp.permission.outcome"] = str(outcome.get("outcome", ""))
        if isinstance(option_id, str):
            attributes["tinyacp.permission.option_id"] = cut(option_id)
            kinds = [o.get("kind") for o in options if isinstance(o, dict) and o.get("optionId") == option_id]
            if kinds and isinstance(kinds[0], str):
                attributes["tinyacp.permission.option_kind"] = kinds[0]
        key = self._tools.get((session, tool_id)) if tool_id is not None else None
        if key is None:
            turn = self._turn_of(session)
            key = turn.span.key if turn is not None else PROCESS
        self._event(key, "permission", ts, attributes)

    # ----------------------------------------------------------------------------------------------------------
    # Updates.

    def _tool_call(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        tool_id = update.get("toolCallId")
        if not isinstance(tool_id, str) or (session, tool_id) in self._tools:
            self._tool_update(ts, session, update, turn)
            return
        title = update.get("title")
        name = title if isinstance(title, str) and title else "tool"
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": cut(name),
            "gen_ai.tool.call.id": cut(tool_id),
        }
        if isinstance(update.get("kind"), str):
            attributes["tinyacp.tool.kind"] = update["kind"]
        parent = self._subagents.get(session) or (turn.span.key if turn is not None else PROCESS)
        key = self._new_key("tool")
        self._tools[(session, tool_id)] = key
        self._start(key, cut(f"execute_tool {name}", 128), parent, ts, attributes, client=False)
        self._spans[key].session = session
        self._tool_update(ts, session, update, turn)

    def _tool_update(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        tool_id = update.get("toolCallId")
        key = self._tools.get((session, tool_id)) if isinstance(tool_id, str) else None
        if key is None:
            if isinstance(tool_id, str):  # an update of a call never announced: it starts here
                self._tool_call(ts, session, {**update, "sessionUpdate": "tool_call"}, turn)
            return
        if isinstance(update.get("kind"), str):
            self._set(key, {"tinyacp.tool.kind": update["kind"]})
        status = update.get("status")
        if not isinstance(status, str):
            return
        self._set(key, {"tinyacp.tool.status": status})
        if status in ("completed", "failed"):
            del self._tools[(session, tool_id)]  # type: ignore[arg-type]
            failure = ("ToolCallFailed", "the agent reported the tool call failed") if status == "failed" else None
            self._end(key, ts, {}, failure)

    def _usage(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        if turn is None:
            return
        attributes: Attributes = {}
        for name in ("used", "size"):
            if isinstance(update.get(name), int):
                attributes[f"tinyacp.context.{name}"] = update[name]
        attributes.update(_cost(update.get("cost")))
        self._set(turn.span.key, attributes)

    def _notice(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        attributes: Attributes = {"tinyacp.notice.severity": str(update.get("severity", ""))}
        attributes["tinyacp.notice.title"] = cut(str(update.get("title", "")))
        self._event(self._owner(session, turn), "notice", ts, attributes)

    def _compaction(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        attributes: Attributes = {"tinyacp.compaction.status": str(update.get("status", ""))}
        attributes["tinyacp.compaction.id"] = cut(str(update.get("compactionId", "")))
        self._event(self._owner(session, turn), "compaction", ts, attributes)

    def _subagent(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        child = update.get("sessionId")
        if not isinstance(child, str) or child in self._subagents:
            return
        running = [key for (owner, _), key in self._tools.items() if owner == session]
        parent = running[-1] if running else self._owner(session, turn)
        title = update.get("title")
        name = title if isinstance(title, str) and title else "subagent"
        key = self._new_key("subagent")
        self._subagents[child] = key
        self._parent_session[child] = session
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": cut(name),
            "gen_ai.conversation.id": cut(child),
            "tinyacp.parent_session": cut(session),
        }
        self._start(key, cut(f"invoke_agent {name}", 128), parent, ts, attributes, client=False)

    def _chunk(self, ts: int, session: str, update: Mapping[str, Any], turn: _Turn | None) -> None:
        if turn is None or not self.capture or turn.reply_chars >= MAX_CAPTURED_CHARS:
            return
        content = update.get("content")
        text = content.get("text") if isinstance(content, dict) else None
        if isinstance(text, str):
            turn.reply.append(text[: MAX_CAPTURED_CHARS - turn.reply_chars])
            turn.reply_chars += len(text)

    # ----------------------------------------------------------------------------------------------------------
    # The turn.

    def _turn_of(self, session: str) -> _Turn | None:
        turn = self._turns.get(session)
        if turn is None and session in self._subagents:
            return None
        return turn

    def _owner(self, session: str, turn: _Turn | None) -> str:
        """The span a session's event belongs to: its subagent's, its turn's, or the process's."""
        return self._subagents.get(session) or (turn.span.key if turn is not None else PROCESS)

    def _cancel(self, ts: int, params: Mapping[str, Any]) -> None:
        session = params.get("sessionId")
        turn = self._turns.get(session) if isinstance(session, str) else None
        self._event(turn.span.key if turn is not None else PROCESS, "cancel", ts, {})

    def _turn_done(self, key: str, ts: int, result: Mapping[str, Any], attributes: Attributes) -> None:
        span = self._spans[key]
        turn = self._turns.pop(span.session, None) if span.session is not None else None
        reason = result.get("stopReason")
        if isinstance(reason, str):
            attributes["gen_ai.response.finish_reasons"] = [cut(reason)]
            attributes["tinyacp.stop_reason"] = cut(reason)
            if reason == "cancelled":
                self._event(key, "cancelled", ts, {})
        usage = result.get("usage")
        if isinstance(usage, dict):
            for theirs, ours in (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens")):
                if isinstance(usage.get(theirs), int):
                    attributes[f"gen_ai.usage.{ours}"] = usage[theirs]
            attributes.update(_cost(usage.get("cost")))
        if turn is not None:
            self._close_turn(span, turn, ts, attributes)

    def _close_turn(self, span: _Span, turn: _Turn, ts: int, attributes: Attributes) -> None:
        """The turn's count and reply; its tool calls and subagents still open end with it."""
        attributes["tinyacp.updates"] = turn.updates
        if self.capture:
            attributes["gen_ai.output.messages"] = _messages("assistant", ["".join(turn.reply)])
        family = self._family(span.session)
        for (session, tool_id), tool in list(self._tools.items()):
            if session in family:
                del self._tools[(session, tool_id)]
                self._end(tool, ts, {"tinyacp.tool.status": "unfinished"}, None)
        for child in family - {span.session}:
            self._parent_session.pop(child, None)
            key = self._subagents.pop(child, None)
            if key is not None:
                self._end(key, ts, {}, None)

    def _family(self, session: str | None) -> set[str]:
        """``session`` and the subagents' sessions it announced, theirs too, however deep."""
        found = {session} if session is not None else set()
        grew = True
        while grew:
            more = {child for child, parent in self._parent_session.items() if parent in found}
            grew = not more <= found
            found |= more
        return found

    # ----------------------------------------------------------------------------------------------------------
    # Spans.

    def _start_request(self, key: str, ts: int, method: str) -> None:
        if method == "session/prompt":
            name = f"invoke_agent {self.agent_name or 'agent'}"
            attributes: Attributes = {"gen_ai.operation.name": "invoke_agent", "rpc.method": method}
            attributes["gen_ai.agent.name"] = cut(self.agent_name or "agent")
            self._start(key, cut(name, 128), PROCESS, ts, attributes, client=True)
        else:
            self._start(key, cut(method, 128), PROCESS, ts, {"rpc.method": cut(method)}, client=True)

    def _initialized(self, key: str, result: Mapping[str, Any]) -> None:
        info = result.get("agentInfo")
        if not isinstance(info, dict):
            return
        name, version = info.get("name"), info.get("version")
        attributes: Attributes = {}
        if isinstance(name, str) and name:
            attributes["gen_ai.agent.name"] = cut(name)
            if not self._named:
                self.agent_name = name
        if isinstance(version, str):
            attributes["tinyacp.agent.version"] = cut(version)
        self._set(key, attributes)
        self._set(PROCESS, attributes)

    def _new_key(self, kind: str) -> str:
        self._count += 1
        return f"{kind}:{self._count}"

    def _start(self, key: str, name: str, parent: str | None, ts: int, attributes: Attributes, *, client: bool) -> None:
        if parent is not None and parent not in self._spans:
            parent = PROCESS if PROCESS in self._spans else None
        self._spans[key] = _Span(key)
        self.sink.start(key, name, parent, ts, attributes, client=client)

    def _set(self, key: str, attributes: Attributes) -> None:
        span = self._spans.get(key)
        if span is not None:
            span.attributes.update(attributes)

    def _event(self, key: str, name: str, ts: int, attributes: Attributes) -> None:
        span = self._spans.get(key)
        if span is None:
            return
        if span.events >= MAX_EVENTS:
            span.dropped += 1
            return
        span.events += 1
        self.sink.event(key, name, ts, attributes)

    def _end(self, key: str, ts: int, attributes: Attributes, error: tuple[str, str] | None) -> None:
        span = self._spans.pop(key, None)
        if span is None:
            return
        final = {**span.attributes, **attributes}
        if span.dropped:
            final["tinyacp.events.dropped"] = span.dropped
        if error is not None:
            final["error.type"] = error[0]
        self.sink.end(key, ts, final, error)


def _texts(blocks: Any) -> list[str]:
    if not isinstance(blocks, list):
        return []
    return [block["text"] for block in blocks if isinstance(block, dict) and isinstance(block.get("text"), str)]


def _messages(role: str, texts: list[str]) -> str:
    """The GenAI convention's messages attribute: ``[{"role", "parts": [{"type": "text", "content"}]}]``, cut."""
    import json

    parts = [{"type": "text", "content": text[:MAX_CAPTURED_CHARS]} for text in texts]
    return cut(json.dumps([{"role": role, "parts": parts}], ensure_ascii=False))


def _cost(cost: Any) -> Attributes:
    if not isinstance(cost, dict):
        return {}
    found: Attributes = {}
    if isinstance(cost.get("amount"), int | float) and not isinstance(cost.get("amount"), bool):
        found["tinyacp.cost.amount"] = float(cost["amount"])
    if isinstance(cost.get("currency"), str):
        found["tinyacp.cost.currency"] = cut(cost["currency"], 16)
    return found


_ERRORS: Final = {-32002: "SessionNotFound", -32000: "AuthRequired"}


def _error_type(code: Any) -> str:
    """The tinyacp exception an error answer raises (:class:`~tinyacp.RequestError` unless more precise)."""
    return _ERRORS.get(code, "RequestError") if isinstance(code, int) else "RequestError"


KINDS_READ: Final = frozenset(
    {"tool_call", "tool_call_update", "usage_update", "notice", "compaction_update", "subagent_update"}
)
"""The update kinds the model reads (a reply chunk too when content is captured); the others are only counted."""

_HANDLERS: Final = {
    "tool_call": SpanModel._tool_call,
    "tool_call_update": SpanModel._tool_update,
    "usage_update": SpanModel._usage,
    "notice": SpanModel._notice,
    "compaction_update": SpanModel._compaction,
    "subagent_update": SpanModel._subagent,
    "agent_message_chunk": SpanModel._chunk,
}
