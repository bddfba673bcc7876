"""The newer parts of ACP, without a process: the update kinds of schema v1.25 and of the SDK 2.4.0 schema, the
tool call's ``name``, what ``ClientFeatures`` advertises, the elicitation reply and ``PermissionPolicy`` by tool
name. Each example line is checked against the vendored 2.4.0 schema before it is decoded, so the examples are
real ACP, and each line that breaks the schema is checked to break it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import msgspec
import pytest

from helpers.core import CoreDriver
from helpers.schema import STABLE, UNSTABLE, errors, schema
from tinyacp import (
    ClientFeatures,
    ClientInfo,
    CompactionSummaryChunk,
    CompactionUpdate,
    DecisionSource,
    ElicitationReply,
    LineReader,
    Notice,
    PermissionOption,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    PermissionToolCall,
    PlanFile,
    PlanItems,
    PlanMarkdown,
    PlanRemoved,
    PlanUpdate,
    PromptResult,
    ReaderLimits,
    SessionMessage,
    SessionMessageChunk,
    Subagent,
    SubagentUpdate,
    ToolCall,
    ToolCallUpdate,
    TransferLimits,
    UpdateKind,
)
from tinyacp._conversation import Conversation
from tinyacp._messages import LooseUpdateParams, PermissionParams, UpdateLine, merged_subagent
from tinyacp._permissions import decide

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

SESSION = "s1"
TEXT = {"type": "text", "text": "Summary\nso far"}

NEWER: list[tuple[dict[str, Any], Any]] = [
    (
        {"sessionUpdate": "notice", "severity": "warning", "title": "Model fallback", "description": "Using haiku"},
        Notice("warning", "Model fallback", "Using haiku"),
    ),
    ({"sessionUpdate": "notice", "severity": "_vendor", "title": "Quota"}, Notice("_vendor", "Quota")),
    (
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
        CompactionUpdate("c1", "in_progress"),
    ),
    (
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed", "summary": [TEXT]},
        CompactionUpdate("c1", "completed", [TEXT]),
    ),
    (
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "failed", "error": "too long"},
        CompactionUpdate("c1", "failed", error="too long"),
    ),
    (
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": TEXT},
        None,
    ),
    (
        {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p1", "content": "# Plan\n1. x"}},
        PlanUpdate(PlanMarkdown("p1", "# Plan\n1. x")),
    ),
    (
        {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "p2", "uri": "file:///p/PLAN.md"}},
        PlanUpdate(PlanFile("p2", "file:///p/PLAN.md")),
    ),
    (
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "p3",
                "entries": [{"content": "x", "priority": "high", "status": "pending"}],
            },
        },
        None,
    ),
    ({"sessionUpdate": "plan_removed", "planId": "p1"}, PlanRemoved("p1")),
    (
        {"sessionUpdate": "subagent_update", "sessionId": "child-1", "title": "Explore", "description": "Reads code"},
        SubagentUpdate("child-1", "Explore", "Reads code"),
    ),
    (
        {"sessionUpdate": "subagent_update", "sessionId": "child-1", "state": {"state": "idle"}, "title": None},
        SubagentUpdate("child-1", title=None, state={"state": "idle"}),
    ),
    (
        {
            "sessionUpdate": "session_message",
            "messageId": "m1",
            "senderSessionId": SESSION,
            "recipientSessionId": "child-1",
            "content": [TEXT],
        },
        SessionMessage("m1", SESSION, "child-1", content=[TEXT]),
    ),
    ({"sessionUpdate": "session_message_chunk", "messageId": "m1", "content": TEXT}, None),
]
"""Valid lines of each newer kind and what they decode to (None: checked by kind and fields below)."""

BROKEN: list[dict[str, Any]] = [
    {"sessionUpdate": "notice", "severity": "warning", "title": ""},
    {"sessionUpdate": "notice", "title": "no severity"},
    {"sessionUpdate": "compaction_update", "status": "completed"},
    {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1"},
    {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "content": "no id"}},
    {"sessionUpdate": "plan_update", "plan": {"type": "sketch", "planId": "p", "content": "x"}},
    {"sessionUpdate": "plan_removed"},
    {"sessionUpdate": "subagent_update", "title": "no session id"},
    {"sessionUpdate": "session_message", "content": []},
    {"sessionUpdate": "session_message_chunk", "messageId": "m1"},
    {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x", "name": 7},
]
"""Lines of the newer kinds whose fields break the schema: each stays an UnknownUpdate, its line kept."""


def line(update: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}}
    return json.dumps(message, separators=(",", ":")).encode()


def decoded(raw: bytes) -> Any:
    return msgspec.json.decode(raw, type=UpdateLine).params.update


@pytest.mark.parametrize(
    ("fields", "expected"), NEWER, ids=[f"{f['sessionUpdate']}-{i}" for i, (f, _) in enumerate(NEWER)]
)
def test_each_newer_update_kind_decodes_to_its_typed_payload(fields: dict[str, Any], expected: Any) -> None:
    assert not errors("SessionNotification", json.loads(line(fields))["params"], UNSTABLE)
    payload = decoded(line(fields))
    assert payload.kind == UpdateKind(fields["sessionUpdate"])
    if expected is not None:
        assert payload == expected


def test_the_stable_newer_kinds_are_in_the_stable_schema_and_the_rest_only_in_the_unstable_one() -> None:
    def kinds(path: Any) -> set[str]:
        variants = schema(path)["$defs"]["SessionUpdate"]["oneOf"]
        return {variant["properties"]["sessionUpdate"]["const"] for variant in variants}

    typed = {kind.value for kind in UpdateKind} - {"unknown"}
    assert kinds(UNSTABLE) == typed
    assert kinds(STABLE) == typed - {
        "plan_update",
        "plan_removed",
        "subagent_update",
        "session_message",
        "session_message_chunk",
    }


def test_chunks_and_items_of_the_newer_kinds_read_their_content() -> None:
    chunk = decoded(line({"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": TEXT}))
    assert isinstance(chunk, CompactionSummaryChunk)
    assert (chunk.compaction_id, chunk.content.text) == ("c1", "Summary\nso far")
    message = decoded(line({"sessionUpdate": "session_message_chunk", "messageId": "m1", "content": TEXT}))
    assert isinstance(message, SessionMessageChunk)
    assert (message.message_id, message.content.text) == ("m1", "Summary\nso far")
    entries = {"type": "items", "planId": "p3", "entries": [{"content": "x", "priority": "high", "status": "pending"}]}
    plan = decoded(line({"sessionUpdate": "plan_update", "plan": entries}))
    assert isinstance(plan, PlanUpdate) and isinstance(plan.plan, PlanItems)
    assert (plan.plan_id, [entry.content for entry in plan.plan.entries]) == ("p3", ["x"])


@pytest.mark.parametrize("fields", BROKEN, ids=[f"{f['sessionUpdate']}-{i}" for i, f in enumerate(BROKEN)])
def test_a_newer_kind_whose_fields_break_the_schema_stays_unknown(fields: dict[str, Any]) -> None:
    raw = line(fields)
    assert errors("SessionNotification", json.loads(raw)["params"], UNSTABLE)
    with pytest.raises(msgspec.ValidationError):
        decoded(raw)
    loose = msgspec.json.decode(json.dumps(json.loads(raw)["params"]), type=LooseUpdateParams)
    assert loose.update == fields  # what the core keeps in the UnknownUpdate (see test_newer_client)


def test_tool_calls_and_their_updates_read_the_tools_name() -> None:
    call = decoded(line({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "name": "Bash"}))
    assert isinstance(call, ToolCall) and call.name == "Bash"
    plain = decoded(line({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}))
    assert isinstance(plain, ToolCall) and plain.name is None
    update = decoded(line({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "name": "Read"}))
    assert isinstance(update, ToolCallUpdate) and update.name == "Read"
    params = {
        "sessionId": SESSION,
        "toolCall": {"toolCallId": "t1", "title": "ls", "name": "Bash", "kind": "execute"},
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
    }
    assert not errors("RequestPermissionRequest", params, STABLE)
    assert msgspec.convert(params, PermissionParams).tool_call.name == "Bash"


def test_a_subagents_state_merges_its_updates_left_out_fields_kept_and_null_cleared() -> None:
    first = merged_subagent(None, SubagentUpdate("c1", "Explore", "Reads code", state={"state": "running"}))
    assert first == Subagent("c1", "Explore", "Reads code", state={"state": "running"})
    second = merged_subagent(first, SubagentUpdate("c1", description=None, additional_directories=["/x"]))
    assert second == Subagent("c1", "Explore", None, state={"state": "running"}, additional_directories=("/x",))


# -- what the client advertises ------------------------------------------------------------------------------

FEATURE_CAPABILITY: dict[str, tuple[str | None, str, dict[str, Any]]] = {
    "notices": ("session", "notices", {}),
    "compaction": ("session", "compaction", {}),
    "plan_operations": (None, "plan", {}),
    "subagents": (None, "subagents", {}),
    "elicitation": (None, "elicitation", {"form": {}}),
}


def test_the_default_features_advertise_notices_and_compaction_beside_the_fixed_capabilities() -> None:
    assert ClientFeatures().capabilities() == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "session": {"configOptions": {"boolean": {}}, "notices": {}, "compaction": {}},
    }


@pytest.mark.parametrize("feature", list(FEATURE_CAPABILITY))
def test_each_feature_alone_advertises_exactly_its_capability(feature: str) -> None:
    off = dict.fromkeys(FEATURE_CAPABILITY, False)
    advertised = ClientFeatures(**{**off, feature: True}).capabilities()
    assert not errors("ClientCapabilities", advertised, UNSTABLE)
    parent, key, value = FEATURE_CAPABILITY[feature]
    bare = ClientFeatures(**off).capabilities()
    assert bare == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "session": {"configOptions": {"boolean": {}}},
    }
    if parent is None:
        assert advertised == {**bare, key: value}
    else:
        assert advertised == {**bare, parent: {**bare[parent], key: value}}


def test_every_feature_on_fits_the_unstable_schema_and_the_stable_ones_fit_the_stable_schema() -> None:
    everything = ClientFeatures(True, True, True, True, True).capabilities()
    assert not errors("ClientCapabilities", everything, UNSTABLE)
    assert not errors("ClientCapabilities", ClientFeatures(elicitation=True).capabilities(), STABLE)
    assert ClientFeatures().capabilities() is not ClientFeatures().capabilities()  # a copy: callers may change it


def test_features_take_only_bools() -> None:
    with pytest.raises(TypeError, match="notices"):
        ClientFeatures(notices="yes")  # type: ignore[arg-type]


# -- the elicitation reply ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        ElicitationReply.accept({"name": "x\ny", "count": 3, "ratio": 0.5, "ok": True, "tags": ["a", "b"]}),
        ElicitationReply.accept(),
        ElicitationReply.decline(),
        ElicitationReply.cancel(),
    ],
    ids=["accept", "accept-empty", "decline", "cancel"],
)
def test_each_elicitation_reply_fits_the_schema(reply: ElicitationReply) -> None:
    assert not errors("CreateElicitationResponse", reply._wire(), STABLE)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ({"x": {"nested": 1}}, TypeError),
        ({"x": [1, 2]}, TypeError),
        ({1: "x"}, TypeError),
        ({"x": None}, TypeError),
        ({"x": float("nan")}, TypeError),
        ({"x": float("inf")}, TypeError),
    ],
)
def test_an_elicitation_reply_refuses_content_the_schema_does_not_allow(content: Any, error: type) -> None:
    with pytest.raises(error):
        ElicitationReply.accept(content)


def test_only_an_accepting_reply_carries_content() -> None:
    with pytest.raises(ValueError, match="accept"):
        ElicitationReply("decline", {"x": "y"})
    with pytest.raises(ValueError, match="accept, decline or cancel"):
        ElicitationReply("maybe")  # type: ignore[arg-type]


# -- the policy by tool name ----------------------------------------------------------------------------------

OPTIONS = [("allow", "allow_once"), ("reject", "reject_once")]


def request(name: str | None, kind: str | None = "read", title: str | None = "Read notes.txt") -> PermissionRequest:
    tool_call = PermissionToolCall("t1", title=title, kind=kind, name=name)
    options = [PermissionOption(option_id, option_id, kind) for option_id, kind in OPTIONS]
    return PermissionRequest(1, b"{}", 0, SESSION, tool_call, options)


@pytest.mark.parametrize(
    ("policy", "name", "allowed"),
    [
        (PermissionPolicy(tools=("Read", "Grep")), "Read", True),
        (PermissionPolicy(tools=("Read", "Grep")), "Grep", True),
        (PermissionPolicy(tools=("Read", "Grep")), "Bash", False),
        (PermissionPolicy(tools=("Read",)), "read", False),
        (PermissionPolicy(tools=("Read",)), "Read2", False),
        (PermissionPolicy(tools=("Read",)), None, False),
        (PermissionPolicy(deny_tools=("Bash",), allow_all=True), "Bash", False),
        (PermissionPolicy(deny_tools=("Bash",), allow_all=True), "Read", True),
        (PermissionPolicy(deny_tools=("Bash",), allow_all=True), None, False),
        (PermissionPolicy(kinds=("read",), deny_tools=("Read",)), "Read", False),
        (PermissionPolicy(title_prefixes=("Read ",), deny_tools=("Read",)), "Read", False),
        (PermissionPolicy(tools=("Read",), deny_tools=("Read",)), "Read", False),
        (PermissionPolicy(kinds=("read",), deny_tools=("Bash",)), None, False),
        (PermissionPolicy(kinds=("read",)), None, True),
    ],
    ids=[
        "tools-allow",
        "tools-allow-second",
        "tools-other",
        "tools-exact-case",
        "tools-exact-whole",
        "tools-no-name",
        "deny-over-allow-all",
        "allow-all-other-name",
        "allow-all-no-name-with-deny-list",
        "deny-over-kind",
        "deny-over-title",
        "deny-over-tools",
        "kind-no-name-with-deny-list",
        "kind-no-name-no-deny-list",
    ],
)
def test_the_policy_allows_and_denies_by_the_tools_exact_name(
    policy: PermissionPolicy, name: str | None, allowed: bool
) -> None:
    assert policy.allows(PermissionToolCall("t1", title="Read notes.txt", kind="read", name=name)) is allowed


def test_a_denied_tool_is_rejected_by_the_policy_with_a_reason_that_names_it() -> None:
    denied = request("Bash", kind="execute")
    decide(denied, None, PermissionPolicy(deny_tools=("Bash",), allow_all=True), cancelled=False)
    assert (denied.decided_by, denied.verdict, denied.outcome) == (
        DecisionSource.POLICY,
        "rejected",
        {"outcome": "selected", "optionId": "reject"},
    )
    assert "Bash" in denied.reason
    allowed = request("Read")
    decide(allowed, None, PermissionPolicy(tools=("Read",)), cancelled=False)
    assert (allowed.decided_by, allowed.verdict) == (DecisionSource.POLICY, "allowed_once")


def test_the_observer_still_overrules_deny_tools() -> None:
    asked = request("Bash", kind="execute")
    decide(asked, PermissionReply.allow(), PermissionPolicy(deny_tools=("Bash",)), cancelled=False)
    assert (asked.decided_by, asked.verdict) == (DecisionSource.OBSERVER, "allowed_once")


@pytest.mark.parametrize("field", ["tools", "deny_tools"])
def test_the_policy_refuses_a_single_string_of_names(field: str) -> None:
    with pytest.raises(TypeError, match=field):
        PermissionPolicy(**{field: "Bash"})  # type: ignore[arg-type]


# -- the core, fed whole and one byte at a time -----------------------------------------------------------------


class Fed(CoreDriver):
    """The core driven with the agent's bytes in ``piece``-byte pieces; permission requests left to the policy."""

    def __init__(self, core: Conversation, piece: int | None) -> None:
        super().__init__(core)
        self.reader = LineReader(None, ReaderLimits(1 << 20))
        self.piece = piece
        self.done: list[object] = []

    def feed(self, *messages: dict[str, Any]) -> None:
        data = b"".join(json.dumps(message).encode() + b"\n" for message in messages)
        for start in range(0, len(data), self.piece or len(data)):
            chunk = data[start : start + (self.piece or len(data))]
            view = self.reader.writable()
            view[: len(chunk)] = chunk
            self.reader.commit(len(chunk))
            while type(line := self.reader.poll()) is bytes:
                self._handle(line)

    def finished(self, value: object) -> None:
        self.done.append(value)
        self.core.end_call()


@pytest.fixture(params=[None, 1], ids=["whole", "bytewise"])
def fed(request: pytest.FixtureRequest) -> Fed:
    return started(request.param)


def started(piece: int | None, limits: TransferLimits | None = None) -> Fed:
    """A core in a prompt turn of session ``s1`` (subagents on), fed in ``piece``-byte pieces."""
    core = Conversation(
        epoch=1,
        transfer_limits=limits or TransferLimits(),
        reader_limits=ReaderLimits(1 << 20),
        policy=PermissionPolicy(allow_all=True, deny_tools=("Bash",)),
        client_info=ClientInfo("tests", "1"),
        has_observer=True,
        features=ClientFeatures(subagents=True),
    )
    driver = Fed(core, piece)
    core.initialize()
    driver.feed({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}})
    core.new_session("/work")
    driver.feed({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SESSION}})
    core.prompt(SESSION, "hi")
    driver.events.clear()
    driver.done.clear()
    return driver


def notification(session: str, update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}


def chunk_of(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def asks(request_id: int, session: str, name: str) -> dict[str, Any]:
    tool_call = {"toolCallId": f"t{request_id}", "title": name, "name": name, "kind": "execute"}
    options = [
        {"optionId": "a", "name": "A", "kind": "allow_once"},
        {"optionId": "r", "name": "R", "kind": "reject_once"},
    ]
    params = {"sessionId": session, "toolCall": tool_call, "options": options}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission", "params": params}


def test_the_core_keeps_notices_and_children_apart_from_the_reply(fed: Fed) -> None:
    fed.feed(
        notification(SESSION, {"sessionUpdate": "notice", "severity": "warning", "title": "Fallback"}),
        notification(SESSION, chunk_of("A")),
        notification(SESSION, {"sessionUpdate": "subagent_update", "sessionId": "c1", "title": "Explore"}),
        notification("c1", {"sessionUpdate": "subagent_update", "sessionId": "g1", "title": "Grandchild"}),
        notification("c1", chunk_of("not the reply")),
        asks(5, "g1", "Bash"),
        asks(6, "c1", "Read"),
        notification("c1", {"sessionUpdate": "subagent_update", "sessionId": "g1", "title": None}),
        notification(SESSION, chunk_of("B")),
        {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}},
    )
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert result.text == "AB"
    assert result.notices == (Notice("warning", "Fallback"),)
    assert result.subagents == (Subagent("c1", "Explore"), Subagent("g1", None))
    assert (result.update_count, result.chunk_count) == (4, 2)
    decided = [value for name, value in fed.events if name == "on_permission_decision"]
    assert [(r.session_id, r.parent_session_id, r.verdict) for r in decided] == [
        ("g1", "c1", "rejected"),
        ("c1", SESSION, "allowed_once"),
    ]


def test_a_session_announced_as_its_own_child_or_in_a_loop_does_not_hang_the_core(fed: Fed) -> None:
    fed.feed(
        notification(SESSION, {"sessionUpdate": "subagent_update", "sessionId": SESSION}),
        notification("x", {"sessionUpdate": "subagent_update", "sessionId": "y"}),
        notification("y", {"sessionUpdate": "subagent_update", "sessionId": "x"}),
        asks(7, "x", "Read"),
        {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}},
    )
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert result.subagents == ()  # neither the session itself nor a loop that never reaches it
    (decided,) = [value for name, value in fed.events if name == "on_permission_decision"]
    assert (decided.session_id, decided.parent_session_id, decided.verdict) == ("x", "y", "allowed_once")


# -- what a turn keeps of its notices and children: bounded, and what was left out counted ----------------------


def notice(title: str, description: str | None = None) -> dict[str, Any]:
    return {"sessionUpdate": "notice", "severity": "info", "title": title, "description": description}


def announce(child: str, **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "subagent_update", "sessionId": child, **fields}


END_TURN = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}


@pytest.mark.parametrize("piece", [None, 1], ids=["whole", "bytewise"])
def test_notices_past_max_notices_are_left_out_and_counted(piece: int | None) -> None:
    fed = started(piece, TransferLimits(max_notices=3))
    fed.feed(*[notification(SESSION, notice(f"n{i}")) for i in range(5)], END_TURN)
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert [n.title for n in result.notices] == ["n0", "n1", "n2"]
    assert result.notices_dropped == 2
    assert result.update_count == 5  # every one was received and recorded
    assert len([name for name, _ in fed.events if name == "on_update"]) == 5


def test_a_notice_that_would_pass_max_notice_bytes_is_left_out_whole_and_a_smaller_one_still_fits() -> None:
    # severity "info" (4) + title + description, in UTF-8 bytes
    fed = started(None, TransferLimits(max_notice_bytes=20))
    fed.feed(
        notification(SESSION, notice("abcd", "é" * 2)),  # 4 + 4 + 4 = 12
        notification(SESSION, notice("x" * 10)),  # 14 more: past 20, left out
        notification(SESSION, notice("yyyy")),  # 8 more: exactly 20
        notification(SESSION, notice("z")),  # 5 more: left out
        END_TURN,
    )
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert result.notices == (Notice("info", "abcd", "éé"), Notice("info", "yyyy"))
    assert result.notices_dropped == 2


def test_a_whole_turn_of_notices_within_the_limits_is_kept_with_nothing_counted_left_out(fed: Fed) -> None:
    fed.feed(*[notification(SESSION, notice(f"n{i}", "d")) for i in range(3)], END_TURN)
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert (len(result.notices), result.notices_dropped) == (3, 0)


@pytest.mark.parametrize("piece", [None, 1], ids=["whole", "bytewise"])
def test_children_past_max_subagents_are_left_out_counted_and_not_taken_for_the_turns(piece: int | None) -> None:
    fed = started(piece, TransferLimits(max_subagents=2))
    fed.feed(
        notification(SESSION, announce("c1", title="one")),
        notification(SESSION, announce("c2", title="two")),
        notification(SESSION, announce("c3", title="three")),  # left out
        notification(SESSION, announce("c1", state={"state": "idle"})),  # a change to a kept child: kept
        asks(5, "c3", "Read"),
        asks(6, "c2", "Read"),
        END_TURN,
    )
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert result.subagents == (Subagent("c1", "one", state={"state": "idle"}), Subagent("c2", "two"))
    assert result.subagents_dropped == 1
    decided = [value for name, value in fed.events if name == "on_permission_decision"]
    assert [(r.session_id, r.parent_session_id) for r in decided] == [("c3", None), ("c2", SESSION)]


def test_an_announcement_past_max_subagent_bytes_is_left_out_and_a_kept_child_keeps_its_earlier_state() -> None:
    fed = started(None, TransferLimits(max_subagent_bytes=200))
    fed.feed(
        notification(SESSION, announce("c1", title="short")),
        notification(SESSION, announce("c2", description="d" * 300)),  # never fits: left out
        notification(SESSION, announce("c1", description="e" * 300)),  # would grow c1 past it: left out
        notification(SESSION, announce("c3", title="fits")),
        END_TURN,
    )
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert result.subagents == (Subagent("c1", "short"), Subagent("c3", "fits"))
    assert result.subagents_dropped == 2


def test_the_children_of_a_turn_are_forgotten_when_it_ends() -> None:
    fed = started(None)
    fed.feed(notification(SESSION, announce("c1", title="one")), asks(5, "c1", "Read"), END_TURN)
    fed.core.prompt(SESSION, "again")
    fed.feed(asks(6, "c1", "Read"), {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    first, second = fed.done
    assert isinstance(first, PromptResult) and isinstance(second, PromptResult)
    assert first.subagents == (Subagent("c1", "one"),)
    assert second.subagents == ()
    decided = [value for name, value in fed.events if name == "on_permission_decision"]
    assert [(r.session_id, r.parent_session_id) for r in decided] == [("c1", SESSION), ("c1", None)]
    assert fed.core._children == {}  # nothing of the turn's children is kept past it


def test_a_child_deep_in_a_chain_is_the_turns_its_question_cancelled_after_a_cancel() -> None:
    fed = started(None)
    chain = [notification(SESSION, announce("c0"))]
    chain += [notification(f"c{i - 1}", announce(f"c{i}")) for i in range(1, 500)]
    fed.feed(*chain)
    fed.core.cancel(SESSION)
    fed.feed(asks(5, "c499", "Read"), END_TURN)
    (result,) = fed.done
    assert isinstance(result, PromptResult)
    assert len(result.subagents) == 500
    (decided,) = [value for name, value in fed.events if name == "on_permission_decision"]
    assert (decided.parent_session_id, decided.verdict) == ("c498", "cancelled")


def _calls_to_announce_a_chain(length: int) -> int:
    """How many calls (Python and C: every dict look-up through ``get`` included) the core makes to take a chain
    of ``length`` children, each announced by the one before: a count of work, not a time."""
    fed = started(None, TransferLimits(max_subagents=1 << 40, max_subagent_bytes=1 << 40))
    chain = [notification(SESSION, announce("c0"))]
    chain += [notification(f"c{i - 1}", announce(f"c{i}")) for i in range(1, length)]
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        fed.feed(*chain)
    finally:
        sys.setprofile(None)
    return calls


def test_a_chain_of_children_costs_the_same_per_child_however_deep_it_goes() -> None:
    shallow = _calls_to_announce_a_chain(1000)
    deep = _calls_to_announce_a_chain(2000)
    # Linear: twice the children, twice the calls (and some slack); walking the chain made it four times.
    assert deep < 2.3 * shallow, (shallow, deep)
