"""The newer parts of ACP through ``Client`` and ``AsyncClient`` against the demo agent (``tinyacp.demo``), which
honours the client's opt-ins as the maintained adapters do: every test runs with both shells.

The headline: without ``session.notices`` the agent writes its warning into the reply (as Claude's and Codex's
adapters do), with it (the default) the warning is a notice, and the reply holds only the agent's answer.

Every line the client writes in these tests is checked against the vendored schemas of the TypeScript SDK 2.4.0
(the unstable file for the unstable methods and fields), after the test, from what the observer saw written.
"""

from __future__ import annotations

import json
import sys
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import Background, Journaled, MakeClient, MakeScripted, Recorder, chunk, end_turn, wait_for
from helpers.schema import check_every_sent_line
from tinyacp import (
    ClientFeatures,
    CompactionSummaryChunk,
    CompactionUpdate,
    ElicitationReply,
    ElicitationRequest,
    PermissionPolicy,
    PlanItems,
    PlanRemoved,
    PlanUpdate,
    SystemPrompt,
    TransferLimits,
    UpdateKind,
    UsageError,
)

TIMEOUT = 30.0
DEMO = [sys.executable, "-m", "tinyacp.demo"]
EVERYTHING = ClientFeatures(notices=True, compaction=True, plan_operations=True, subagents=True, elicitation=True)
FORMS = ClientFeatures(elicitation=True)


class Answering(Recorder):
    def __init__(self, reply: ElicitationReply | None) -> None:
        super().__init__()
        self.reply = reply

    def on_elicitation(self, request: ElicitationRequest) -> ElicitationReply | None:
        self._add("elicitation", request)
        return self.reply


WATCHED: list[Recorder] = []
"""The observers of this test's clients, whose written lines are checked after it."""


@pytest.fixture(autouse=True)
def every_line_written_fits_the_schema() -> Iterator[None]:
    """After each test (its clients closed), every line its clients wrote is valid against the 2.4.0 schemas."""
    WATCHED.clear()
    yield
    assert WATCHED, "the test made no client through opened() or watched()"
    for recorder in WATCHED:
        assert check_every_sent_line(recorder.events) > 0, "a client wrote nothing"
    WATCHED.clear()


def watched(observer: Recorder | None = None) -> Recorder:
    recorder = observer or Recorder()
    WATCHED.append(recorder)
    return recorder


def opened(
    make_client: MakeClient,
    tmp_path: Path,
    observer: Recorder | None = None,
    command: list[str] = DEMO,
    **options: Any,
) -> Any:
    client = make_client(command=command, observer=watched(observer), timeout=TIMEOUT, **options)
    client.initialize()
    return client, client.new_session(tmp_path)


def test_with_notices_on_by_default_the_warning_is_a_notice_and_not_in_the_reply(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client, session = opened(make_client, tmp_path)
    result = client.prompt(session.id, "with-notice hello")
    client.close()
    assert [notice.title for notice in result.notices] == ["Model fallback"]
    assert result.notices[0].severity == "warning"
    assert "Model fallback" not in result.text
    assert result.text.startswith("You said: with-notice hello")


def test_with_notices_off_the_agent_writes_the_warning_into_the_reply(make_client: MakeClient, tmp_path: Path) -> None:
    client, session = opened(make_client, tmp_path, features=ClientFeatures(notices=False, compaction=False))
    result = client.prompt(session.id, "with-notice hello")
    client.close()
    assert result.notices == ()
    assert result.text.startswith("**Model fallback:** ")


def test_a_childs_work_is_recorded_under_its_session_and_listed_not_written_into_the_parents_reply(
    make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    recorder = Recorder()
    client, session = opened(
        make_client, tmp_path, recorder, features=EVERYTHING, policy=PermissionPolicy(allow_all=True)
    )
    result = client.prompt(session.id, "with-subagent hello")
    client.close()
    child = f"{session.id}.sub-1"
    assert [(s.session_id, s.title) for s in result.subagents] == [(child, "File reader")]
    assert result.subagents[0].state == {"state": "idle", "stopReason": "end_turn"}  # its latest state
    (asked,) = recorder.of("permission_decision")
    assert (asked.session_id, asked.parent_session_id, asked.verdict) == (child, session.id, "allowed_once")
    chunks = {
        session_id: [u for u in recorder.updates if u.session_id == session_id and u.kind == "agent_message_chunk"]
        for session_id in (session.id, child)
    }
    assert chunks[child], "the child wrote its own reply, under its own session"
    assert result.text == "".join(u.text or "" for u in chunks[session.id])  # the parent's chunks only
    assert result.chunk_count == len(chunks[session.id])
    assert result.text.startswith('You said: with-subagent hello\nMy helper "File reader" did the reading.')


def test_deny_tools_rejects_the_demos_bash_even_with_allow_all(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    policy = PermissionPolicy(allow_all=True, deny_tools=["Bash"])
    client, session = opened(make_client, tmp_path, recorder, policy=policy)
    client.prompt(session.id, "with-bash")
    client.close()
    (asked,) = recorder.of("permission_decision")
    assert (asked.tool_call.name, asked.verdict, str(asked.decided_by)) == ("Bash", "rejected", "policy")
    assert [u.tool_name for u in recorder.updates if u.kind == tinyacp.UpdateKind.TOOL_CALL] == ["Bash"]


@pytest.mark.parametrize(
    ("prompt", "name", "verdict"),
    [("hello", "Read", "allowed_once"), ("with-bash", "Bash", "rejected")],
    ids=["read-allowed", "bash-not-listed"],
)
def test_tools_allows_the_demos_tool_by_its_name_only(
    make_client: MakeClient, tmp_path: Path, prompt: str, name: str, verdict: str
) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder, policy=PermissionPolicy(tools=["Read", "Grep"]))
    client.prompt(session.id, prompt)
    client.close()
    (asked,) = recorder.of("permission_decision")
    assert (asked.tool_call.name, asked.verdict) == (name, verdict)
    (answer,) = [m for m in recorder.of("send") if m.method is None and m.id == asked.request_id]
    outcome = json.loads(answer.raw)["result"]["outcome"]
    assert outcome == {"outcome": "selected", "optionId": "allow" if verdict == "allowed_once" else "reject"}
    # the decision is recorded before the answer is written
    names = [event for event, value in recorder.events if value is asked or value is answer]
    assert names == ["permission_request", "permission_decision", "send"]


def asked_once(
    make_client: MakeClient,
    tmp_path: Path,
    recorder: Answering,
    prompt: str,
    features: ClientFeatures = FORMS,
) -> tuple[Answering, tinyacp.Session, tinyacp.PromptResult]:
    """One turn of the demo that asks the user a question, which ``recorder`` answers."""
    client, session = opened(
        make_client, tmp_path, recorder, features=features, policy=PermissionPolicy(allow_all=True)
    )
    result = client.prompt(session.id, prompt)
    client.close()
    return recorder, session, result


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (ElicitationReply.accept({"name": "Ada", "style": "short"}), "Ada"),
        (None, "You declined the question"),
        (ElicitationReply.cancel(), "You dismissed the question"),
    ],
    ids=["accept", "no-reply", "cancel"],
)
def test_the_demos_form_question_is_answered_by_on_elicitation(
    make_client: MakeClient, tmp_path: Path, reply: ElicitationReply | None, said: str
) -> None:
    recorder, session, result = asked_once(make_client, tmp_path, Answering(reply), "with-question")
    (asked,) = recorder.of("elicitation")
    assert (asked.mode, asked.message, asked.session_id) == ("form", "How should I summarise the files?", session.id)
    assert asked.requested_schema is not None and asked.requested_schema["required"] == ["name", "style"]
    assert said in result.text


def test_fork_then_extension_calls_on_the_demo(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder)
    client.prompt(session.id, "remember the word umbrella")
    fork = client.fork_session(session.id, tmp_path)
    assert fork.id != session.id
    client.notify("_tinyacp/ping", {"n": 1})
    echoed = client.request("_tinyacp/echo", {"token": tinyacp.Secret("sk-demo-77"), "n": [1, 2]})
    client.close()
    assert echoed["params"] == {"token": "sk-demo-77", "n": [1, 2]}
    assert "_tinyacp/ping" in echoed["notifications"]
    sent = [message for message in recorder.of("send") if message.method == "_tinyacp/echo"]
    assert [json.loads(message.redacted())["params"]["token"] for message in sent] == ["<secret>"]


def sent(recorder: Recorder, method: str) -> list[dict[str, Any]]:
    """The lines the client wrote with this method, parsed, in order."""
    return [json.loads(message.raw) for message in recorder.of("send") if message.method == method]


# -- compaction and plans ---------------------------------------------------------------------------------------


def test_the_demos_compaction_arrives_typed_in_order_before_the_plan_and_the_reply(
    make_client: MakeClient, tmp_path: Path
) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder)  # compaction is on by default
    result = client.prompt(session.id, "with-compaction hello")
    client.close()
    kinds = [u.kind for u in recorder.updates]
    compaction = [
        u.payload for u in recorder.updates if isinstance(u.payload, CompactionUpdate | CompactionSummaryChunk)
    ]
    assert [u.kind for u in compaction] == [
        UpdateKind.COMPACTION_UPDATE,
        UpdateKind.COMPACTION_SUMMARY_CHUNK,
        UpdateKind.COMPACTION_SUMMARY_CHUNK,
        UpdateKind.COMPACTION_UPDATE,
    ]
    first, *pieces, last = compaction
    assert isinstance(first, CompactionUpdate) and isinstance(last, CompactionUpdate)
    assert (first.status, last.status) == ("in_progress", "completed")
    assert {u.compaction_id for u in compaction} == {first.compaction_id}
    summary = "".join(piece.content.text or "" for piece in pieces if isinstance(piece, CompactionSummaryChunk))
    assert last.summary == [{"type": "text", "text": summary}]
    assert str(tmp_path) in summary
    # recorded as received: the compaction, then the plan, then the reply
    assert kinds.index(UpdateKind.COMPACTION_UPDATE) == 0
    assert len(kinds) - 1 - kinds[::-1].index(UpdateKind.COMPACTION_UPDATE) < kinds.index(UpdateKind.PLAN)
    assert kinds.index(UpdateKind.PLAN) < kinds.index(UpdateKind.AGENT_MESSAGE_CHUNK)
    assert [u.seq for u in recorder.updates] == sorted(u.seq for u in recorder.updates)
    assert result.text.startswith("You said: with-compaction hello")
    assert summary not in result.text


def test_without_the_compaction_opt_in_the_demo_compacts_with_a_tool_call(
    make_client: MakeClient, tmp_path: Path
) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder, features=ClientFeatures(compaction=False))
    client.prompt(session.id, "with-compaction hello")
    client.close()
    kinds = {u.kind for u in recorder.updates}
    assert UpdateKind.COMPACTION_UPDATE not in kinds and UpdateKind.COMPACTION_SUMMARY_CHUNK not in kinds
    assert next(u.tool_name for u in recorder.updates if u.kind == UpdateKind.TOOL_CALL) == "Compact"
    assert "compaction" not in sent(recorder, "initialize")[0]["params"]["clientCapabilities"]["session"]


def test_with_plan_operations_the_demos_plan_is_updated_by_id_then_removed(
    make_client: MakeClient, tmp_path: Path
) -> None:
    recorder = Recorder()
    features = ClientFeatures(plan_operations=True)
    client, session = opened(
        make_client, tmp_path, recorder, features=features, policy=PermissionPolicy(allow_all=True)
    )
    client.prompt(session.id, "hello")
    client.close()
    plans = [
        u for u in recorder.updates if u.kind in (UpdateKind.PLAN, UpdateKind.PLAN_UPDATE, UpdateKind.PLAN_REMOVED)
    ]
    assert [u.kind for u in plans] == [UpdateKind.PLAN_UPDATE] * 3 + [UpdateKind.PLAN_REMOVED]
    *updates, removed = [u.payload for u in plans]
    assert all(isinstance(p, PlanUpdate) for p in updates) and isinstance(removed, PlanRemoved)
    assert {p.plan_id for p in updates if isinstance(p, PlanUpdate)} == {removed.plan_id}
    plans_sent = [p.plan for p in updates if isinstance(p, PlanUpdate)]
    assert all(isinstance(plan, PlanItems) for plan in plans_sent)
    statuses = [[e.status for e in plan.entries] for plan in plans_sent if isinstance(plan, PlanItems)]
    assert statuses == [["pending", "pending"], ["completed", "in_progress"], ["completed", "completed"]]
    # the removal is the plan's last word, after the reply
    kinds = [u.kind for u in recorder.updates]
    assert kinds.index(UpdateKind.PLAN_REMOVED) > len(kinds) - 1 - kinds[::-1].index(UpdateKind.AGENT_MESSAGE_CHUNK)
    assert sent(recorder, "initialize")[0]["params"]["clientCapabilities"]["plan"] == {}


def test_without_plan_operations_the_demo_sends_the_legacy_plan(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder, policy=PermissionPolicy(allow_all=True))
    client.prompt(session.id, "hello")
    client.close()
    plans = [
        u for u in recorder.updates if u.kind in (UpdateKind.PLAN, UpdateKind.PLAN_UPDATE, UpdateKind.PLAN_REMOVED)
    ]
    assert [u.kind for u in plans] == [UpdateKind.PLAN] * 3
    assert "plan" not in sent(recorder, "initialize")[0]["params"]["clientCapabilities"]


# -- the system prompt's override mode ---------------------------------------------------------------------------


def test_an_override_system_prompt_is_accepted_by_the_demo_which_advertises_mode_override(
    make_client: MakeClient, tmp_path: Path
) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder)
    result = client.prompt(session.id, "hello")
    overridden = client.new_session(tmp_path, system_prompt=SystemPrompt("Answer in French.", mode="override"))
    again = client.prompt(overridden.id, "hello")
    client.close()
    initialized = json.loads(recorder.of("message")[0].raw)
    assert initialized["result"]["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {
        "mode": {"override": {}}
    }
    (_, written) = sent(recorder, "session/new")
    assert written["params"]["systemPrompt"]["mode"] == "override"
    assert "System prompt" not in result.text
    assert again.text.startswith("System prompt (override): Answer in French.")


# -- a URL elicitation ------------------------------------------------------------------------------------------


class WithUrlElicitation(ClientFeatures):
    """Features that also advertise ``elicitation.url``, as a client that shows links would: the demo asks for a
    sign-in by URL only then."""

    __slots__ = ()

    def capabilities(self) -> dict[str, Any]:
        advertised = ClientFeatures.capabilities(self)
        advertised["elicitation"]["url"] = {}
        return advertised


def test_the_demos_url_elicitation_is_recorded_then_declined_and_never_opened(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened_urls: list[str] = []
    for name in ("open", "open_new", "open_new_tab"):
        monkeypatch.setattr(webbrowser, name, lambda url, *args, **kwargs: opened_urls.append(url))
    features = WithUrlElicitation(elicitation=True)
    recorder, session, result = asked_once(make_client, tmp_path, Answering(None), "with-login", features)
    (asked,) = recorder.of("elicitation")
    assert (asked.mode, asked.session_id, asked.requested_schema) == ("url", session.id, None)
    assert asked.url is not None and asked.url.endswith(f"?session={session.id}")
    assert opened_urls == []
    (answer,) = [m for m in recorder.of("send") if m.method is None and m.id == asked.request_id]
    assert json.loads(answer.raw)["result"] == {"action": "decline"}
    assert (answer.decided_by, asked.decided_by) == ("default-decline", "default-decline")
    # the request, then the decision, then the answer (recorded before it is written)
    order = [
        name
        for name, value in recorder.events
        if (name == "message" and value.method == "elicitation/create") or name == "elicitation" or value is answer
    ]
    assert order == ["message", "elicitation", "send"]
    assert "You did not sign in." in result.text
    assert sent(recorder, "elicitation/complete") == []


# -- unstable and extension methods through request() and notify() ----------------------------------------------


def test_the_demos_unstable_methods_through_request_and_an_extension_notification(
    make_client: MakeClient, tmp_path: Path
) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder)
    key = tinyacp.Secret("sk-gateway-9f1c")
    before = client.request("providers/list")
    assert (
        client.request(
            "providers/set",
            {"providerId": "demo", "apiType": "openai", "baseUrl": "https://gw.example/v1", "headers": {"x-key": key}},
        )
        == {}
    )
    during = client.request("providers/list")
    assert client.request("providers/disable", {"providerId": "demo"}) == {}
    after = client.request("providers/list")
    titled = client.request("session/set_title", {"sessionId": session.id, "title": "Umbrellas"})
    client.notify("_tinyacp/ping", {"n": 1})
    with pytest.raises(UsageError):
        client.request("session/prompt", {"sessionId": session.id, "prompt": []})
    with pytest.raises(UsageError):
        client.notify("session/cancel", {"sessionId": session.id})
    echoed = client.request("_tinyacp/echo")
    client.close()
    assert [p["providerId"] for p in before["providers"]] == ["demo"]
    assert during["providers"][0]["current"] == {"apiType": "openai", "baseUrl": "https://gw.example/v1"}
    assert after["providers"][0]["current"] is None
    assert titled == {"title": "Umbrellas"}
    (info,) = [u for u in recorder.updates if u.kind == UpdateKind.SESSION_INFO_UPDATE]
    assert (info.session_id, json.loads(info.raw)["params"]["update"]["title"]) == (session.id, "Umbrellas")
    assert echoed["notifications"] == ["_tinyacp/ping"]
    # what was refused was never written; each call was recorded before its answer came
    methods = [m.method for m in recorder.of("send")]
    assert "session/prompt" not in methods and "session/cancel" not in methods
    assert methods[2:] == [
        "providers/list",
        "providers/set",
        "providers/list",
        "providers/disable",
        "providers/list",
        "session/set_title",
        "_tinyacp/ping",
        "_tinyacp/echo",
    ]
    # each request is recorded as written before its answer is recorded as received
    order = [
        (name, value.id) for name, value in recorder.events if name in ("send", "message") and value.id is not None
    ]
    requests = [m.id for m in recorder.of("send") if m.method in ("providers/list", "session/set_title")]
    assert all(order.index(("send", i)) < order.index(("message", i)) for i in requests)
    (provider_line,) = [m for m in recorder.of("send") if m.method == "providers/set"]
    assert b"sk-gateway-9f1c" in provider_line.raw and b"sk-gateway-9f1c" not in provider_line.redacted()


# -- meta= on the calls that end things ---------------------------------------------------------------------------


def test_list_close_delete_logout_and_cancel_carry_meta_to_the_demo(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    client, session = opened(make_client, tmp_path, recorder)
    listed = client.list_sessions(tmp_path, meta={"m": "list"})
    client.cancel(session.id, meta={"m": "cancel"})
    client.close_session(session.id, meta={"m": "close"})
    client.delete_session(session.id, meta={"m": "delete"})
    client.logout(meta={"m": "logout"})
    client.close()
    assert session.id in [s.session_id for s in listed.sessions]
    for method, value in [
        ("session/list", "list"),
        ("session/cancel", "cancel"),
        ("session/close", "close"),
        ("session/delete", "delete"),
        ("logout", "logout"),
    ]:
        (line,) = sent(recorder, method)
        assert line["params"]["_meta"] == {"m": value}, method


# -- a child's work inside the parent's turn ----------------------------------------------------------------------


def test_cancelling_the_parent_while_its_child_works_sends_one_cancel_for_the_parent_only(
    make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    recorder = Recorder()
    client, session = opened(
        make_client,
        tmp_path,
        recorder,
        command=[*DEMO, "--delay", "0.2"],
        features=EVERYTHING,
        policy=PermissionPolicy(allow_all=True),
    )
    child = f"{session.id}.sub-1"

    def cancel_once_the_child_works() -> None:
        wait_for(lambda: any(u.session_id == child for u in recorder.updates), TIMEOUT, "the child's first update")
        client.cancel(session.id)

    canceller = Background(cancel_once_the_child_works, timeout=TIMEOUT)  # the prompt runs here, as callers do
    result = client.prompt(session.id, "with-subagent hello")
    canceller.join()
    client.close()
    assert result.cancelled
    assert [line["params"] for line in sent(recorder, "session/cancel")] == [{"sessionId": session.id}]
    assert result.subagents[0].session_id == child  # the child was at work when the cancel went


def test_a_childs_reply_chunks_do_not_count_toward_the_parents_reply_limits(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    def on(session: str, fields: dict[str, Any]) -> dict[str, Any]:
        return {"op": "update", "session": session, "update": fields}

    announce = {
        "sessionUpdate": "subagent_update",
        "sessionId": "child-1",
        "title": "Explore",
        "state": {"state": "running"},
    }
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": {"protocolVersion": 1, "agentCapabilities": {}}},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s1"}},
            {"op": "expect", "method": "session/prompt"},
            on("s1", chunk("Asking. ")),
            on("s1", announce),
            *[on("child-1", chunk(f"child line {n} " + "x" * 40)) for n in range(5)],
            on("s1", {"sessionUpdate": "subagent_update", "sessionId": "child-1", "state": {"state": "idle"}}),
            on("s1", chunk("Done.")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    limits = TransferLimits(max_reply_bytes=20, max_reply_chunks=2)
    client, session = opened(
        make_client, Path("/"), recorder, command=agent.argv, features=EVERYTHING, transfer_limits=limits
    )
    result = client.prompt(session.id, "hi")
    client.close()
    assert (result.overflow, result.stop_reason, result.text, result.chunk_count) == (
        None,
        "end_turn",
        "Asking. Done.",
        2,
    )
    child_chunks = [
        u for u in recorder.updates if u.session_id == "child-1" and u.kind == UpdateKind.AGENT_MESSAGE_CHUNK
    ]
    assert len(child_chunks) == 5  # each recorded, under the child's session
    assert "session/cancel" not in agent.methods()


def test_the_demos_child_reply_does_not_count_toward_the_parents_reply_limits(
    make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    policy = PermissionPolicy(allow_all=True)
    first = Recorder()
    client, session = opened(make_client, tmp_path, first, features=EVERYTHING, policy=policy)
    client.prompt(session.id, "with-subagent hello")  # with no limit near: what the parent itself says
    client.close()
    said = [u.text or "" for u in first.updates if u.session_id == session.id and u.kind == "agent_message_chunk"]
    # limits the parent's reply just fits: the child's chunk, which comes first, would pass both if it counted
    limits = TransferLimits(max_reply_bytes=len("".join(said).encode()), max_reply_chunks=len(said))
    recorder = Recorder()
    client, session = opened(
        make_client, tmp_path, recorder, features=EVERYTHING, policy=policy, transfer_limits=limits
    )
    result = client.prompt(session.id, "with-subagent hello")
    client.close()
    child = [u for u in recorder.updates if u.session_id == f"{session.id}.sub-1"]
    assert [u.kind for u in child].count(UpdateKind.AGENT_MESSAGE_CHUNK) == 1
    assert (result.overflow, result.text, result.chunk_count) == (None, "".join(said), len(said))
    assert sent(recorder, "session/cancel") == []


# -- the journal ----------------------------------------------------------------------------------------------------


class JournaledAnswering(Journaled):
    """A Journaled recorder that accepts every question with ``content`` (the decision is journaled with the
    answer line)."""

    def __init__(self, journal: tinyacp.JsonlJournal, content: dict[str, Any]) -> None:
        super().__init__(journal)
        self.content = content

    def on_elicitation(self, request: ElicitationRequest) -> ElicitationReply | None:
        self._add("elicitation", request)
        return ElicitationReply.accept(self.content)


def test_a_turn_with_every_newer_part_is_journaled_line_for_line_in_the_order_observed(
    make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    journal_path = tmp_path / "journal.jsonl"
    journal = tinyacp.JsonlJournal(journal_path)
    recorder = JournaledAnswering(journal, {"name": "Ada", "style": "short"})
    client, session = opened(
        make_client,
        tmp_path,
        recorder,
        epoch=journal.begin_epoch(),
        features=EVERYTHING,
        policy=PermissionPolicy(allow_all=True),
    )
    result = client.prompt(session.id, "with-notice with-compaction with-question with-subagent hello")
    client.close()
    journal.close()
    observed = [
        ("out" if name == "send" else "in", value.raw)
        for name, value in recorder.events
        if name in ("update", "message", "permission_request", "send")
    ]
    journaled = [
        (record["dir"], record["line"].encode())
        for record in tinyacp.JsonlJournal.read(journal_path)
        if record.get("type") == "line"
    ]
    assert journaled == observed
    # in the journal: each question of the agent's before our answer to it, the child announced before its traffic
    parsed = [(direction, json.loads(line)) for direction, line in journaled]
    for method in ("session/request_permission", "elicitation/create"):
        asked = next(i for i, (d, m) in enumerate(parsed) if d == "in" and m.get("method") == method)
        answers = [i for i, (d, m) in enumerate(parsed) if d == "out" and "method" not in m]
        answered = next(i for i in answers if parsed[i][1]["id"] == parsed[asked][1]["id"])
        assert asked < answered, method
    child = f"{session.id}.sub-1"
    announced = next(
        i for i, (_, m) in enumerate(parsed) if m.get("params", {}).get("update", {}).get("sessionId") == child
    )
    assert announced < min(i for i, (_, m) in enumerate(parsed) if m.get("params", {}).get("sessionId") == child)
    kinds = [u.kind for u in recorder.updates]
    for kind in ("notice", "compaction_update", "subagent_update", "session_message", "plan_update", "plan_removed"):
        assert kind in kinds, kind
    assert [n.title for n in result.notices] == ["Model fallback"] and "Model fallback" not in result.text
    assert "Ada" in result.text
