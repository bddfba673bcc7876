"""ACP as the agents speak it today, through ``Client`` and ``AsyncClient`` against the scripted agent
(``tests/agents/scripted.py``): every test runs with both shells.

For each newer piece (the features advertised, notices, compaction and plan updates, subagents, permissions by
tool name, the system prompt's override mode, fork, extension and unstable calls, elicitation, ``meta=``), the
tests check the line written against the vendored schemas of the TypeScript SDK 2.4.0 (the unstable file for
the unstable methods), that a refused call writes and records nothing, and what is recorded in which order.
Besides the lines each test looks at, every line a scripted agent received is checked against those schemas
after the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import INIT_RESULT, Journaled, MakeClient, MakeScripted, Recorder, Scripted, chunk, end_turn, wait_for
from helpers.schema import STABLE, UNSTABLE, check_client_line, check_sent_line, errors
from tinyacp import (
    ClientFeatures,
    CompactionSummaryChunk,
    CompactionUpdate,
    ElicitationReply,
    ElicitationRequest,
    MessageKind,
    NotAdvertised,
    Notice,
    PermissionPolicy,
    PlanMarkdown,
    PlanUpdate,
    RequestError,
    Secret,
    Subagent,
    UnknownUpdate,
    UpdateKind,
    UsageError,
)

TIMEOUT = 20.0
SECRET = "sk-gateway-5e2b91c07a"
EVERYTHING = ClientFeatures(notices=True, compaction=True, plan_operations=True, subagents=True, elicitation=True)
INIT: dict[str, Any] = {
    **INIT_RESULT,
    "agentCapabilities": {
        "sessionCapabilities": {
            "fork": {},
            "close": {},
            "delete": {},
            "list": {},
            "systemPrompt": {"mode": {"override": {}}},
        },
        "auth": {"logout": {}},
    },
}


class Asking(Recorder):
    """A Recorder that also records ``on_elicitation`` and answers it with ``reply``."""

    def __init__(self, reply: ElicitationReply | None = None) -> None:
        super().__init__()
        self.reply = reply

    def on_elicitation(self, request: ElicitationRequest) -> ElicitationReply | None:
        self._add("elicitation", request)
        return self.reply


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[MakeScripted]:
    """Scripted agents, every line of which they received is valid against the 2.4.0 schemas after the test
    (the stable file for a stable method, and the unstable file always)."""
    made: list[tuple[Scripted, list[dict[str, Any]]]] = []

    def make(steps: list[dict[str, Any]], name: str = "agent") -> Scripted:
        agent = Scripted(tmp_path, steps, name)
        made.append((agent, steps))
        return agent

    yield make
    for agent, steps in made:
        asked = {step.get("id", 0): step["method"] for step in steps if step["op"] == "request"}
        for line in lines(agent) if agent.log.exists() else []:
            message = json.loads(line)
            check_sent_line(line, None if "method" in message else asked.get(message.get("id")))


def opening(init: dict[str, Any] = INIT, session: str = "s1") -> list[dict[str, Any]]:
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": session}},
    ]


def start(make_client: MakeClient, agent: Scripted, observer: Recorder | None = None, **options: Any) -> Any:
    client = make_client(command=agent.argv, observer=observer or Recorder(), timeout=TIMEOUT, **options)
    client.initialize()
    return client


def lines(agent: Scripted) -> list[bytes]:
    """Every line the agent received, as written."""
    return [line for line in agent.log.read_bytes().splitlines() if line.strip()]


def line_of(agent: Scripted, method: str) -> bytes:
    """The one line the agent received with this method."""
    (found,) = [line for line in lines(agent) if json.loads(line).get("method") == method]
    return found


def answer_to(agent: Scripted, request_id: object) -> bytes:
    """Our answer to the agent's request ``request_id``."""
    (found,) = [
        line for line in lines(agent) if "method" not in json.loads(line) and json.loads(line).get("id") == request_id
    ]
    return found


def update(fields: dict[str, Any], session: str = "s1") -> dict[str, Any]:
    return {"op": "update", "session": session, "update": fields}


def events(recorder: Recorder) -> list[str]:
    """The recorder's events, each named by its callback and what it was about."""
    named = []
    for name, value in recorder.events:
        if name == "update":
            named.append(f"update:{value.kind}:{value.session_id}")
        elif name == "send":
            named.append(f"send:{value.method}")
        elif name == "message":
            named.append(f"message:{value.kind}")
        else:
            named.append(name)
    return named


# -- what initialize advertises -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        (ClientFeatures(), {"session": {"configOptions": {"boolean": {}}, "notices": {}, "compaction": {}}}),
        (
            ClientFeatures(notices=False, compaction=False, subagents=True),
            {"session": {"configOptions": {"boolean": {}}}, "subagents": {}},
        ),
        (
            EVERYTHING,
            {
                "session": {"configOptions": {"boolean": {}}, "notices": {}, "compaction": {}},
                "plan": {},
                "subagents": {},
                "elicitation": {"form": {}},
            },
        ),
    ],
    ids=["default", "subagents-only", "everything"],
)
def test_initialize_advertises_exactly_the_features_switched_on(
    make_client: MakeClient, scripted: MakeScripted, features: ClientFeatures, expected: dict[str, Any]
) -> None:
    agent = scripted(opening()[:2])
    client = start(make_client, agent, features=features)
    client.close()
    sent = check_client_line(line_of(agent, "initialize"), "InitializeRequest", UNSTABLE)
    fixed = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    assert sent["params"]["clientCapabilities"] == {**fixed, **expected}


# -- notices, compaction, plans: typed, recorded in order, never in the reply ----------------------------------

NOTICE = {"sessionUpdate": "notice", "severity": "warning", "title": "Model fallback", "description": "Using haiku"}


def test_with_notices_on_a_turn_whose_agent_sends_notices_returns_the_text_without_them(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/prompt"},
            update(NOTICE),
            update(chunk("Hello")),
            update({"sessionUpdate": "notice", "severity": "info", "title": "Fast mode is off"}),
            update({"sessionUpdate": "notice", "severity": "error", "title": "Another session's"}, session="s2"),
            update(chunk(", world")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client = start(make_client, agent, recorder)
    client.new_session("/")
    result = client.prompt("s1", "hi")
    client.close()

    assert result.text == "Hello, world"
    assert result.notices == (
        Notice("warning", "Model fallback", "Using haiku"),
        Notice("info", "Fast mode is off"),
    )
    assert [u.kind for u in recorder.updates] == [
        UpdateKind.NOTICE,
        "agent_message_chunk",
        "notice",
        "notice",
        "agent_message_chunk",
    ]
    assert [u.session_id for u in recorder.updates] == ["s1", "s1", "s1", "s2", "s1"]
    assert (result.update_count, result.chunk_count) == (4, 2)
    assert (
        check_client_line(line_of(agent, "initialize"), "InitializeRequest", STABLE)["params"]["clientCapabilities"][
            "session"
        ]["notices"]
        == {}
    )


def test_compaction_and_plan_operations_arrive_typed_in_the_order_sent(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    summary = {"type": "text", "text": "We fixed the parser."}
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/prompt"},
            update({"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"}),
            update({"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": summary}),
            update({"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"}),
            update({"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p1", "content": "1. x"}}),
            update({"sessionUpdate": "plan_removed", "planId": "p1"}),
            update({"sessionUpdate": "compaction_update", "status": "completed"}),  # no id: breaks the schema
            update(chunk("done")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client = start(make_client, agent, recorder, features=EVERYTHING)
    client.new_session("/")
    result = client.prompt("s1", "hi")
    client.close()

    assert result.text == "done"
    kinds = [u.kind for u in recorder.updates]
    assert kinds == [
        UpdateKind.COMPACTION_UPDATE,
        UpdateKind.COMPACTION_SUMMARY_CHUNK,
        UpdateKind.COMPACTION_UPDATE,
        UpdateKind.PLAN_UPDATE,
        UpdateKind.PLAN_REMOVED,
        UpdateKind.UNKNOWN,
        UpdateKind.AGENT_MESSAGE_CHUNK,
    ]
    assert recorder.updates[0].payload == CompactionUpdate("c1", "in_progress")
    summarised = recorder.updates[1].payload
    assert isinstance(summarised, CompactionSummaryChunk) and summarised.content.text == "We fixed the parser."
    assert recorder.updates[3].payload == PlanUpdate(PlanMarkdown("p1", "1. x"))
    unknown = recorder.updates[5]
    assert isinstance(unknown.payload, UnknownUpdate) and unknown.payload.session_update == "compaction_update"
    assert json.loads(unknown.raw)["params"]["update"] == {"sessionUpdate": "compaction_update", "status": "completed"}
    assert [u.seq for u in recorder.updates] == list(range(1, 8))


# -- subagents ------------------------------------------------------------------------------------------------

ANNOUNCE = {"sessionUpdate": "subagent_update", "sessionId": "child-1", "title": "Explore", "description": "Reads"}


def child_permission(request_id: str, name: str, session: str = "child-1") -> dict[str, Any]:
    return {
        "op": "request",
        "id": request_id,
        "method": "session/request_permission",
        "params": {
            "sessionId": session,
            "toolCall": {
                "toolCallId": f"t-{request_id}",
                "title": f"{name} something",
                "name": name,
                "kind": "execute",
            },
            "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        },
    }


def test_a_childs_updates_and_permission_requests_go_to_the_observer_and_policy_not_to_the_parents_reply(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/prompt"},
            update(chunk("Delegating. ")),
            update(ANNOUNCE),
            update(chunk("child text that is not the reply"), session="child-1"),
            update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "name": "Bash"}, "child-1"),
            child_permission("p1", "Bash"),
            child_permission("p2", "Read"),
            update({"sessionUpdate": "subagent_update", "sessionId": "child-1", "state": {"state": "idle"}}),
            update(chunk("Done.")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    policy = PermissionPolicy(tools=("Read",), deny_tools=("Bash",), allow_all=True)
    client = start(make_client, agent, recorder, features=EVERYTHING, policy=policy)
    client.new_session("/")
    result = client.prompt("s1", "hi")
    client.close()

    assert result.text == "Delegating. Done."
    assert (result.update_count, result.chunk_count) == (4, 2)
    assert result.subagents == (Subagent("child-1", "Explore", "Reads", state={"state": "idle"}),)
    bash, read = recorder.of("permission_decision")
    assert (bash.session_id, bash.parent_session_id, bash.tool_call.name, bash.verdict) == (
        "child-1",
        "s1",
        "Bash",
        "rejected",
    )
    assert (read.session_id, read.tool_call.name, read.verdict) == ("child-1", "Read", "allowed_once")
    assert check_client_line(answer_to(agent, "p1"), "RequestPermissionResponse", STABLE)["result"] == {
        "outcome": {"outcome": "selected", "optionId": "reject"}
    }
    check_client_line(answer_to(agent, "p2"), "RequestPermissionResponse", STABLE)
    assert [u.session_id for u in recorder.updates if u.kind == UpdateKind.TOOL_CALL] == ["child-1"]
    assert recorder.updates[3].tool_name == "Bash"
    order = events(recorder)
    assert order.index("permission_request") < order.index("permission_decision")


def child_asks_after_the_cancel(question: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn that announces a child, waits for the parent's cancel, then has the child ask ``question``."""
    return [
        *opening(),
        {"op": "expect", "method": "session/prompt"},
        update(ANNOUNCE),
        {"op": "expect", "method": "session/cancel"},
        question,
        end_turn("cancelled"),
    ]


def test_a_cancel_of_the_parent_is_sent_for_the_parent_only_and_a_childs_question_is_then_cancelled(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(child_asks_after_the_cancel(child_permission("p1", "Read")))
    recorder = Recorder()
    client = start(make_client, agent, recorder, features=EVERYTHING, policy=PermissionPolicy(allow_all=True))
    client.new_session("/")
    result = client.prompt("s1", "hi", timeout=1.0)
    client.close()

    assert result.timed_out and result.cancelled
    cancels = [json.loads(line) for line in lines(agent) if json.loads(line).get("method") == "session/cancel"]
    assert [cancel["params"] for cancel in cancels] == [{"sessionId": "s1"}]
    (decided,) = recorder.of("permission_decision")
    assert (decided.session_id, decided.verdict, str(decided.decided_by)) == ("child-1", "cancelled", "cancelled")
    assert json.loads(answer_to(agent, "p1"))["result"] == {"outcome": {"outcome": "cancelled"}}


# -- permissions by tool name ----------------------------------------------------------------------------------


def test_the_policy_allows_read_and_denies_bash_by_name_whatever_else_allows_it(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/prompt"},
            child_permission("r", "Read", session="s1"),
            child_permission("b", "Bash", session="s1"),
            child_permission("g", "Grep", session="s1"),
            end_turn(),
        ]
    )
    recorder = Recorder()
    policy = PermissionPolicy(kinds=("execute",), tools=("Read",), deny_tools=("Bash",))
    client = start(make_client, agent, recorder, policy=policy)
    client.new_session("/")
    client.prompt("s1", "hi")
    client.close()

    verdicts = {r.tool_call.name: (r.verdict, str(r.decided_by)) for r in recorder.of("permission_decision")}
    assert verdicts == {
        "Read": ("allowed_once", "policy"),
        "Bash": ("rejected", "policy"),
        "Grep": ("allowed_once", "policy"),  # by its kind
    }
    for request_id in ("r", "b", "g"):
        check_client_line(answer_to(agent, request_id), "RequestPermissionResponse", STABLE)


# -- the system prompt's override mode -------------------------------------------------------------------------


def test_an_override_system_prompt_is_sent_when_the_agent_offers_mode_override(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(opening())
    client = start(make_client, agent)
    session = client.new_session("/", system_prompt=tinyacp.SystemPrompt("Be terse.", mode="override"))
    client.close()
    assert session.id == "s1"
    sent = check_client_line(line_of(agent, "session/new"), "NewSessionRequest", UNSTABLE)
    assert sent["params"]["systemPrompt"] == {"mode": "override", "content": [{"type": "text", "text": "Be terse."}]}


def test_an_override_system_prompt_is_refused_when_override_is_not_under_mode(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    init = {**INIT_RESULT, "agentCapabilities": {"sessionCapabilities": {"systemPrompt": {"override": {}}}}}
    agent = scripted(opening(init)[:2])
    recorder = Recorder()
    client = start(make_client, agent, recorder)
    recorded = len(recorder.events)
    with pytest.raises(NotAdvertised, match=r"systemPrompt\.mode\.override"):
        client.new_session("/", system_prompt=tinyacp.SystemPrompt("Be terse.", mode="override"))
    assert len(recorder.events) == recorded
    client.close()
    assert "session/new" not in agent.methods()


# -- fork -----------------------------------------------------------------------------------------------------


def test_fork_sends_session_fork_and_returns_the_new_session_the_original_untouched(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/fork"},
            update(chunk("replayed history"), session="s1-fork"),  # OpenCode replays before it answers
            {
                "op": "reply",
                "result": {"sessionId": "s1-fork", "modes": {"currentModeId": "ask", "availableModes": []}},
            },
            {"op": "expect", "method": "session/prompt"},
            update(chunk("from the fork")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client = start(make_client, agent, recorder)
    client.new_session(tmp_path)
    fork = client.fork_session(
        "s1",
        tmp_path,
        additional_directories=None,
        system_prompt=tinyacp.SystemPrompt("Summarise."),
        meta={"trace": "t1"},
    )
    result = client.prompt("s1", "hi")
    client.close()

    assert (fork.id, fork.modes.current_mode_id if fork.modes else None) == ("s1-fork", "ask")
    assert client.session_state("s1-fork").session_id == "s1-fork"
    assert result.text == "from the fork" and result.session_id == "s1"
    sent = check_client_line(line_of(agent, "session/fork"), "ForkSessionRequest", UNSTABLE)
    assert sent["params"] == {
        "sessionId": "s1",
        "cwd": str(tmp_path),
        "mcpServers": [],
        "systemPrompt": {"mode": "append", "content": [{"type": "text", "text": "Summarise."}]},
        "_meta": {"trace": "t1"},
    }
    order = events(recorder)
    fork_at = order.index("send:session/fork")
    assert order[fork_at + 1 : fork_at + 3] == ["update:agent_message_chunk:s1-fork", "message:response"]


def test_fork_is_refused_without_the_fork_capability_unless_forced(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *opening(INIT_RESULT),
            {"op": "expect", "method": "session/fork"},
            {"op": "reply", "result": {"sessionId": "f1"}},
        ]
    )
    recorder = Recorder()
    client = start(make_client, agent, recorder)
    client.new_session(tmp_path)
    recorded = len(recorder.events)
    with pytest.raises(NotAdvertised, match=r"sessionCapabilities\.fork"):
        client.fork_session("s1", tmp_path)
    assert len(recorder.events) == recorded
    assert "session/fork" not in agent.methods()
    fork = client.fork_session("s1", tmp_path, force=True)
    client.close()
    assert fork.id == "f1"
    (sent,) = [m for m in recorder.of("send") if m.method == "session/fork"]
    assert sent.forced
    check_client_line(sent.raw, "ForkSessionRequest", UNSTABLE)


# -- extension and unstable calls -------------------------------------------------------------------------------


def test_request_sends_an_extension_method_recorded_first_with_its_secrets_redacted_in_the_journal(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *opening()[:2],
            {"op": "expect", "method": "providers/set"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "_vendor/ping"},
            {"op": "reply", "result": {"pong": [1, "two", None]}},
            {"op": "expect", "method": "providers/list"},
            {"op": "reply_error", "code": -32601, "message": "Method not found"},
        ]
    )
    journal_path = tmp_path / "journal.jsonl"
    journal = tinyacp.JsonlJournal(journal_path)
    recorder = Journaled(journal)
    client = start(make_client, agent, recorder, epoch=journal.begin_epoch())
    params = {
        "providerId": "gateway",
        "apiType": "openai",
        "baseUrl": "https://gw.example/v1",
        "headers": {"Authorization": Secret(SECRET)},
    }
    assert client.request("providers/set", params) == {}
    assert client.request("_vendor/ping", {"n": 1}) == {"pong": [1, "two", None]}
    with pytest.raises(RequestError) as caught:
        client.request("providers/list")
    client.close()
    journal.close()

    assert caught.value.code == -32601
    set_line = check_client_line(line_of(agent, "providers/set"), "SetProviderRequest", UNSTABLE)
    assert set_line["params"]["headers"] == {"Authorization": SECRET}  # the agent got the plain value
    check_client_line(line_of(agent, "providers/list"), "ListProvidersRequest", UNSTABLE)
    assert json.loads(line_of(agent, "_vendor/ping"))["params"] == {"n": 1}
    assert not errors("Client", json.loads(line_of(agent, "_vendor/ping")), UNSTABLE)
    data = journal_path.read_bytes()
    assert SECRET.encode() not in data
    (record,) = [
        r for r in tinyacp.JsonlJournal.read(journal_path) if r.get("method") == "providers/set" and r["dir"] == "out"
    ]
    assert record["redacted"] == 1
    order = events(recorder)
    assert order[-6:] == [
        "send:providers/set",
        "message:response",
        "send:_vendor/ping",
        "message:response",
        "send:providers/list",
        "message:response",
    ]


@pytest.mark.parametrize(
    ("method", "said"),
    [
        ("session/prompt", "use prompt()"),
        ("session/fork", "use fork_session()"),
        ("session/cancel", "use cancel()"),
        ("initialize", "use initialize()"),
        ("fs/read_text_file", "neither an extension"),
        ("craft/drainMidTurnQueue", "neither an extension"),
    ],
)
def test_request_refuses_a_method_with_a_call_of_its_own_or_outside_the_extensions_writing_nothing(
    make_client: MakeClient, scripted: MakeScripted, method: str, said: str
) -> None:
    agent = scripted(opening()[:2])
    recorder = Recorder()
    client = start(make_client, agent, recorder)
    recorded = len(recorder.events)
    with pytest.raises(UsageError, match=said.replace("(", r"\(").replace(")", r"\)")):
        client.request(method, {})
    with pytest.raises(TypeError, match="params"):
        client.request("_vendor/x", ["not", "an", "object"])
    with pytest.raises(TypeError, match="cannot be sent as JSON"):
        client.notify("_vendor/x", {"when": object()})
    assert len(recorder.events) == recorded
    client.close()
    assert agent.methods() == ["initialize"]


def test_a_request_whose_deadline_passes_sends_cancel_request_for_its_id(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [*opening()[:2], {"op": "expect", "method": "_vendor/slow"}, {"op": "expect", "method": "$/cancel_request"}]
    )
    recorder = Recorder()
    client = start(make_client, agent, recorder)
    with pytest.raises(tinyacp.AgentTimeout):
        client.request("_vendor/slow", timeout=0.3)
    wait_for(lambda: "$/cancel_request" in agent.methods(), what="the cancel reached the agent")
    client.close()
    slow = json.loads(line_of(agent, "_vendor/slow"))
    cancel = check_client_line(line_of(agent, "$/cancel_request"), "CancelRequestNotification", STABLE)
    assert cancel["params"] == {"requestId": slow["id"]}


# -- elicitation ----------------------------------------------------------------------------------------------

FORM = {
    "sessionId": "s1",
    "message": "Which branch?",
    "mode": "form",
    "requestedSchema": {
        "type": "object",
        "properties": {"branch": {"type": "string"}, "force": {"type": "boolean"}},
        "required": ["branch"],
    },
}


def during_new_session(*steps: dict[str, Any]) -> list[dict[str, Any]]:
    """The opening, with ``steps`` played while ``session/new`` waits for its answer."""
    first = opening()
    return [*first[:3], *steps, first[3]]


def elicit(request_id: object, params: dict[str, Any]) -> dict[str, Any]:
    return {"op": "request", "id": request_id, "method": "elicitation/create", "params": params}


def test_an_elicitation_is_recorded_then_decided_by_the_observer_then_its_answer_recorded_then_written(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [*opening(), {"op": "expect", "method": "session/prompt"}, elicit("e1", FORM), update(chunk("ok")), end_turn()]
    )
    recorder = Asking(ElicitationReply.accept({"branch": "main", "force": False}))
    client = start(make_client, agent, recorder, features=ClientFeatures(elicitation=True))
    client.new_session("/")
    result = client.prompt("s1", "hi")
    client.close()

    assert result.text == "ok"
    (asked,) = recorder.of("elicitation")
    assert (asked.session_id, asked.mode, asked.message, asked.request_id) == ("s1", "form", "Which branch?", "e1")
    assert asked.requested_schema == FORM["requestedSchema"]
    assert (asked.reply, asked.decided_by) == (ElicitationReply.accept({"branch": "main", "force": False}), "observer")
    order = events(recorder)
    at = order.index("message:elicitation")
    assert order[at : at + 3] == ["message:elicitation", "elicitation", "send:None"]
    (message,) = [m for m in recorder.of("message") if m.kind == MessageKind.ELICITATION]
    assert message.method == "elicitation/create" and message.id == "e1"
    (sent,) = [m for m in recorder.of("send") if m.id == "e1"]
    assert sent.decided_by == "observer"  # who decided travels with the answer, so the journal keeps it
    answer = check_client_line(answer_to(agent, "e1"), "CreateElicitationResponse", STABLE)
    assert answer["result"] == {"action": "accept", "content": {"branch": "main", "force": False}}


@pytest.mark.parametrize("observer", ["none", "base"])
def test_an_elicitation_nobody_answers_is_declined(
    make_client: MakeClient, scripted: MakeScripted, observer: str
) -> None:
    url = {"sessionId": "s1", "message": "Log in", "mode": "url", "url": "https://x.example/a", "elicitationId": "u1"}
    agent = scripted(during_new_session(elicit(7, FORM), elicit(8, url)))
    recorder = Recorder() if observer == "none" else Asking(None)
    client = start(make_client, agent, recorder, features=ClientFeatures(elicitation=True))
    client.new_session("/")
    client.close()
    for request_id in (7, 8):
        answer = check_client_line(answer_to(agent, request_id), "CreateElicitationResponse", STABLE)
        assert answer["result"] == {"action": "decline"}
    if observer == "base":
        assert [(r.reply, r.decided_by) for r in recorder.of("elicitation")] == [
            (ElicitationReply.decline(), "default-decline")
        ] * 2
    answers = [m.decided_by for m in recorder.of("send") if m.id in (7, 8)]
    assert answers == ["default-decline", "default-decline"]


def test_without_the_elicitation_feature_an_elicitation_is_answered_method_not_found(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted([*opening(), {"op": "expect", "method": "session/prompt"}, elicit("e1", FORM), end_turn()])
    recorder = Asking(ElicitationReply.accept({"branch": "main"}))
    client = start(make_client, agent, recorder)
    client.new_session("/")
    client.prompt("s1", "hi")
    client.close()
    assert recorder.of("elicitation") == []
    assert json.loads(answer_to(agent, "e1"))["error"]["code"] == -32601


def test_a_url_elicitation_goes_to_the_observer_and_is_never_opened(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    url = {
        "sessionId": "s1",
        "message": "Log in",
        "mode": "url",
        "url": "https://login.example/x",
        "elicitationId": "u1",
    }
    agent = scripted([*opening(), {"op": "expect", "method": "session/prompt"}, elicit("e1", url), end_turn()])
    recorder = Asking(ElicitationReply.cancel())
    client = start(make_client, agent, recorder, features=ClientFeatures(elicitation=True))
    client.new_session("/")
    client.prompt("s1", "hi")
    client.close()
    (asked,) = recorder.of("elicitation")
    assert (asked.mode, asked.url, asked.elicitation_id, asked.requested_schema) == (
        "url",
        "https://login.example/x",
        "u1",
        None,
    )
    assert check_client_line(answer_to(agent, "e1"), "CreateElicitationResponse", STABLE)["result"] == {
        "action": "cancel"
    }


@pytest.mark.parametrize(
    "params",
    [
        {"message": "no scope", "mode": "form", "requestedSchema": {"type": "object"}},
        {"sessionId": "s1", "message": "no schema", "mode": "form"},
        {"sessionId": "s1", "message": "no url", "mode": "url", "elicitationId": "u1"},
        {"sessionId": "s1", "mode": "form", "requestedSchema": {}},
    ],
    ids=["no-scope", "form-without-schema", "url-without-url", "no-message"],
)
def test_an_elicitation_that_breaks_the_schema_is_answered_invalid_params_and_never_asked(
    make_client: MakeClient, scripted: MakeScripted, params: dict[str, Any]
) -> None:
    agent = scripted(during_new_session(elicit(3, params)))
    recorder = Asking(ElicitationReply.accept({}))
    client = start(make_client, agent, recorder, features=ClientFeatures(elicitation=True))
    client.new_session("/")
    client.close()
    assert recorder.of("elicitation") == []
    assert json.loads(answer_to(agent, 3))["error"]["code"] == -32602
    assert [m.kind for m in recorder.of("message") if m.method == "elicitation/create"] == [MessageKind.INVALID_REQUEST]


# -- meta on every request --------------------------------------------------------------------------------------


def test_close_delete_list_and_logout_carry_meta(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/list"},
            {"op": "reply", "result": {"sessions": []}},
            {"op": "expect", "method": "session/close"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "session/delete"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "logout"},
            {"op": "reply", "result": {}},
        ]
    )
    client = start(make_client, agent)
    client.new_session(tmp_path)
    client.list_sessions(tmp_path, meta={"m": "list"})
    client.close_session("s1", meta={"m": "close"})
    client.delete_session("s1", meta={"m": "delete", "key": Secret(SECRET)})
    client.logout(meta={"m": "logout"})
    client.close()
    for method, part, value in [
        ("session/list", "ListSessionsRequest", {"m": "list"}),
        ("session/close", "CloseSessionRequest", {"m": "close"}),
        ("session/delete", "DeleteSessionRequest", {"m": "delete", "key": SECRET}),
        ("logout", "LogoutRequest", {"m": "logout"}),
    ]:
        assert check_client_line(line_of(agent, method), part, STABLE)["params"]["_meta"] == value


def test_notify_sends_an_extension_notification_recorded_before_written_secrets_redacted_in_the_journal(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *opening()[:2],
            {"op": "expect", "method": "_vendor/note"},
            {"op": "expect", "method": "_vendor/ping"},
            {"op": "reply", "result": {"seen": True}},
        ]
    )
    journal_path = tmp_path / "journal.jsonl"
    journal = tinyacp.JsonlJournal(journal_path)
    recorder = Journaled(journal)
    client = start(make_client, agent, recorder, epoch=journal.begin_epoch())
    assert client.notify("_vendor/note", {"token": Secret(SECRET), "n": [1, 2]}) is None
    assert client.request("_vendor/ping") == {"seen": True}
    with pytest.raises(UsageError, match=r"use cancel\(\)"):
        client.notify("session/cancel", {"sessionId": "s1"})
    client.close()
    journal.close()

    note = json.loads(line_of(agent, "_vendor/note"))
    assert note == {"jsonrpc": "2.0", "method": "_vendor/note", "params": {"token": SECRET, "n": [1, 2]}}
    assert not errors("Client", note, UNSTABLE)
    assert agent.methods()[1:] == ["_vendor/note", "_vendor/ping"]
    assert events(recorder)[-3:] == ["send:_vendor/note", "send:_vendor/ping", "message:response"]
    assert SECRET.encode() not in journal_path.read_bytes()


def test_cancel_carries_meta(make_client: MakeClient, scripted: MakeScripted) -> None:
    agent = scripted([*opening(), {"op": "expect", "method": "session/cancel"}])
    client = start(make_client, agent)
    client.new_session("/")
    client.cancel("s1", meta={"reason": "user"})
    wait_for(lambda: "session/cancel" in agent.methods(), what="the cancel reached the agent")
    client.close()
    cancel = check_client_line(line_of(agent, "session/cancel"), "CancelNotification", STABLE)
    assert cancel["params"] == {"sessionId": "s1", "_meta": {"reason": "user"}}


def test_an_elicitation_after_the_turn_was_cancelled_is_answered_cancel_without_asking(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(child_asks_after_the_cancel(elicit("e1", {**FORM, "sessionId": "child-1"})))
    recorder = Asking(ElicitationReply.accept({"branch": "main"}))
    client = start(make_client, agent, recorder, features=EVERYTHING)
    client.new_session("/")
    result = client.prompt("s1", "hi", timeout=1.0)
    client.close()
    assert result.cancelled
    assert recorder.of("elicitation") == []
    assert check_client_line(answer_to(agent, "e1"), "CreateElicitationResponse", STABLE)["result"] == {
        "action": "cancel"
    }


@pytest.mark.parametrize("failure", ["raises", "wrong-type"])
def test_an_observer_that_fails_on_an_elicitation_stops_the_client_and_no_answer_is_written(
    make_client: MakeClient, scripted: MakeScripted, failure: str
) -> None:
    class Failing(Asking):
        def on_elicitation(self, request: ElicitationRequest) -> Any:
            super().on_elicitation(request)
            if failure == "raises":
                raise OSError("disk full")
            return "yes"

    agent = scripted(during_new_session(elicit("e1", FORM)))
    recorder = Failing()
    client = start(make_client, agent, recorder, features=ClientFeatures(elicitation=True))
    with pytest.raises(tinyacp.ObserverError, match="disk full" if failure == "raises" else "ElicitationReply"):
        client.new_session("/")
    assert client.closed
    assert [line for line in lines(agent) if b'"e1"' in line] == []
    assert recorder.of("send")[-1].method == "session/new"


def test_an_elicitation_and_its_answer_are_in_the_journal_in_order(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(during_new_session(elicit("e1", FORM)))
    journal_path = tmp_path / "journal.jsonl"
    journal = tinyacp.JsonlJournal(journal_path)
    client = start(
        make_client,
        agent,
        Journaled(journal),
        epoch=journal.begin_epoch(),
        features=ClientFeatures(elicitation=True),
    )
    client.new_session("/")
    client.close()
    journal.close()
    records = [r for r in tinyacp.JsonlJournal.read(journal_path) if r.get("type") == "line"]
    kinds = [(r["dir"], r["kind"], r.get("method")) for r in records]
    at = kinds.index(("in", "elicitation", "elicitation/create"))
    assert kinds[at + 1] == ("out", "response", None)
    assert json.loads(records[at + 1]["line"])["result"] == {"action": "decline"}
    assert records[at + 1]["decided_by"] == "default-decline"  # who decided, kept with the answer


def test_the_asyncio_client_awaits_a_coroutine_on_elicitation_and_the_sync_client_refuses_it(
    make_client: MakeClient, scripted: MakeScripted, client_kind: str
) -> None:
    class Awaiting(Recorder):
        async def on_elicitation(self, request: ElicitationRequest) -> ElicitationReply:
            self._add("elicitation", request)
            return ElicitationReply.accept({"branch": "dev"})

    agent = scripted(during_new_session(elicit("e1", FORM)))
    recorder = Awaiting()
    client = start(make_client, agent, recorder, features=ClientFeatures(elicitation=True))
    if client_kind == "sync":
        with pytest.raises(tinyacp.ObserverError, match="awaitable"):
            client.new_session("/")
        return
    client.new_session("/")
    client.close()
    assert json.loads(answer_to(agent, "e1"))["result"] == {"action": "accept", "content": {"branch": "dev"}}
