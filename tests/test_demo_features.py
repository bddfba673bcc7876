"""The newer parts of ACP the demo agent speaks, driven over its stdio: each honours the client's opt-in as the
maintained adapters do, each is reached from a prompt word (``with-notice``, ...) or ``--with``.

Every line the agent writes is checked against the vendored schemas that know it (see ``helpers.agent_pipe``): the
TypeScript SDK 2.4.0's unstable schema knows every line, and a line that the stable 2.4.0 schema or release
v1.21 knows must fit those too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.agent_pipe import AgentPipe, Message, Spawn, assert_end_turn, kinds, message_text, selecting, spawning

ALL_OPT_INS: Message = {
    "session": {"notices": {}, "compaction": {}},
    "plan": {},
    "subagents": {},
    "elicitation": {"form": {}, "url": {}},
}
FALLBACK = "demo-large is overloaded; this turn uses demo-small."


@pytest.fixture
def spawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spawn]:
    yield from spawning(tmp_path_factory)


def _turn(agent: AgentPipe, session_id: str, text: str) -> tuple[list[Message], Message, list[Message]]:
    """One prompt, every permission allowed: (the updates, the response, the permission requests)."""
    asked: list[Message] = []
    updates, response = agent.read_turn(agent.prompt(session_id, text), selecting("allow", asked, agent))
    return updates, response, asked


# -- notices -------------------------------------------------------------------------------------------------


def test_a_notice_reaches_a_client_that_opted_in_as_a_notice_and_stays_out_of_the_reply(
    spawn: Spawn, tmp_path: Path
) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"session": {"notices": {}}})
    updates, response, _ = _turn(agent, session_id, "with-notice hello")
    assert_end_turn(response)
    assert updates[0] == {
        "sessionUpdate": "notice",
        "severity": "warning",
        "title": "Model fallback",
        "description": FALLBACK,
    }
    assert "Model fallback" not in message_text(updates)
    assert message_text(updates).startswith("You said: with-notice hello\n")
    assert agent.close() == 0


def test_without_the_opt_in_the_notice_is_written_into_the_reply_as_the_adapters_do(
    spawn: Spawn, tmp_path: Path
) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    updates, response, _ = _turn(agent, session_id, "with-notice hello")
    assert_end_turn(response)
    assert "notice" not in kinds(updates)
    assert updates[0] == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": f"**Model fallback:** {FALLBACK}\n\n"},
    }
    assert message_text(updates).startswith(f"**Model fallback:** {FALLBACK}\n\nYou said: with-notice hello\n")
    assert agent.close() == 0


# -- compaction ----------------------------------------------------------------------------------------------


def test_compaction_for_a_client_that_opted_in_sums_up_and_frees_the_context(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"session": {"compaction": {}}})
    first, _, _ = _turn(agent, session_id, "a first prompt that fills the context " * 20)
    used_before = first[-1]["used"]
    updates, response, _ = _turn(agent, session_id, "with-compaction go on")
    assert_end_turn(response)
    assert kinds(updates)[:4] == [
        "compaction_update",
        "compaction_summary_chunk",
        "compaction_summary_chunk",
        "compaction_update",
    ]
    started, *chunks, done = updates[:4]
    assert started == {"sessionUpdate": "compaction_update", "compactionId": "compaction-1", "status": "in_progress"}
    summary = "".join(chunk["content"]["text"] for chunk in chunks)
    assert summary.startswith(f"1 earlier turn in {tmp_path}. The last prompt was: a first prompt")
    assert {chunk["compactionId"] for chunk in chunks} == {"compaction-1"}
    assert done == {
        "sessionUpdate": "compaction_update",
        "compactionId": "compaction-1",
        "status": "completed",
        "summary": [{"type": "text", "text": summary}],
    }
    assert "tool_call" not in kinds(updates[:4])
    assert updates[-1]["sessionUpdate"] == "usage_update"
    assert updates[-1]["used"] < used_before
    assert agent.close() == 0


def test_without_the_opt_in_compaction_is_an_ordinary_tool_call(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    updates, response, asked = _turn(agent, session_id, "with-compaction")
    assert_end_turn(response)
    assert not {"compaction_update", "compaction_summary_chunk"} & set(kinds(updates))
    call, done = updates[:2]
    assert call == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_1",
        "title": "Compact the conversation",
        "name": "Compact",
        "kind": "other",
        "status": "in_progress",
    }
    assert (done["toolCallId"], done["status"]) == ("call_1", "completed")
    assert done["content"][0]["content"]["text"] == f"0 earlier turns in {tmp_path}."
    assert [request["params"]["toolCall"]["name"] for request in asked] == ["Read"]  # compacting asks nothing
    assert agent.close() == 0


# -- plan operations -----------------------------------------------------------------------------------------


def test_plan_operations_for_a_client_that_opted_in_replace_the_legacy_plan(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"plan": {}})
    plans: list[list[Message]] = []
    for _ in range(2):
        updates, response, _ = _turn(agent, session_id, "hello")
        assert_end_turn(response)
        assert "plan" not in kinds(updates)
        plans.append([u for u in updates if u["sessionUpdate"] in ("plan_update", "plan_removed")])
    for number, plan in enumerate(plans, start=1):
        assert kinds(plan) == ["plan_update", "plan_update", "plan_update", "plan_removed"]
        assert {update["plan"]["planId"] for update in plan[:3]} == {f"plan-{number}"}
        assert {update["plan"]["type"] for update in plan[:3]} == {"items"}
        assert [[entry["status"] for entry in update["plan"]["entries"]] for update in plan[:3]] == [
            ["pending", "pending"],
            ["completed", "in_progress"],
            ["completed", "completed"],
        ]
        assert plan[3] == {"sessionUpdate": "plan_removed", "planId": f"plan-{number}"}
    assert agent.close() == 0


def test_a_rejected_turn_still_removes_its_plan(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"plan": {}})
    updates, response = agent.read_turn(agent.prompt(session_id, "hello"), selecting("reject", [], agent))
    assert_end_turn(response)
    assert [u["sessionUpdate"] for u in updates if u["sessionUpdate"].startswith("plan")] == [
        "plan_update",
        "plan_removed",
    ]
    assert agent.close() == 0


# -- tool names ----------------------------------------------------------------------------------------------


def test_tool_calls_carry_their_tool_name_and_a_bash_call_asks_even_in_auto_mode(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    agent.request("session/set_mode", {"sessionId": session_id, "modeId": "auto"})
    while "method" in agent.read():  # the mode and options updates, then the answer
        pass
    updates, response, asked = _turn(agent, session_id, "hello")
    assert_end_turn(response)
    assert asked == []  # a read in mode auto asks nothing
    assert [u["name"] for u in updates if u["sessionUpdate"] == "tool_call"] == ["Read"]

    updates, response, asked = _turn(agent, session_id, "with-bash hello")
    assert_end_turn(response)
    (call,) = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert (call["name"], call["kind"], call["title"]) == ("Bash", "execute", f"ls -l {tmp_path}")
    (request,) = asked
    assert request["params"]["toolCall"] == {
        "toolCallId": call["toolCallId"],
        "title": f"ls -l {tmp_path}",
        "name": "Bash",
        "kind": "execute",
        "status": "pending",
    }
    assert agent.close() == 0


# -- subagents -----------------------------------------------------------------------------------------------


def _session_of(message: Message) -> str:
    session_id: str = message["params"]["sessionId"]
    return session_id


def test_a_child_session_is_announced_before_its_traffic_and_asks_its_own_permission(
    spawn: Spawn, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    agent = spawn()
    parent = agent.start_session(tmp_path, {"subagents": {}})
    traffic, response = agent.read_traffic(agent.prompt(parent, "with-subagent hello"), selecting("allow", [], agent))
    assert_end_turn(response)
    child = f"{parent}.sub-1"
    sessions = [_session_of(message) for message in traffic]
    assert set(sessions) == {parent, child}
    announce_at = next(
        i for i, m in enumerate(traffic) if m["params"].get("update", {}).get("sessionUpdate") == "subagent_update"
    )
    assert sessions.index(child) > announce_at
    assert traffic[announce_at]["params"] == {
        "sessionId": parent,
        "update": {
            "sessionUpdate": "subagent_update",
            "sessionId": child,
            "title": "File reader",
            "description": f"Lists the files in {tmp_path}",
            "state": {"state": "running"},
        },
    }
    child_traffic = [
        (m.get("method"), m["params"].get("update", {}).get("sessionUpdate"))
        for m in traffic
        if _session_of(m) == child
    ]
    assert child_traffic == [
        ("session/update", "agent_thought_chunk"),
        ("session/update", "tool_call"),
        ("session/request_permission", None),
        ("session/update", "tool_call_update"),
        ("session/update", "tool_call_update"),
        ("session/update", "agent_message_chunk"),
    ]
    parent_updates = [
        m["params"]["update"] for m in traffic if m.get("method") == "session/update" and _session_of(m) == parent
    ]
    messages = [u for u in parent_updates if u["sessionUpdate"].startswith("session_message")]
    assert messages[0] == {
        "sessionUpdate": "session_message",
        "messageId": "msg-1",
        "senderSessionId": parent,
        "recipientSessionId": child,
        "content": [{"type": "text", "text": f"List the files in {tmp_path}."}],
    }
    assert messages[1] == {
        "sessionUpdate": "session_message",
        "messageId": "msg-2",
        "senderSessionId": child,
        "recipientSessionId": parent,
    }
    assert messages[2]["messageId"] == "msg-2"
    assert messages[2]["content"]["text"].startswith(f"I read 1 file in {tmp_path}:")
    idle = [u for u in parent_updates if u["sessionUpdate"] == "subagent_update"][-1]
    assert idle == {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "state": {"state": "idle", "stopReason": "end_turn"},
    }
    reply = message_text(parent_updates)
    assert reply.startswith('You said: with-subagent hello\nMy helper "File reader" did the reading.\nI read 1 file')
    assert "tool_call" not in kinds(parent_updates)  # the reading was the child's
    assert agent.close() == 0


def test_a_child_whose_permission_is_rejected_reports_it(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    parent = agent.start_session(tmp_path, {"subagents": {}})
    asked: list[Message] = []
    updates, response = agent.read_turn(agent.prompt(parent, "with-subagent"), selecting("reject", asked, agent))
    assert_end_turn(response)
    assert [_session_of(request) for request in asked] == [f"{parent}.sub-1"]
    assert [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update"] == ["failed"]
    assert message_text(updates).count(f"I was not allowed to read the files in {tmp_path}.") == 2  # child, parent
    assert agent.close() == 0


def test_cancelling_the_parent_cancels_the_child_at_work(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    parent = agent.start_session(tmp_path, {"subagents": {}})

    def cancel_the_parent(request: Message) -> None:
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": parent}})

    traffic, response = agent.read_traffic(agent.prompt(parent, "with-subagent"), cancel_the_parent)
    assert response["result"] == {"stopReason": "cancelled"}
    failed, idle = traffic[-2:]
    assert _session_of(failed) == f"{parent}.sub-1"
    assert failed["params"]["update"] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "failed",
    }
    assert idle["params"] == {
        "sessionId": parent,
        "update": {
            "sessionUpdate": "subagent_update",
            "sessionId": f"{parent}.sub-1",
            "state": {"state": "idle", "stopReason": "cancelled"},
        },
    }
    assert agent.close() == 0


def test_without_the_opt_in_there_is_no_child_traffic(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    traffic, response = agent.read_traffic(agent.prompt(session_id, "with-subagent"), selecting("allow", [], agent))
    assert_end_turn(response)
    assert {_session_of(message) for message in traffic} == {session_id}
    updates = [m["params"]["update"] for m in traffic if m.get("method") == "session/update"]
    assert not {"subagent_update", "session_message", "session_message_chunk"} & set(kinds(updates))
    assert agent.close() == 0


# -- elicitation ---------------------------------------------------------------------------------------------


def _answering(agent: AgentPipe, answer: Message, seen: list[Message]) -> Callable[[Message], None]:
    """An on_request handler: the elicitation gets ``answer`` (a result, or an error with ``error``), every
    permission is allowed."""

    def handle(request: Message) -> None:
        if request["method"] == "session/request_permission":
            agent.answer(request, {"outcome": {"outcome": "selected", "optionId": "allow"}})
            return
        assert request["method"] == "elicitation/create"
        seen.append(request)
        if "error" in answer:
            agent.send({"jsonrpc": "2.0", "id": request["id"], **answer})
        else:
            agent.answer(request, answer)

    return handle


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (
            {
                "action": "accept",
                "content": {"name": "Ada", "style": "long", "lines": 3, "detail": 0.25, "sizes": False},
            },
            'You answered: name="Ada", style="long", lines=3, detail=0.25, sizes=false.',
        ),
        (
            {"action": "accept", "content": {"name": "Ada", "style": "short"}},
            'You answered: name="Ada", style="short".',
        ),
        (
            {"action": "accept", "content": {"name": "Ada", "style": "short", "lines": "3"}},
            "Your answer does not fit the form (lines is not a valid integer): I use the defaults.",
        ),
        (
            {"action": "accept", "content": {"name": "Ada", "style": "short", "sizes": 1}},
            "Your answer does not fit the form (sizes is not a valid boolean): I use the defaults.",
        ),
        (
            {"action": "accept", "content": {"style": "short"}},
            "Your answer does not fit the form (name is missing): I use the defaults.",
        ),
        (
            {"action": "accept", "content": {"name": "Ada", "style": "medium"}},
            "Your answer does not fit the form (style is not a valid string): I use the defaults.",
        ),
        ({"action": "decline"}, "You declined the question: I use the defaults."),
        ({"action": "cancel"}, "You dismissed the question: I use the defaults."),
        ({"error": {"code": -32601, "message": "Method not found"}}, "The question got no answer: I use the defaults."),
    ],
)
def test_a_form_question_for_a_client_that_takes_forms(
    spawn: Spawn, tmp_path: Path, answer: Message, note: str
) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"elicitation": {"form": {}}})
    seen: list[Message] = []
    updates, response = agent.read_turn(agent.prompt(session_id, "with-question"), _answering(agent, answer, seen))
    assert_end_turn(response)
    (request,) = seen
    params = request["params"]
    assert (params["sessionId"], params["mode"], params["message"]) == (
        session_id,
        "form",
        "How should I summarise the files?",
    )
    schema = params["requestedSchema"]
    assert {name: spec["type"] for name, spec in schema["properties"].items()} == {
        "name": "string",
        "style": "string",
        "lines": "integer",
        "detail": "number",
        "sizes": "boolean",
    }
    assert schema["required"] == ["name", "style"]
    assert message_text(updates).startswith(f"You said: with-question\n{note}\n")
    assert agent.close() == 0


def test_no_form_question_reaches_a_client_that_did_not_opt_in(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"elicitation": {"url": {}}})
    updates, response, asked = _turn(agent, session_id, "with-question")
    assert_end_turn(response)
    assert len(asked) == 1  # the permission only
    assert "this client takes no forms" in message_text(updates)
    assert agent.close() == 0


def test_cancelling_the_turn_while_the_question_is_open(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"elicitation": {"form": {}}})

    def cancel(request: Message) -> None:
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})

    updates, response = agent.read_turn(agent.prompt(session_id, "with-question"), cancel)
    assert response["result"] == {"stopReason": "cancelled"}
    assert "tool_call" not in kinds(updates)
    assert agent.close() == 0


@pytest.mark.parametrize(("action", "note"), [("accept", "You signed in."), ("decline", "You did not sign in.")])
def test_a_url_question_for_a_client_that_takes_urls(spawn: Spawn, tmp_path: Path, action: str, note: str) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"elicitation": {"url": {}}})
    seen: list[Message] = []
    traffic, response = agent.read_traffic(
        agent.prompt(session_id, "with-login"), _answering(agent, {"action": action}, seen)
    )
    assert_end_turn(response)
    (request,) = seen
    assert request["params"] == {
        "sessionId": session_id,
        "mode": "url",
        "message": "Sign in to the demo service.",
        "elicitationId": "login-1",
        "url": f"https://example.com/tinyacp-demo/login?session={session_id}",
    }
    completions = [m for m in traffic if m.get("method") == "elicitation/complete"]
    assert completions == (
        [{"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": "login-1"}}]
        if action == "accept"
        else []
    )
    updates = [m["params"]["update"] for m in traffic if m.get("method") == "session/update"]
    assert f"\n{note}\n" in message_text(updates)
    assert agent.close() == 0


def test_a_client_that_takes_no_urls_is_shown_the_link_in_the_reply(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path, {"elicitation": {"form": {}}})
    updates, response, asked = _turn(agent, session_id, "with-login")
    assert_end_turn(response)
    assert [request["method"] for request in asked] == ["session/request_permission"]
    url = f"https://example.com/tinyacp-demo/login?session={session_id}"
    assert f"Sign in at {url} (this client opens no links).\n" in message_text(updates)
    assert agent.close() == 0


# -- all of it at once, from the flag ------------------------------------------------------------------------


def test_the_with_flag_adds_its_steps_to_every_turn(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn("--with", "notice,compaction,subagent", "--chunks", "1")
    session_id = agent.start_session(tmp_path, ALL_OPT_INS)
    for child in (1, 2):
        updates, response, asked = _turn(agent, session_id, "hello")
        assert_end_turn(response)
        assert kinds(updates)[:2] == ["notice", "compaction_update"]
        assert "subagent_update" in kinds(updates)
        assert [_session_of(request) for request in asked] == [f"{session_id}.sub-{child}"]
    assert agent.close() == 0


# -- fork, system prompt -------------------------------------------------------------------------------------


def test_a_fork_carries_the_history_and_leaves_the_source_untouched(spawn: Spawn, tmp_path: Path) -> None:
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    first = spawn("--state-dir", str(state))
    source = first.start_session(work)
    _turn(first, source, "remember this")
    override = {"mode": "override", "content": [{"type": "text", "text": "be terse"}]}
    first.request("session/fork", {"sessionId": source, "cwd": str(work), "systemPrompt": override})
    forked = first.read()["result"]
    assert forked["sessionId"] not in (source, None)
    assert forked["modes"]["currentModeId"] == "default"
    fork = forked["sessionId"]
    updates, response, _ = _turn(first, fork, "and this")
    assert_end_turn(response)
    assert message_text(updates).startswith("System prompt (override): be terse\nYou said: and this\n")
    refused: list[tuple[Message, int]] = [
        ({"sessionId": "demo-404", "cwd": str(work)}, -32002),
        ({"sessionId": source, "cwd": "relative"}, -32602),
        ({"sessionId": source, "cwd": str(work), "systemPrompt": {"mode": "replace", "content": []}}, -32602),
    ]
    for bad, code in refused:
        first.request("session/fork", bad)
        assert first.read()["error"]["code"] == code
    assert first.close() == 0

    second = spawn("--state-dir", str(state))
    second.initialize()

    def replayed(session_id: str) -> list[str]:
        second.request("session/load", {"sessionId": session_id, "cwd": str(work), "mcpServers": []})
        texts = []
        while "method" in (message := second.read()):
            texts.append(message["params"]["update"]["content"]["text"])
        assert "result" in message
        return texts

    assert [text.partition("\n")[0] for text in replayed(source)] == ["remember this", "You said: remember this"]
    assert [text.partition("\n")[0] for text in replayed(fork)] == [
        "remember this",
        "You said: remember this",
        "and this",
        "System prompt (override): be terse",
    ]
    assert second.close() == 0


def test_a_new_session_takes_an_override_system_prompt(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    result = agent.initialize()
    assert result["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}
    override = {"mode": "override", "content": [{"type": "text", "text": "only French"}]}
    agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": override})
    session_id = agent.read()["result"]["sessionId"]
    updates, _, _ = _turn(agent, session_id, "hi")
    assert message_text(updates).startswith("System prompt (override): only French\nYou said: hi\n")
    assert agent.close() == 0


# -- unstable and extension methods --------------------------------------------------------------------------


def test_set_title_renames_a_stored_session_and_reports_it_to_an_open_one(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    agent.request("session/set_title", {"sessionId": session_id, "title": "  My work  "})
    info, answer = agent.read(), agent.read()
    assert info["params"]["update"]["sessionUpdate"] == "session_info_update"
    assert info["params"]["update"]["title"] == "My work"
    assert answer["result"] == {"title": "My work"}
    _turn(agent, session_id, "a prompt does not rename it")
    agent.request("session/list", {"cwd": str(tmp_path)})
    assert [s["title"] for s in agent.read()["result"]["sessions"]] == ["My work"]
    for bad, code in [
        ({"sessionId": session_id, "title": " "}, -32602),
        ({"sessionId": session_id}, -32602),
        ({"sessionId": "demo-404", "title": "x"}, -32002),
    ]:
        agent.request("session/set_title", bad)
        assert agent.read()["error"]["code"] == code
    assert agent.close() == 0


def test_providers_can_be_listed_pointed_elsewhere_and_disabled(spawn: Spawn) -> None:
    agent = spawn()
    assert agent.initialize()["agentCapabilities"]["providers"] == {}

    def providers() -> list[Message]:
        agent.request("providers/list", {})
        listed: list[Message] = agent.read()["result"]["providers"]
        return listed

    assert providers() == [
        {
            "providerId": "demo",
            "supported": ["openai", "anthropic"],
            "required": False,
            "current": {"apiType": "openai", "baseUrl": "https://example.com/tinyacp-demo/v1"},
        }
    ]
    gateway = {"providerId": "demo", "apiType": "anthropic", "baseUrl": "http://127.0.0.1:9/v1", "headers": {"x": "y"}}
    agent.request("providers/set", gateway)
    assert agent.read()["result"] == {}
    assert providers()[0]["current"] == {"apiType": "anthropic", "baseUrl": "http://127.0.0.1:9/v1"}
    agent.request("providers/disable", {"providerId": "demo"})
    assert agent.read()["result"] == {}
    assert providers()[0]["current"] is None
    for method, bad in [
        ("providers/set", {"providerId": "other", "apiType": "openai", "baseUrl": "http://x"}),
        ("providers/set", {"providerId": "demo", "apiType": "bedrock", "baseUrl": "http://x"}),
        ("providers/disable", {}),
    ]:
        agent.request(method, bad)
        assert agent.read()["error"]["code"] == -32602
    assert agent.close() == 0


def test_the_extension_method_echoes_and_reports_the_extension_notifications(spawn: Spawn) -> None:
    agent = spawn()
    agent.initialize()
    agent.send({"jsonrpc": "2.0", "method": "_tinyacp/note", "params": {"n": 1}})
    agent.send({"jsonrpc": "2.0", "method": "not/an/extension", "params": {}})
    agent.request("_tinyacp/echo", {"deep": {"list": [1, "two", None]}})
    assert agent.read()["result"] == {
        "params": {"deep": {"list": [1, "two", None]}},
        "notifications": ["_tinyacp/note"],
    }
    agent.request("_tinyacp/unknown", {})
    assert agent.read()["error"]["code"] == -32601
    assert agent.close() == 0
