"""The newer parts of ACP through ``Client`` and ``AsyncClient`` against the demo agent (``tinyacp.demo``), which
honours the client's opt-ins as the maintained adapters do: every test runs with both shells.

The headline: without ``session.notices`` the agent writes its warning into the reply (as Claude's and Codex's
adapters do), with it (the default) the warning is a notice, and the reply holds only the agent's answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from conftest import MakeClient, Recorder
from tinyacp import ClientFeatures, ElicitationReply, ElicitationRequest, PermissionPolicy

TIMEOUT = 30.0
DEMO = [sys.executable, "-m", "tinyacp.demo"]
EVERYTHING = ClientFeatures(notices=True, compaction=True, plan_operations=True, subagents=True, elicitation=True)


class Answering(Recorder):
    def __init__(self, reply: ElicitationReply | None) -> None:
        super().__init__()
        self.reply = reply

    def on_elicitation(self, request: ElicitationRequest) -> ElicitationReply | None:
        self._add("elicitation", request)
        return self.reply


def opened(make_client: MakeClient, tmp_path: Path, observer: Recorder | None = None, **options: Any) -> Any:
    client = make_client(command=DEMO, observer=observer or Recorder(), timeout=TIMEOUT, **options)
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
    recorder = Answering(reply)
    client, session = opened(
        make_client,
        tmp_path,
        recorder,
        features=ClientFeatures(elicitation=True),
        policy=PermissionPolicy(allow_all=True),
    )
    result = client.prompt(session.id, "with-question")
    client.close()
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
