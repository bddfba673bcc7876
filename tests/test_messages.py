"""The protocol messages: the reference examples replayed through the core, and every line we write checked
against the ACP v1 schema.

No process is started: the conversation core is driven directly, its steps run by :func:`run`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from helpers import ACP
from helpers.schema import check_client_line, errors, schema
from tinyacp import (
    AgentInfo,
    AgentMessage,
    AuthMethod,
    AvailableCommand,
    ClientInfo,
    Cost,
    EnvVariable,
    HttpHeader,
    Initialize,
    McpServer,
    McpServerHttp,
    McpServerSse,
    MessageKind,
    Modes,
    OutgoingMessage,
    PermissionOptionKind,
    PermissionPolicy,
    PermissionReply,
    PlanEntry,
    PromptBlobResource,
    PromptContent,
    PromptMedia,
    PromptResourceLink,
    PromptResult,
    PromptText,
    PromptTextResource,
    ReaderLimits,
    RequestError,
    Session,
    SessionMode,
    StopReason,
    ToolCallStatus,
    ToolKind,
    TransferLimits,
    UnknownUpdate,
    Update,
    UpdateKind,
)
from tinyacp._conversation import Conversation, Done, Reaction, Record, Write
from tinyacp._serve import Act

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

EXAMPLES = ACP / "examples"
EPOCH = 7
CLIENT_INFO = ClientInfo("tinyacp-tests", "0.0.1")
SESSION = "sess_1"
FULL_CAPABILITIES = {
    "protocolVersion": 1,
    "agentCapabilities": {
        "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": True},
    },
}
# Texts with newlines (and a CR, a tab, non-ASCII) that must never split a line on the wire.
AWKWARD = "line one\nline two\r\n\ttabbed — ünïcödé ✓\n"


# -- helpers -------------------------------------------------------------------------------------------------


def example_lines(name: str) -> list[bytes]:
    return [line for line in (EXAMPLES / name).read_bytes().splitlines() if line.strip()]


def response_examples() -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = json.loads((EXAMPLES / "response_examples.json").read_text(encoding="utf-8"))
    return pairs


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def make_core(*, policy: PermissionPolicy | None = None, has_observer: bool = True) -> Conversation:
    return Conversation(
        epoch=EPOCH,
        transfer_limits=TransferLimits(),
        reader_limits=ReaderLimits(),
        policy=policy or PermissionPolicy(),
        client_info=CLIENT_INFO,
        has_observer=has_observer,
    )


def run(
    step: Update | Reaction, reply: PermissionReply | None = None
) -> tuple[list[Record | Write | Act], Done | None]:
    """Run a step to its end as a shell would: every Record answered with None (or ``reply`` for a permission
    request). Returns the effects in order and the step's Done (None if the call in flight goes on)."""
    assert not isinstance(step, Update), "an accepted update is not a step"
    effects: list[Record | Write | Act] = []
    answer: Any = None
    try:
        while True:
            effect = step.send(answer)
            effects.append(effect)
            answer = reply if isinstance(effect, Record) and effect.callback == "on_permission_request" else None
    except StopIteration as stop:
        return effects, stop.value


def answer_with(core: Conversation, request_id: int | str | None, result: Any) -> object:
    """Feed the agent's response to our request; return what the call got."""
    effects, done = run(core.receive(encode({"jsonrpc": "2.0", "id": request_id, "result": result})))
    assert [(e.callback, getattr(e.value, "kind", None)) for e in effects if isinstance(e, Record)] == [
        ("on_message", MessageKind.RESPONSE)
    ]
    assert done is not None
    return done.value


def initialized(result: dict[str, Any] | None = None) -> Conversation:
    core = make_core()
    message = core.initialize().message
    answer_with(core, message.id, result or FULL_CAPABILITIES)
    return core


def only_record(step: Update | Reaction) -> Record:
    """The one effect of a line that is recorded and not acted on."""
    effects, done = run(step)
    assert done is None
    assert len(effects) == 1, effects
    (effect,) = effects
    assert isinstance(effect, Record)
    return effect


def message_of(core: Conversation, raw: bytes) -> AgentMessage:
    record = only_record(core.receive(raw))
    assert record.callback == "on_message"
    assert isinstance(record.value, AgentMessage)
    assert record.value.raw == raw
    assert record.value.epoch == EPOCH
    return record.value


def loose_update(core: Conversation, raw: bytes) -> Update:
    """A session/update that did not type: recorded with on_update as an UNKNOWN update, nothing written."""
    record = only_record(core.receive(raw))
    assert record.callback == "on_update"
    assert isinstance(record.value, Update)
    return record.value


def schema_consts(definition: str) -> set[str]:
    return {variant["const"] for variant in schema()["$defs"][definition]["oneOf"]}


# -- the session/update examples -----------------------------------------------------------------------------


def test_each_update_example_decodes_to_its_kind_with_the_exact_line() -> None:
    core = make_core()
    kinds = []
    for seq, raw in enumerate(example_lines("session_update_examples.jsonl"), start=1):
        update = core.receive(raw)
        assert isinstance(update, Update), raw
        claimed = json.loads(raw)["params"]["update"]["sessionUpdate"]
        assert update.kind == UpdateKind(claimed)
        assert type(update.payload).kind is update.kind
        assert update.raw == raw
        assert update.session_id == SESSION
        assert (update.epoch, update.seq) == (EPOCH, seq)
        kinds.append(update.kind)
    assert len(kinds) == 11
    assert set(kinds) == set(UpdateKind) - {UpdateKind.UNKNOWN} - NEWER_KINDS


NEWER_KINDS = {
    UpdateKind.NOTICE,
    UpdateKind.COMPACTION_UPDATE,
    UpdateKind.COMPACTION_SUMMARY_CHUNK,
    UpdateKind.PLAN_UPDATE,
    UpdateKind.PLAN_REMOVED,
    UpdateKind.SUBAGENT_UPDATE,
    UpdateKind.SESSION_MESSAGE,
    UpdateKind.SESSION_MESSAGE_CHUNK,
}
"""The kinds newer than schema v1.21 (checked against the SDK 2.4.0 schemas in test_newer_messages.py)."""


def test_update_kinds_are_the_schemas_session_update_values() -> None:
    variants = schema()["$defs"]["SessionUpdate"]["oneOf"]
    values = {variant["properties"]["sessionUpdate"]["const"] for variant in variants}
    assert values == {kind.value for kind in UpdateKind} - {"unknown"} - NEWER_KINDS


def test_enums_have_exactly_the_schemas_values() -> None:
    assert {reason.value for reason in StopReason} == schema_consts("StopReason")
    assert {reason.value for reason in StopReason} == {
        "end_turn",
        "max_tokens",
        "max_turn_requests",
        "refusal",
        "cancelled",
    }
    assert {kind.value for kind in ToolKind} == schema_consts("ToolKind")
    assert {status.value for status in ToolCallStatus} == schema_consts("ToolCallStatus")
    assert {kind.value for kind in PermissionOptionKind} == schema_consts("PermissionOptionKind")


@functools.cache
def richer_updates() -> dict[str, Update]:
    core = make_core()
    updates = {}
    for raw in example_lines("richer_examples.jsonl"):
        if json.loads(raw).get("method") != "session/update":
            continue
        update = core.receive(raw)
        assert isinstance(update, Update), raw
        assert update.raw == raw
        updates[update.kind.value] = update
    return updates


def test_richer_chunk_reads_message_id_and_text() -> None:
    update = richer_updates()["agent_message_chunk"]
    assert update.payload.message_id == "msg_1"  # type: ignore[union-attr]
    assert update.payload.content.type == "text"  # type: ignore[union-attr]
    assert update.text == "Hi!"


def test_richer_tool_call_reads_every_field() -> None:
    update = richer_updates()["tool_call"]
    assert (update.tool_call_id, update.title, update.tool_kind, update.status) == (
        "call_1",
        "Edit config",
        ToolKind.EDIT,
        ToolCallStatus.PENDING,
    )
    payload = update.payload
    assert payload.content == [{"type": "diff", "path": "/p/a.json", "oldText": None, "newText": "{}"}]  # type: ignore[union-attr]
    assert payload.locations == [{"path": "/p/a.json", "line": 1}]  # type: ignore[union-attr]
    assert payload.raw_input == {"path": "/p/a.json"}  # type: ignore[union-attr]
    assert payload.raw_output is None  # type: ignore[union-attr]
    assert update.text is None


def test_richer_tool_call_update_reads_status_and_replacing_content() -> None:
    update = richer_updates()["tool_call_update"]
    assert (update.tool_call_id, update.status, update.title, update.tool_kind) == (
        "call_1",
        ToolCallStatus.COMPLETED,
        None,
        None,
    )
    assert update.payload.content == [  # type: ignore[union-attr]
        {"type": "content", "content": {"type": "text", "text": "done"}},
        {"type": "terminal", "terminalId": "term_1"},
    ]


def test_richer_plan_commands_config_info_and_usage_read_their_fields() -> None:
    updates = richer_updates()
    assert updates["plan"].payload.entries == [PlanEntry("Step 1", "high", "in_progress")]  # type: ignore[union-attr]
    assert updates["available_commands_update"].payload.available_commands == [  # type: ignore[union-attr]
        AvailableCommand("web", "Search the web", {"hint": "query"})
    ]
    options = updates["config_option_update"].payload.config_options  # type: ignore[union-attr]
    assert [option["id"] for option in options] == ["model", "brave"]
    info = updates["session_info_update"].payload
    assert (info.title, info.updated_at) == ("New title", "2026-01-01T00:00:00Z")  # type: ignore[union-attr]
    usage = updates["usage_update"].payload
    assert (usage.used, usage.size, usage.cost) == (53000, 200000, Cost(0.045, "USD"))  # type: ignore[union-attr]


def test_session_update_examples_without_optional_fields_read_defaults() -> None:
    core = make_core()
    by_kind = {}
    for raw in example_lines("session_update_examples.jsonl"):
        update = core.receive(raw)
        assert isinstance(update, Update)
        by_kind[update.kind] = update
    tool_call = by_kind[UpdateKind.TOOL_CALL]
    assert (tool_call.tool_kind, tool_call.status, tool_call.payload.content) == (None, None, None)  # type: ignore[union-attr]
    assert by_kind[UpdateKind.USAGE_UPDATE].payload.cost is None  # type: ignore[union-attr]
    assert by_kind[UpdateKind.AGENT_MESSAGE_CHUNK].payload.message_id is None  # type: ignore[union-attr]
    assert by_kind[UpdateKind.CURRENT_MODE_UPDATE].payload.current_mode_id == "code"  # type: ignore[union-attr]
    info = by_kind[UpdateKind.SESSION_INFO_UPDATE].payload
    assert (info.title, info.updated_at) == (None, None)  # type: ignore[union-attr]


# -- what we write -------------------------------------------------------------------------------------------

ALL_BLOCKS: list[PromptContent] = [
    PromptText(AWKWARD),
    PromptMedia.image("iVBO", "image/png"),
    PromptMedia.image("iVBO", "image/png", uri="file:///shot.png"),
    PromptMedia.audio("UklG", "audio/wav"),
    PromptResourceLink("file:///a.pdf", "a.pdf"),
    PromptResourceLink("file:///b.pdf", "b.pdf", "application/pdf", "B", "the b file", 1234),
    PromptTextResource("file:///a.py", AWKWARD),
    PromptTextResource("file:///b.py", "x = 1\n", mime_type="text/x-python"),
    PromptBlobResource("file:///a.bin", "AAAA"),
    PromptBlobResource("file:///b.bin", "AAAA", mime_type="application/octet-stream"),
]
MCP_SERVERS: list[McpServer | McpServerHttp | McpServerSse] = [
    McpServer("fs", "/bin/mcp"),
    McpServer("fs2", "/bin/mcp", ["--root", "/p\n"], [EnvVariable("K", "V\n")]),
    McpServerHttp("h", "https://x/mcp"),
    McpServerHttp("h2", "https://x/mcp", [HttpHeader("Authorization", "Bearer t")]),
    McpServerSse("s", "https://x/sse"),
    McpServerSse("s2", "https://x/sse", [HttpHeader("X-Key", "k")]),
]


def permission_line(request_id: int | str, options: Sequence[tuple[str, str]] | None = None) -> bytes:
    offered = options if options is not None else [("allow-once", "allow_once"), ("reject-once", "reject_once")]
    return encode(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/request_permission",
            "params": {
                "sessionId": SESSION,
                "toolCall": {"toolCallId": "call_1", "title": "Write a\nb", "kind": "edit"},
                "options": [{"optionId": oid, "name": oid, "kind": kind} for oid, kind in offered],
            },
        }
    )


def written(step: Update | Reaction, reply: PermissionReply | None = None) -> OutgoingMessage:
    """The one line a step writes."""
    effects, _ = run(step, reply)
    writes = [effect.message for effect in effects if isinstance(effect, Write)]
    assert len(writes) == 1, effects
    return writes[0]


@functools.cache
def encoded() -> dict[str, tuple[OutgoingMessage, str]]:
    """Every kind of line the core writes, by label, with the schema definition its params/result/error fits."""
    lines: dict[str, tuple[OutgoingMessage, str]] = {}
    core = make_core()
    lines["initialize"] = (core.initialize().message, "InitializeRequest")
    answer_with(core, 0, FULL_CAPABILITIES)
    titled = Conversation(
        epoch=EPOCH,
        transfer_limits=TransferLimits(),
        reader_limits=ReaderLimits(),
        policy=PermissionPolicy(),
        client_info=ClientInfo("tinyacp-tests", "1", title="Tiny\nACP"),
        has_observer=True,
    )
    lines["initialize with a titled client"] = (titled.initialize().message, "InitializeRequest")
    lines["session/new without servers"] = (core.new_session("/p").message, "NewSessionRequest")
    lines["session/new with stdio, http and sse servers"] = (
        core.new_session("/p", MCP_SERVERS).message,
        "NewSessionRequest",
    )
    lines["session/prompt as a str"] = (core.prompt(SESSION, AWKWARD).message, "PromptRequest")
    lines["session/prompt with every block"] = (core.prompt(SESSION, ALL_BLOCKS).message, "PromptRequest")
    lines["session/cancel"] = (core.cancel(SESSION), "CancelNotification")
    core.end_call()
    lines["permission selected"] = (
        written(core.receive(permission_line(3)), PermissionReply.allow()),
        "RequestPermissionResponse",
    )
    lines["permission cancelled"] = (
        written(core.receive(permission_line("p-1", [("allow", "allow_once")])), PermissionReply.reject()),
        "RequestPermissionResponse",
    )
    unserved = {"sessionId": SESSION, "path": "/p/a\n.txt"}
    for request_id in (0, "uuid-1"):
        line = encode({"jsonrpc": "2.0", "id": request_id, "method": "fs/read_text_file", "params": unserved})
        lines[f"-32601 to id {request_id!r}"] = (written(core.receive(line)), "Error")
    broken = encode({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {"x": 1}})
    lines["-32602 to a broken permission request"] = (written(core.receive(broken)), "Error")
    return lines


@pytest.mark.parametrize("label", list(encoded()))
def test_every_line_we_write_fits_the_client_branch_and_its_definition(label: str) -> None:
    message, part = encoded()[label]
    check_client_line(message.raw, part)
    assert message.epoch == EPOCH


@pytest.mark.parametrize("label", list(encoded()))
def test_every_line_we_write_is_compact_and_has_no_newline(label: str) -> None:
    raw = encoded()[label][0].raw
    assert b"\n" not in raw
    assert b"\r" not in raw
    parsed = json.loads(raw)
    assert raw == json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()


def test_texts_with_newlines_survive_the_line_unchanged() -> None:
    prompt = json.loads(encoded()["session/prompt with every block"][0].raw)["params"]["prompt"]
    assert prompt[0] == {"type": "text", "text": AWKWARD}
    assert prompt[6] == {"type": "resource", "resource": {"uri": "file:///a.py", "text": AWKWARD}}


def test_initialize_sends_version_1_our_info_boolean_config_options_and_the_default_features() -> None:
    message, _ = encoded()["initialize"]
    line = json.loads(message.raw)
    assert (message.method, message.id, line["id"], line["method"]) == ("initialize", 0, 0, "initialize")
    params = line["params"]
    assert type(params["protocolVersion"]) is int
    assert params["protocolVersion"] == 1
    assert params["clientInfo"] == {"name": "tinyacp-tests", "version": "0.0.1"}
    assert params["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "session": {"configOptions": {"boolean": {}}, "notices": {}, "compaction": {}},
    }
    assert set(params) == {"protocolVersion", "clientInfo", "clientCapabilities"}
    titled = json.loads(encoded()["initialize with a titled client"][0].raw)["params"]["clientInfo"]
    assert titled == {"name": "tinyacp-tests", "version": "1", "title": "Tiny\nACP"}


def test_mcp_servers_are_written_with_every_required_field_and_stdio_has_no_type() -> None:
    servers = json.loads(encoded()["session/new with stdio, http and sse servers"][0].raw)["params"]["mcpServers"]
    assert servers == [
        {"name": "fs", "command": "/bin/mcp", "args": [], "env": []},
        {"name": "fs2", "command": "/bin/mcp", "args": ["--root", "/p\n"], "env": [{"name": "K", "value": "V\n"}]},
        {"type": "http", "name": "h", "url": "https://x/mcp", "headers": []},
        {
            "type": "http",
            "name": "h2",
            "url": "https://x/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer t"}],
        },
        {"type": "sse", "name": "s", "url": "https://x/sse", "headers": []},
        {"type": "sse", "name": "s2", "url": "https://x/sse", "headers": [{"name": "X-Key", "value": "k"}]},
    ]
    empty = json.loads(encoded()["session/new without servers"][0].raw)["params"]
    assert empty == {"cwd": "/p", "mcpServers": []}


def test_our_requests_match_the_reference_client_lines() -> None:
    """The reference's client lines (a prompt with every block, a session/new with every transport, a cancel)
    are what we write for the same content."""
    reference = {}
    for raw in example_lines("richer_examples.jsonl"):
        line = json.loads(raw)
        reference[line.get("method")] = line
    core = initialized()
    ours = json.loads(
        core.new_session(
            "/home/u/p",
            [
                McpServer("fs", "/bin/mcp", env=[EnvVariable("K", "V")]),
                McpServerHttp("h", "https://x/mcp", [HttpHeader("Authorization", "Bearer t")]),
                McpServerSse("s", "https://x/sse"),
            ],
        ).message.raw
    )
    assert ours["params"] == reference["session/new"]["params"]
    blocks: list[PromptContent] = [
        PromptText("hi"),
        PromptResourceLink("file:///a.pdf", "a.pdf"),
        PromptTextResource("file:///a.py", "x=1"),
        PromptBlobResource("file:///a.bin", "AAAA"),
        PromptMedia.image("iVBO", "image/png"),
        PromptMedia.audio("UklG", "audio/wav"),
    ]
    ours = json.loads(core.prompt("sess_1", blocks).message.raw)
    assert ours["params"] == reference["session/prompt"]["params"]
    assert json.loads(core.cancel("sess_1").raw) == reference["session/cancel"]
    # The reference initialize offers fs and terminal; ours offers none, and is otherwise the same shape.
    ours = json.loads(make_core().initialize().message.raw)
    assert set(ours["params"]) == set(reference["initialize"]["params"])
    assert ours["params"]["protocolVersion"] == reference["initialize"]["params"]["protocolVersion"]


def test_our_permission_answers_have_the_reference_shape() -> None:
    examples = [result for name, result in response_examples() if name == "RequestPermissionResponse"]
    core = make_core()
    selected = json.loads(written(core.receive(permission_line(1)), PermissionReply.select("allow-once")).raw)
    cancelled = json.loads(written(core.receive(permission_line(2)), PermissionReply.cancelled()).raw)
    assert [selected["result"], cancelled["result"]] == examples


def test_error_answers_echo_the_agents_id_exactly() -> None:
    for label, request_id in (("-32601 to id 0", 0), ("-32601 to id 'uuid-1'", "uuid-1")):
        message = encoded()[label][0]
        line = json.loads(message.raw)
        assert type(line["id"]) is type(request_id)
        assert line["id"] == request_id
        assert line["error"]["code"] == -32601
        assert (message.method, message.id) == (None, request_id)
    assert json.loads(encoded()["-32602 to a broken permission request"][0].raw)["error"]["code"] == -32602


# -- the agent's answers to our requests ---------------------------------------------------------------------


def test_minimal_initialize_response_reads_defaults() -> None:
    (minimal,) = [r for name, r in response_examples() if name == "InitializeResponse" and len(r) == 1]
    core = make_core()
    agent = answer_with(core, core.initialize().message.id, minimal)
    assert isinstance(agent, Initialize)
    assert core.agent is agent
    assert agent.protocol_version == 1
    assert agent.load_session is False
    caps = agent.prompt_capabilities
    assert (caps.image, caps.audio, caps.embedded_context) == (False, False, False)
    assert (agent.mcp_capabilities.http, agent.mcp_capabilities.sse) == (False, False)
    assert agent.auth_methods == []
    assert agent.agent_info is None


def test_full_initialize_response_exposes_every_capability() -> None:
    (full,) = [r for name, r in response_examples() if name == "InitializeResponse" and len(r) > 1]
    core = make_core()
    agent = answer_with(core, core.initialize().message.id, full)
    assert isinstance(agent, Initialize)
    assert agent.load_session is True
    caps = agent.prompt_capabilities
    assert (caps.image, caps.audio, caps.embedded_context) == (True, False, True)
    assert (caps.allows("image"), caps.allows("audio"), caps.allows("embeddedContext")) == (True, False, True)
    assert (agent.mcp_capabilities.http, agent.mcp_capabilities.sse) == (True, False)
    assert agent.auth_methods == [
        AuthMethod("agent-login", "Agent login"),
        AuthMethod("term", "Terminal login", type="terminal", args=["--login"], env={"X": "1"}),
    ]
    assert agent.agent_info == AgentInfo("a", "1")
    assert set(agent.agent_capabilities.session_capabilities) == {
        "list",
        "resume",
        "close",
        "delete",
        "additionalDirectories",
    }
    assert agent.agent_capabilities.auth == {"logout": {}}


def test_new_session_response_reads_modes() -> None:
    (result,) = [r for name, r in response_examples() if name == "NewSessionResponse"]
    core = initialized()
    session = answer_with(core, core.new_session("/p").message.id, result)
    assert session == Session("sess_1", Modes("ask", [SessionMode("ask", "Ask"), SessionMode("code", "Code", "d")]))
    assert isinstance(session, Session)
    assert session.id == "sess_1"


def test_prompt_response_example_ends_the_turn() -> None:
    (result,) = [r for name, r in response_examples() if name == "PromptResponse"]
    core = initialized()
    outcome = answer_with(core, core.prompt(SESSION, "hi").message.id, result)
    assert isinstance(outcome, PromptResult)
    assert outcome.stop_reason is StopReason.END_TURN
    assert (outcome.session_id, outcome.text, outcome.meta, outcome.overflow) == (SESSION, "", None, None)
    assert not core.in_turn


@pytest.mark.parametrize("reason", [*StopReason, "paused_for_lunch"])
def test_stop_reasons_decode_and_an_unknown_one_is_kept_as_its_string(reason: str) -> None:
    core = initialized()
    outcome = answer_with(core, core.prompt(SESSION, "hi").message.id, {"stopReason": str(reason), "usage": {"n": 1}})
    assert isinstance(outcome, PromptResult)
    assert outcome.stop_reason == reason
    if reason in {member.value for member in StopReason}:
        assert type(outcome.stop_reason) is StopReason
    else:
        assert type(outcome.stop_reason) is str
    assert outcome.meta == {"usage": {"n": 1}}


@pytest.mark.parametrize("example", [r for name, r in response_examples() if name == "Error"])
def test_error_examples_become_request_errors(example: dict[str, Any]) -> None:
    core = initialized()
    request = core.new_session("/p").message
    effects_before: list[Record | Write | Act] = []
    with pytest.raises(RequestError) as raised:
        step = core.receive(encode({"jsonrpc": "2.0", "id": request.id, "error": example}))
        assert not isinstance(step, Update)
        while True:
            effects_before.append(step.send(None))
    error = raised.value
    assert (error.method, error.code, error.message, error.data) == (
        "session/new",
        example["code"],
        example["message"],
        example.get("data"),
    )
    # The response was recorded before the call failed.
    assert [(e.callback, e.value.kind) for e in effects_before] == [("on_message", MessageKind.RESPONSE)]  # type: ignore[union-attr]


def test_response_examples_that_are_not_answers_to_our_requests_are_known() -> None:
    """We send initialize, session/new and session/prompt only: the other results are someone else's."""
    ours = {"InitializeResponse", "NewSessionResponse", "PromptResponse", "RequestPermissionResponse", "Error"}
    others = {name for name, _ in response_examples()} - ours
    assert others == {
        "LoadSessionResponse",
        "ListSessionsResponse",
        "SetSessionConfigOptionRequest",
        "TerminalOutputResponse",
        "WaitForTerminalExitResponse",
        "ReadTextFileResponse",
        "CreateElicitationResponse",
    }


# -- the negative examples -----------------------------------------------------------------------------------

# What each line of negative_examples.jsonl becomes, in file order: (kind, sessionUpdate it claimed).
NEGATIVE = [
    (UpdateKind.UNKNOWN, "current_mode_update"),  # modeId instead of currentModeId
    (UpdateKind.UNKNOWN, "tool_call"),  # no title
    (UpdateKind.UNKNOWN, "usage_update"),  # no size
    (UpdateKind.UNKNOWN, "plan_update"),  # an unstable kind
    # A tool_call_update whose content item lacks the {"type":"content"} wrapper: content is kept as the agent's
    # JSON (the reference implementation skips invalid items rather than failing the message), so it types.
    (UpdateKind.TOOL_CALL_UPDATE, "tool_call_update"),
]


def test_negative_examples_break_the_schema() -> None:
    lines = example_lines("negative_examples.jsonl")
    assert len(lines) == len(NEGATIVE)
    for raw in lines:
        assert errors("SessionNotification", json.loads(raw)["params"]) != [], raw


@pytest.mark.parametrize(("index", "expected"), list(enumerate(NEGATIVE)))
def test_negative_examples_are_classified_without_an_exception(index: int, expected: tuple[UpdateKind, str]) -> None:
    kind, claimed = expected
    raw = example_lines("negative_examples.jsonl")[index]
    core = make_core()
    received = core.receive(raw)
    update = received if isinstance(received, Update) else loose_update(core, raw)
    assert update.kind is kind
    assert update.raw == raw
    assert (update.epoch, update.seq, update.session_id) == (EPOCH, 1, SESSION)
    fields = json.loads(raw)["params"]["update"]
    if kind is UpdateKind.UNKNOWN:
        assert not isinstance(received, Update)
        assert update.payload == UnknownUpdate(claimed, fields)
        assert update.text is None
        assert update.tool_call_id is None
    else:
        assert update.payload.content == fields["content"]  # type: ignore[union-attr]


# -- tolerance -----------------------------------------------------------------------------------------------


def update_line(update: dict[str, Any], **extra: Any) -> bytes:
    return encode(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}, **extra}
    )


def test_unknown_fields_are_ignored_everywhere() -> None:
    plain = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    noisy = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "hi", "_meta": {"x": 1}, "future": [1, 2]},
        "_meta": {"traceparent": "00-1"},
        "brandNew": {"nested": True},
    }
    line = encode(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": SESSION, "update": noisy, "_meta": None, "extra": 1},
            "extra": "top",
        }
    )
    core = make_core()
    quiet = core.receive(update_line(plain))
    loud = core.receive(line)
    assert isinstance(quiet, Update)
    assert isinstance(loud, Update)
    assert loud.payload == quiet.payload
    assert loud.raw == line


def test_unknown_fields_in_answers_are_ignored() -> None:
    core = initialized({**FULL_CAPABILITIES, "newThing": {"x": 1}, "agentInfo": {"name": "a", "version": "1", "z": 0}})
    assert core.agent is not None
    assert core.agent.agent_info == AgentInfo("a", "1")
    result = {"sessionId": "s9", "models": {"currentModelId": "m"}, "configOptions": [{"id": "model"}]}
    session = answer_with(core, core.new_session("/p").message.id, result)
    assert isinstance(session, Session)
    assert (session.id, session.modes) == ("s9", None)
    assert [option.id for option in session.config_options] == ["model"]


@pytest.mark.parametrize("claimed", ["notice", "compaction_update", "", 5, None])
def test_an_unknown_update_kind_is_unknown_with_its_line_kept(claimed: object) -> None:
    fields = {"sessionUpdate": claimed, "text": "x\ny"}
    if claimed is None:
        del fields["sessionUpdate"]
    raw = update_line(fields)
    update = loose_update(make_core(), raw)
    assert update.kind is UpdateKind.UNKNOWN
    assert update.raw == raw
    assert update.session_id == SESSION
    assert update.payload == UnknownUpdate(claimed if isinstance(claimed, str) else None, fields)


def test_an_unknown_tool_kind_or_status_still_decodes_as_a_tool_call() -> None:
    core = make_core()
    raw = update_line(
        {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Beam", "kind": "teleport", "status": "cancelled"}
    )
    update = core.receive(raw)
    assert isinstance(update, Update)
    assert update.kind is UpdateKind.TOOL_CALL
    assert (update.tool_kind, update.status) == ("teleport", "cancelled")
    raw = update_line({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "kind": "warp", "status": "paused"})
    update = core.receive(raw)
    assert isinstance(update, Update)
    assert update.kind is UpdateKind.TOOL_CALL_UPDATE
    assert (update.tool_kind, update.status) == ("warp", "paused")


def test_other_notifications_are_recorded_and_skipped() -> None:
    (raw,) = [line for line in example_lines("richer_examples.jsonl") if b"$/cancel_request" in line]
    message = message_of(make_core(), raw)
    assert (message.kind, message.method, message.id) == (MessageKind.NOTIFICATION, "$/cancel_request", None)


# -- strictness ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "envelope",
    [
        {},
        {"jsonrpc": "1.0"},
        {"jsonrpc": 2.0},
        {"jsonrpc": None},
        {"jsonrpc": "2.0 "},
    ],
    ids=["missing", "1.0", "number", "null", "padded"],
)
def test_a_wrong_jsonrpc_makes_any_message_invalid(envelope: dict[str, Any]) -> None:
    core = initialized()
    request = core.new_session("/p").message
    bodies: list[dict[str, Any]] = [
        {
            "method": "session/update",
            "params": {"sessionId": SESSION, "update": {"sessionUpdate": "plan", "entries": []}},
        },
        {"id": request.id, "result": {"sessionId": "s"}},
        {"id": 3, "method": "session/request_permission", "params": {}},
        {"id": 4, "method": "fs/read_text_file", "params": {}},
    ]
    for body in bodies:
        raw = encode({**body, **envelope})
        effects, _ = run(core.receive(raw))
        record = effects[0]
        assert isinstance(record, Record) and isinstance(record.value, AgentMessage)
        assert record.value.raw == raw and "jsonrpc" in record.value.detail
        if "id" in body and "method" in body:  # a request: answered, so that the agent does not wait for ever
            assert record.value.kind is MessageKind.INVALID_REQUEST
            (write,) = effects[1:]
            assert isinstance(write, Write)
            assert json.loads(write.message.raw)["error"]["code"] == -32600
        else:
            assert record.value.kind is MessageKind.INVALID
            assert len(effects) == 1
    assert core.seq == 0
    # Our call is still waiting, and the proper answer completes it.
    assert isinstance(answer_with(core, request.id, {"sessionId": "s"}), Session)


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"not json", "not JSON"),
        (b"", "not JSON"),
        (b'{"jsonrpc":"2.0","method":"session/up\xffdate"}', "not JSON"),
        (b'[{"jsonrpc":"2.0","method":"session/cancel"}]', "array"),
        (b"42", "not a JSON-RPC message"),
        (b'{"jsonrpc":"2.0","id":1.5,"result":{}}', "not a JSON-RPC message"),
        (b'{"jsonrpc":"2.0","id":true,"result":{}}', "not a JSON-RPC message"),
        (b'{"jsonrpc":"2.0"}', "neither a request, a response nor a notification"),
        (b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{}}}', "session/update"),
        (b'{"jsonrpc":"2.0","method":"session/update"}', "session/update"),
    ],
)
def test_lines_that_are_not_usable_json_rpc_are_invalid(raw: bytes, detail: str) -> None:
    message = message_of(make_core(), raw)
    assert message.kind is MessageKind.INVALID
    assert detail in message.detail


@pytest.mark.parametrize("where", ["rawInput", "params"])
def test_a_deeply_nested_line_is_invalid_not_a_crash(where: str) -> None:
    """JSON nested past the interpreter's recursion limit is the agent's garbage, not our crash."""
    deep = "[" * 100_000 + "]" * 100_000  # past every interpreter's limit (3.13 decodes 5 000 levels)
    if where == "rawInput":
        update = f'{{"sessionUpdate":"tool_call","toolCallId":"c","title":"t","rawInput":{deep}}}'
        raw = f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{update}}}}}'.encode()
    else:
        raw = f'{{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{deep}}}'.encode()
    core = make_core()
    effects, _ = run(core.receive(raw))
    record = effects[0]
    assert isinstance(record, Record) and isinstance(record.value, AgentMessage)
    assert record.value.raw == raw
    if where == "params":  # a request whose id can be read: answered, so that the agent does not wait for ever
        assert record.value.kind is MessageKind.INVALID_REQUEST
        (write,) = effects[1:]
        assert isinstance(write, Write)
        assert json.loads(write.message.raw)["error"]["code"] == -32602
    else:
        assert record.value.kind is MessageKind.INVALID
        assert len(effects) == 1
    assert core.seq == 0


@pytest.mark.parametrize(
    "stray_id",
    [1, 99, -1, "0", None, 2**70],
    ids=["next", "never", "negative", "string-0", "null", "huge"],
)
def test_a_response_to_an_id_we_did_not_send_is_stray(stray_id: object) -> None:
    core = make_core()
    request = core.initialize().message
    assert request.id == 0
    for body in ({"result": {"protocolVersion": 1}}, {"error": {"code": -1, "message": "no"}}):
        raw = encode({"jsonrpc": "2.0", "id": stray_id, **body})
        message = message_of(core, raw)
        assert (message.kind, message.id, message.method) == (MessageKind.STRAY_RESPONSE, stray_id, None)
    assert isinstance(answer_with(core, 0, {"protocolVersion": 1}), Initialize)


def test_a_second_answer_to_the_same_id_is_stray() -> None:
    core = make_core()
    answer_with(core, core.initialize().message.id, {"protocolVersion": 1})
    message = message_of(core, encode({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}))
    assert message.kind is MessageKind.STRAY_RESPONSE


def test_an_answer_after_the_call_ended_is_stray() -> None:
    core = initialized()
    request = core.prompt(SESSION, "hi").message
    core.end_call()  # the call timed out or failed
    message = message_of(core, encode({"jsonrpc": "2.0", "id": request.id, "result": {"stopReason": "end_turn"}}))
    assert message.kind is MessageKind.STRAY_RESPONSE
    assert not core.in_turn


# -- what the caller builds ----------------------------------------------------------------------------------


def test_client_info_env_and_headers_encode_as_the_schema_names_them() -> None:
    assert msgspec.json.encode(ClientInfo("n", "1")) == b'{"name":"n","version":"1"}'
    assert msgspec.json.encode(ClientInfo("n", "1", "T")) == b'{"name":"n","version":"1","title":"T"}'
    assert msgspec.json.encode(EnvVariable("K", "V")) == b'{"name":"K","value":"V"}'
    assert msgspec.json.encode(HttpHeader("H", "V")) == b'{"name":"H","value":"V"}'
    assert errors("Implementation", msgspec.to_builtins(ClientInfo("n", "1", "T"))) == []
    assert errors("EnvVariable", msgspec.to_builtins(EnvVariable("K", "V"))) == []


@pytest.mark.parametrize(
    ("server", "definition"),
    [
        (MCP_SERVERS[0], "McpServerStdio"),
        (MCP_SERVERS[1], "McpServerStdio"),
        (MCP_SERVERS[2], "McpServerHttp"),
        (MCP_SERVERS[3], "McpServerHttp"),
        (MCP_SERVERS[4], "McpServerSse"),
        (MCP_SERVERS[5], "McpServerSse"),
    ],
)
def test_each_mcp_server_fits_its_transport_definition(server: object, definition: str) -> None:
    wire = json.loads(msgspec.json.encode(server))
    assert errors(definition, wire) == []
    assert errors("McpServer", wire) == []
    assert ("type" in wire) is (definition != "McpServerStdio")


def test_prompt_media_builds_images_and_audio() -> None:
    assert PromptMedia.image("d", "image/png") == PromptMedia("image", "d", "image/png")
    assert PromptMedia.image("d", "image/png", "file:///x").uri == "file:///x"
    assert PromptMedia.audio("d", "audio/wav") == PromptMedia("audio", "d", "audio/wav")


def test_prompt_media_rejects_a_bad_type() -> None:
    with pytest.raises(ValueError, match="'image' or 'audio'"):
        PromptMedia("video", "d", "video/mp4")  # type: ignore[arg-type]


def test_prompt_media_rejects_audio_with_a_uri() -> None:
    with pytest.raises(ValueError, match="audio"):
        PromptMedia("audio", "d", "audio/wav", "file:///a.wav")


@pytest.mark.parametrize(
    ("block", "definition"),
    [
        (PromptText("t"), "TextContent"),
        (PromptMedia.image("d", "image/png", "file:///x"), "ImageContent"),
        (PromptMedia.audio("d", "audio/wav"), "AudioContent"),
        (PromptResourceLink("file:///a", "a", "text/plain", "A", "an a", 3), "ResourceLink"),
        (PromptTextResource("file:///a", "t", "text/plain"), "EmbeddedResource"),
        (PromptBlobResource("file:///a", "AAAA", "application/octet-stream"), "EmbeddedResource"),
    ],
)
def test_each_prompt_block_fits_its_content_definition(block: PromptContent, definition: str) -> None:
    core = initialized()
    (wire,) = json.loads(core.prompt(SESSION, [block]).message.raw)["params"]["prompt"]
    assert errors(definition, wire) == []
    assert errors("ContentBlock", wire) == []


def test_a_prompt_takes_only_prompt_blocks() -> None:
    core = initialized()
    with pytest.raises(TypeError, match="PromptContent"):
        core.prompt(SESSION, ["plain str in a list"])  # type: ignore[list-item]
    assert not core.in_turn
    assert core.prompt(SESSION, "next").message.id == 1


def test_new_session_needs_an_absolute_cwd() -> None:
    core = initialized()
    with pytest.raises(ValueError, match="absolute"):
        core.new_session("relative/dir")
    assert core.new_session("/abs").message.id == 1
