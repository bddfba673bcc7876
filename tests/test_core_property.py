"""The invariant h11 fuzzes for, on the pure core (line reader + conversation): whatever bytes the agent sends,
in whatever pieces, the client handles them or raises one of our documented errors — never anything else — its
line buffer never grows, and it never writes a line the observer did not see justified first.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers.core import CoreDriver
from helpers.schema import STABLE, errors
from tinyacp import (
    ClientFeatures,
    ClientInfo,
    LineReader,
    MessageKind,
    MissingDurableObserver,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    ProtocolViolation,
    ReaderExhaustion,
    ReaderLimits,
    RequestError,
    TinyAcpError,
    TransferLimitExceeded,
    TransferLimits,
    UnsupportedProtocolVersion,
    Update,
    UpdateKind,
)
from tinyacp._conversation import Conversation
from tinyacp.reader import ReaderEvent

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

SESSIONS = ["s1", "s2"]
OPTION_IDS = ["allow", "approved", "proceed_once", "once", "reject", "abort", "cancel", "always"]
# What the core (and the reader under it) may raise while reading: the documented errors of Client.prompt.
CORE_ERRORS = (
    ReaderExhaustion,
    TransferLimitExceeded,
    MissingDurableObserver,
    RequestError,
    ProtocolViolation,
    UnsupportedProtocolVersion,
)
# Errors about one answer: the shells keep the client, so the driver goes on too.
KEEP_GOING = (RequestError, ProtocolViolation)
# Which schema definition each line we write must fit, by what it is.
OUR_CALLS = {
    "initialize": "InitializeRequest",
    "session/new": "NewSessionRequest",
    "session/prompt": "PromptRequest",
    "session/cancel": "CancelNotification",
}


# -- strategies ----------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any], one_in: int = 10) -> st.SearchStrategy[Any]:
    """``good``, except one draw in ``one_in`` from ``bad``."""
    # Not st.one_of(good, ..., bad): it merges the repeated branches and picks bad half the time.
    return st.sampled_from([good] * (one_in - 1) + [bad]).flatmap(lambda strategy: strategy)


def sometimes_wrong(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the plausible value, now and then any JSON at all."""
    return mostly(strategy, json_values)


texts = st.text(max_size=12)
ids = st.one_of(
    st.integers(min_value=-2, max_value=6),
    st.sampled_from(["0", "1", "", "ad12f768-3946-4658-9fee-661169fd3d47"]),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=2**63, max_value=2**70),
)
content_blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "resource_link", "resource", "weird"])},
    optional={"text": sometimes_wrong(texts), "data": texts, "mimeType": texts, "uri": texts, "name": texts},
)
tool_kinds = st.sampled_from(["read", "edit", "delete", "execute", "think", "other", "teleport"])
tool_statuses = st.sampled_from(["pending", "in_progress", "completed", "failed", "cancelled"])
tool_fields = {
    "kind": sometimes_wrong(tool_kinds),
    "status": sometimes_wrong(tool_statuses),
    "content": sometimes_wrong(st.lists(json_values, max_size=2)),
    "locations": sometimes_wrong(st.lists(st.fixed_dictionaries({"path": texts}), max_size=2)),
    "rawInput": json_values,
    "rawOutput": json_values,
    "name": sometimes_wrong(texts),
}
UPDATES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    **{
        kind: st.fixed_dictionaries(
            {"content": sometimes_wrong(content_blocks)}, optional={"messageId": sometimes_wrong(texts)}
        )
        for kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")
    },
    "tool_call": st.fixed_dictionaries(
        {"toolCallId": sometimes_wrong(texts), "title": sometimes_wrong(texts)}, optional=tool_fields
    ),
    "tool_call_update": st.fixed_dictionaries(
        {"toolCallId": sometimes_wrong(texts)}, optional={"title": sometimes_wrong(texts), **tool_fields}
    ),
    "plan": st.fixed_dictionaries(
        {
            "entries": sometimes_wrong(
                st.lists(
                    st.fixed_dictionaries(
                        {"content": texts},
                        optional={
                            "priority": st.sampled_from(["high", "medium", "low", "urgent"]),
                            "status": st.sampled_from(["pending", "in_progress", "completed", "x"]),
                        },
                    ),
                    max_size=3,
                )
            )
        }
    ),
    "available_commands_update": st.fixed_dictionaries(
        {
            "availableCommands": sometimes_wrong(
                st.lists(st.fixed_dictionaries({"name": texts}, optional={"description": texts}), max_size=2)
            )
        }
    ),
    "current_mode_update": st.fixed_dictionaries({"currentModeId": sometimes_wrong(texts)}),
    "config_option_update": st.fixed_dictionaries({"configOptions": sometimes_wrong(st.lists(json_values))}),
    "session_info_update": st.fixed_dictionaries({}, optional={"title": texts, "updatedAt": texts}),
    "usage_update": st.fixed_dictionaries(
        {"used": sometimes_wrong(st.integers(min_value=0)), "size": sometimes_wrong(st.integers(min_value=0))},
        optional={
            "cost": sometimes_wrong(
                st.fixed_dictionaries({"amount": st.floats(allow_nan=False, allow_infinity=False), "currency": texts})
            )
        },
    ),
    "notice": st.fixed_dictionaries(
        {
            "severity": sometimes_wrong(st.sampled_from(["info", "warning", "error", "_x"])),
            "title": sometimes_wrong(texts),
        },
        optional={"description": sometimes_wrong(texts)},
    ),
    "compaction_update": st.fixed_dictionaries(
        {"compactionId": sometimes_wrong(texts), "status": sometimes_wrong(texts)},
        optional={"summary": sometimes_wrong(st.lists(content_blocks, max_size=2)), "error": texts},
    ),
    "compaction_summary_chunk": st.fixed_dictionaries(
        {"compactionId": sometimes_wrong(texts), "content": sometimes_wrong(content_blocks)}
    ),
    "plan_update": st.fixed_dictionaries(
        {
            "plan": sometimes_wrong(
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(["markdown", "file", "items", "sketch"]),
                        "planId": sometimes_wrong(texts),
                    },
                    optional={"content": texts, "uri": texts, "entries": st.lists(json_values, max_size=2)},
                )
            )
        }
    ),
    "plan_removed": st.fixed_dictionaries({"planId": sometimes_wrong(texts)}),
    "subagent_update": st.fixed_dictionaries(
        {"sessionId": sometimes_wrong(st.sampled_from(SESSIONS))},
        optional={"title": texts, "description": texts, "state": sometimes_wrong(st.just({"state": "idle"}))},
    ),
    "session_message": st.fixed_dictionaries(
        {"messageId": sometimes_wrong(texts)},
        optional={"senderSessionId": texts, "content": sometimes_wrong(st.lists(content_blocks, max_size=2))},
    ),
    "session_message_chunk": st.fixed_dictionaries(
        {"messageId": sometimes_wrong(texts), "content": sometimes_wrong(content_blocks)}
    ),
}
assert set(UPDATES) >= {kind.value for kind in UpdateKind} - {"unknown"}


@st.composite
def update_objects(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(UPDATES)))
    fields = dict(draw(UPDATES[kind]))
    fields["sessionUpdate"] = draw(sometimes_wrong(st.just(kind)))
    fields.update(draw(st.dictionaries(st.sampled_from(["_meta", "future"]), json_values, max_size=1)))
    return fields


session_ids = sometimes_wrong(st.sampled_from(SESSIONS))
jsonrpc = mostly(st.just("2.0"), st.one_of(json_values, st.just(None)), one_in=20)


def envelope(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": draw(jsonrpc), **body}
    if message["jsonrpc"] is None:
        del message["jsonrpc"]
    return message


@st.composite
def session_updates(draw: st.DrawFn) -> dict[str, Any]:
    params = {"sessionId": draw(session_ids), "update": draw(update_objects())}
    return envelope(draw, {"method": "session/update", "params": draw(sometimes_wrong(st.just(params)))})


@st.composite
def permission_requests(draw: st.DrawFn) -> dict[str, Any]:
    option = st.fixed_dictionaries(
        {
            "optionId": sometimes_wrong(st.sampled_from(OPTION_IDS)),
            "name": texts,
            "kind": sometimes_wrong(st.sampled_from(["allow_once", "allow_always", "reject_once", "reject_always"])),
        }
    )
    tool_call = st.fixed_dictionaries(
        {"toolCallId": sometimes_wrong(texts)}, optional={"title": texts, "kind": tool_kinds, "status": tool_statuses}
    )
    params = st.fixed_dictionaries(
        {"sessionId": session_ids, "toolCall": sometimes_wrong(tool_call), "options": st.lists(option, max_size=4)}
    )
    body = {"id": draw(ids), "method": "session/request_permission", "params": draw(sometimes_wrong(params))}
    return envelope(draw, body)


@st.composite
def other_requests(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(st.sampled_from(["fs/read_text_file", "terminal/create", "_vendor/x", "session/update", ""]))
    body: dict[str, Any] = {"id": draw(ids), "method": method}
    if draw(st.booleans()):
        body["params"] = draw(json_values)
    return envelope(draw, body)


FORM_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


@st.composite
def elicitation_requests(draw: st.DrawFn) -> dict[str, Any]:
    """``elicitation/create``, a form or a URL, sometimes missing what its mode needs or its scope."""
    params = draw(
        st.fixed_dictionaries(
            {"message": sometimes_wrong(texts), "mode": sometimes_wrong(st.sampled_from(["form", "url", "_x"]))},
            optional={
                "sessionId": sometimes_wrong(st.sampled_from(SESSIONS)),
                "requestId": ids,
                "toolCallId": texts,
                "requestedSchema": sometimes_wrong(
                    st.just({"type": "object", "properties": {"a": {"type": "string"}}})
                ),
                "url": texts,
                "elicitationId": texts,
            },
        )
    )
    body = {"id": draw(ids), "method": "elicitation/create", "params": draw(sometimes_wrong(st.just(params)))}
    return envelope(draw, body)


@st.composite
def notifications(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "method": draw(st.sampled_from(["$/cancel_request", "_vendor/note", "elicitation/complete"]))
    }
    if draw(st.booleans()):
        body["params"] = draw(json_values)
    return envelope(draw, body)


results = st.one_of(
    st.fixed_dictionaries(
        {"stopReason": sometimes_wrong(st.sampled_from(["end_turn", "cancelled", "refusal", "paused"]))},
        optional={"usage": json_values},
    ),
    st.fixed_dictionaries(
        {"protocolVersion": st.one_of(st.just(1), st.just(1), json_values)},
        optional={"agentCapabilities": json_values, "authMethods": json_values, "agentInfo": json_values},
    ),
    st.fixed_dictionaries({"sessionId": sometimes_wrong(texts)}, optional={"modes": json_values}),
    json_values,
)
error_objects = sometimes_wrong(
    st.fixed_dictionaries({"code": st.integers(-33000, 0), "message": texts}, optional={"data": json_values})
)


@st.composite
def responses(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(st.sampled_from(["result", "result", "error", "both", "neither"]))
    body: dict[str, Any] = {"id": draw(st.one_of(st.integers(0, 4), ids))}
    if shape in ("result", "both"):
        body["result"] = draw(results)
    if shape in ("error", "both"):
        body["error"] = draw(error_objects)
    return envelope(draw, body)


@st.composite
def reply_chunks(draw: st.DrawFn) -> dict[str, Any]:
    """A plain agent_message_chunk for the prompted session: what fills a reply up to its limits."""
    content = {"type": "text", "text": draw(texts)}
    update = {"sessionUpdate": "agent_message_chunk", "content": content}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}}


@st.composite
def fitting_answers(draw: st.DrawFn) -> dict[str, Any]:
    """An answer shaped for one of our calls, to an id we may have sent: what ends calls."""
    request_id = draw(st.integers(0, 3))
    result = draw(st.sampled_from([{"stopReason": "end_turn"}, {"protocolVersion": 1}, {"sessionId": "s1"}]))
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


messages = st.one_of(
    fitting_answers(),
    reply_chunks(),
    reply_chunks(),
    session_updates(),
    session_updates(),
    session_updates(),
    permission_requests(),
    permission_requests(),
    elicitation_requests(),
    other_requests(),
    notifications(),
    responses(),
    responses(),
)


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line of agent output, with its end (or none)."""
    kind = draw(st.sampled_from(["json"] * 16 + ["array", "garbage", "bad-utf8", "deep"]))
    if kind == "json":
        data = json.dumps(draw(messages), ensure_ascii=draw(st.booleans())).encode()
    elif kind == "array":
        data = json.dumps(draw(st.lists(messages, max_size=2))).encode()
    elif kind == "garbage":
        data = draw(st.binary(max_size=40))
    elif kind == "bad-utf8":
        data = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"x":"\xff\xfe"}}}'
    else:
        # Past any recursion limit: hypothesis raises it to about 2000 frames more than the test uses.
        depth = draw(st.sampled_from([10, 900, 3000, 6000]))
        where = draw(st.sampled_from(["rawInput", "params", "result"]))
        nested = "[" * depth + "]" * depth
        if where == "rawInput":
            update = f'{{"sessionUpdate":"tool_call","toolCallId":"c","title":"t","rawInput":{nested}}}'
            params = f'{{"sessionId":"s1","update":{update}}}'
            data = f'{{"jsonrpc":"2.0","method":"session/update","params":{params}}}'.encode()
        elif where == "params":
            data = f'{{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{nested}}}'.encode()
        else:
            data = f'{{"jsonrpc":"2.0","id":{draw(st.integers(0, 3))},"result":{nested}}}'.encode()
    end: bytes = draw(mostly(st.just(b"\n"), st.sampled_from([b"\r\n", b""])))
    return data + end


replies = st.one_of(
    st.none(),
    st.sampled_from([PermissionReply.allow(), PermissionReply.reject(), PermissionReply.cancelled()]),
    st.builds(PermissionReply.select, st.sampled_from([*OPTION_IDS, "nope"])),
)


# -- the driver ----------------------------------------------------------------------------------------------


class Harness(CoreDriver):
    """Plays a shell around the core: makes our calls in order, feeds the agent's bytes, logs every effect."""

    def __init__(self, core: Conversation, reader: LineReader, plan: list[str], replies: list[Any]) -> None:
        super().__init__(core)
        self.reader = reader
        self.plan = plan
        self.replies = replies or [None]
        self.asked = 0
        self.stopped: BaseException | None = None
        self.outcomes: list[str] = []
        """What ended each call, for the statistics."""

    def next_call(self) -> None:
        self.core.end_call()
        if not self.plan:
            return
        method = self.plan.pop(0)
        if method == "initialize":
            message = self.core.initialize().message
        elif method == "new_session":
            message = self.core.new_session("/work").message
        elif method == "cancel":
            message = self.core.cancel("s1")
        else:
            message = self.core.prompt("s1", "go\non").message
        self.events.append(("call", message))
        self._write(message)
        while self.plan and self.plan[0] == "cancel":  # a cancel sent while the call is in flight
            self.plan.pop(0)
            message = self.core.cancel("s1")
            self.events.append(("call", message))
            self._write(message)

    def handle(self, line: bytes) -> bool:
        """Handle one line as a shell would; False once the shell would tear down."""
        start = len(self.events)
        try:
            self._handle(line)
        except KEEP_GOING as exc:
            self.outcomes.append(type(exc).__name__)
            self.next_call()
        except CORE_ERRORS as exc:
            self.stopped = exc
            return False
        recorded = [
            value for name, value in self.events[start:] if name in ("on_update", "on_permission_request", "on_message")
        ]
        assert [value.raw for value in recorded] == [line], "every line becomes exactly one record"
        return True

    def answer(self, request: PermissionRequest) -> PermissionReply | None:
        reply: PermissionReply | None = self.replies[self.asked % len(self.replies)]
        self.asked += 1
        return reply

    def finished(self, value: object) -> None:
        self.outcomes.append(type(value).__name__)
        self.next_call()

    def feed(self, data: bytes, sizes: list[int]) -> None:
        """The agent's whole output, in pieces of the given sizes (cycled), then the end of input."""
        reader = self.reader
        pos = 0
        turn = 0
        while pos < len(data):
            try:
                view = reader.writable()
            except ReaderExhaustion as exc:
                self.stopped = exc
                return
            n = min(len(view), sizes[turn % len(sizes)], len(data) - pos)
            turn += 1
            view[:n] = data[pos : pos + n]
            reader.commit(n)
            pos += n
            if not self._drain():
                return
        reader.commit(0)
        self._drain()

    def _drain(self) -> bool:
        while True:
            polled = self.reader.poll()
            if type(polled) is not bytes:
                if polled is ReaderEvent.EXHAUSTED:
                    self.stopped = self.reader.status.error
                    return False
                return True
            if not self.handle(polled):
                return False


def check_every_write_is_justified(events: list[tuple[str, Any]]) -> None:
    """Each line written was shown to on_send just before, and what made us write it was recorded just before that."""
    for index, (name, value) in enumerate(events):
        if name != "write":
            continue
        sent_name, sent = events[index - 1]
        assert sent_name == "on_send"
        assert value == sent.raw + b"\n"
        assert value.count(b"\n") == 1
        line = json.loads(sent.raw)
        assert errors("Client", line) == []
        cause_name, cause = events[index - 2]
        if cause_name == "call":
            assert cause is sent
            assert errors(OUR_CALLS[sent.method], line["params"]) == []
        elif cause_name == "on_permission_decision":
            assert isinstance(cause, PermissionRequest)
            assert type(line["id"]) is type(cause.request_id)
            assert line["id"] == cause.request_id
            assert line["result"] == {"outcome": cause.outcome}
            assert errors("RequestPermissionResponse", line["result"]) == []
            assert cause.decided_by is not None
            assert cause.selected is None or cause.selected in cause.options
        elif cause_name == "on_elicitation" or (cause_name == "on_message" and cause.kind is MessageKind.ELICITATION):
            # An elicitation: its line recorded, then (unless its turn was cancelled) the observer asked; the answer
            # is the decision the request holds.
            request = cause if cause_name == "on_elicitation" else None
            if request is not None:
                assert events[index - 3][0] == "on_message" and events[index - 3][1].kind is MessageKind.ELICITATION
                assert line["result"] == request.reply._wire() and request.decided_by
            assert errors("CreateElicitationResponse", line["result"], STABLE) == []
        elif cause_name == "on_message":
            assert cause.kind in (MessageKind.REQUEST, MessageKind.INVALID_REQUEST)
            # A request we do not serve: -32601; one we cannot decode: -32602 (its params), -32600 (the rest).
            expected = (-32601,) if cause.kind is MessageKind.REQUEST else (-32600, -32602)
            assert line["error"]["code"] in expected
            assert type(line["id"]) is type(cause.id)
            assert line["id"] == cause.id
            assert errors("Error", line["error"]) == []
        else:
            assert cause_name == "on_update", (cause_name, line)
            assert isinstance(cause, Update)
            assert cause.kind is UpdateKind.AGENT_MESSAGE_CHUNK
            assert line == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": cause.session_id}}
    # A limit sends at most one cancel per prompt turn.
    prompts = sum(1 for name, value in events if name == "call" and value.method == "session/prompt")
    limit_cancels = sum(
        1 for index, (name, _) in enumerate(events) if name == "write" and events[index - 2][0] == "on_update"
    )
    assert limit_cancels <= prompts


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=st.lists(lines(), min_size=4, max_size=16),
    sizes=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=4),
    plan=st.lists(st.sampled_from(["prompt", "prompt", "cancel", "new_session", "initialize"]), min_size=1, max_size=6),
    answers=st.lists(replies, max_size=3),
    has_observer=st.sampled_from([True, True, True, False]),
    max_line=st.sampled_from([16384, 16384, 600]),
    tight=st.booleans(),
)
def test_any_agent_bytes_are_handled_or_raise_a_documented_error(
    *,
    stream: list[bytes],
    sizes: list[int],
    plan: list[str],
    answers: list[Any],
    has_observer: bool,
    max_line: int,
    tight: bool,
) -> None:
    limits = (
        TransferLimits(max_update_bytes=min(max_line, 400), max_updates=12, max_reply_bytes=6, max_reply_chunks=1)
        if tight
        else TransferLimits(max_update_bytes=max_line)
    )
    reader_limits = ReaderLimits(max_line)
    core = Conversation(
        epoch=1,
        transfer_limits=limits,
        reader_limits=reader_limits,
        policy=PermissionPolicy(kinds={"read"}, title_prefixes=("ls",), deny_tools=("Bash",)),
        client_info=ClientInfo("fuzz", "1"),
        has_observer=has_observer,
        features=ClientFeatures(True, True, True, True, True),  # every newer path in play: elicitation, subagents
    )
    reader = LineReader(None, reader_limits)
    harness = Harness(core, reader, list(plan), answers)
    harness.next_call()
    try:
        harness.feed(b"".join(stream), sizes)
    except TinyAcpError as exc:
        raise AssertionError(f"a documented error escaped the harness's handling: {exc!r}") from exc
    if harness.stopped is not None:
        assert isinstance(harness.stopped, CORE_ERRORS)
        if isinstance(harness.stopped, MissingDurableObserver):
            assert not has_observer
    assert reader.buffer_size == reader_limits.capacity
    check_every_write_is_justified(harness.events)
    # For --hypothesis-show-statistics: which paths the examples reached.
    event(f"stopped by {type(harness.stopped).__name__}")
    for outcome in sorted(set(harness.outcomes)):
        event(f"a call ended with {outcome}")
    for name in sorted({name for name, _ in harness.events}):
        event(f"reached {name}")
    for index, (name, _) in enumerate(harness.events):
        if name == "write" and harness.events[index - 2][0] != "call":
            event(f"wrote after {harness.events[index - 2][0]}")


# -- the hot path, a run at a time ---------------------------------------------------------------------------


class LineHarness(Harness):
    """The harness, keeping what each call returned, not only its kind."""

    def __init__(self, core: Conversation, reader: LineReader, plan: list[str], replies: list[Any]) -> None:
        super().__init__(core, reader, plan, replies)
        self.returned: list[str] = []

    def finished(self, value: object) -> None:
        self.returned.append(repr(value))
        super().finished(value)


class RunHarness(LineHarness):
    """The same shell taking the agent's lines a batch at a time and its updates a run at a time, as the call
    driver does: the core decodes a run, the observer records each update of it, the core collects the run."""

    def _drain(self) -> bool:
        while True:
            batch = self.reader.poll_lines()
            if not isinstance(batch, list):
                if batch is ReaderEvent.EXHAUSTED:
                    self.stopped = self.reader.status.error
                    return False
                return True
            at = 0
            while at < len(batch):
                run = self.core.receive_updates(batch, at)
                if run:
                    assert [update.raw for update in run] == batch[at : at + len(run)]
                    at += len(run)
                    self.events.extend(("on_update", update) for update in run)
                    self.core.updates_recorded(run)
                    continue
                at += 1
                if not self.handle(batch[at - 1]):
                    return False


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=st.lists(
        st.one_of(lines(), st.builds(lambda chunk: json.dumps(chunk).encode() + b"\n", reply_chunks())),
        min_size=4,
        max_size=24,
    ),
    sizes=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=4),
    plan=st.lists(st.sampled_from(["prompt", "prompt", "cancel", "new_session", "initialize"]), min_size=1, max_size=6),
    answers=st.lists(replies, max_size=3),
    limits=st.builds(
        TransferLimits,
        max_update_bytes=st.sampled_from([120, 400, 16384]),
        max_updates=st.sampled_from([3, 12, 1000]),
        max_reply_bytes=st.sampled_from([1, 6, 40, 10**6]),
        max_reply_chunks=st.sampled_from([1, 3, 1000]),
    ),
)
def test_updates_taken_a_run_at_a_time_give_exactly_what_they_give_one_line_at_a_time(
    *, stream: list[bytes], sizes: list[int], plan: list[str], answers: list[Any], limits: TransferLimits
) -> None:
    outcomes = []
    for harness_class in (LineHarness, RunHarness):
        core = Conversation(
            epoch=1,
            transfer_limits=limits,
            reader_limits=ReaderLimits(16384),
            policy=PermissionPolicy(kinds={"read"}),
            client_info=ClientInfo("fuzz", "1"),
            has_observer=True,
        )
        harness = harness_class(core, LineReader(None, ReaderLimits(16384)), list(plan), list(answers))
        harness.next_call()
        harness.feed(b"".join(stream), sizes)
        events = [(name, value if isinstance(value, bytes) else repr(value)) for name, value in harness.events]
        outcomes.append((events, harness.returned, repr(harness.stopped), core.seq))
    assert outcomes[1] == outcomes[0]
