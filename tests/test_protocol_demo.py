"""The whole client end to end against the demo agent (``python -m tinyacp.demo``), with ``Client`` and
``AsyncClient``: authentication, sessions that outlive their process, modes, config options, usage and cost.

Every client here is a real agent process; a session is continued in a second (and third) process through the
demo's state directory, which each test gets fresh.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import Journaled, MakeClient, Recorder
from tinyacp import (
    AuthRequired,
    NotAdvertised,
    PermissionPolicy,
    Secret,
    SessionNotFound,
    StopReason,
    SystemPrompt,
    UpdateKind,
)

TIMEOUT = 20.0
KEY = "demo-key-5e1f9a0c77"
READ = PermissionPolicy(kinds={"read"})


def demo(make_client: MakeClient, state: Path, *flags: str, observer: Recorder | None = None, **options: Any) -> Any:
    """A demo agent keeping its sessions in ``state``, initialized; reads are allowed by the policy."""
    command = [sys.executable, "-m", "tinyacp.demo", "--state-dir", str(state), *flags]
    options.setdefault("policy", READ)
    client = make_client(command=command, observer=observer or Recorder(), timeout=TIMEOUT, **options)
    client.initialize()
    return client


def test_a_session_goes_on_in_a_second_and_a_third_process(make_client: MakeClient, tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    first = demo(make_client, state)
    session = first.new_session(work)
    assert first.prompt(session.id, "remember the word tangerine").stop_reason is StopReason.END_TURN
    first.close()

    second = demo(make_client, state)
    resumed = second.resume_session(session.id, work)
    reply = second.prompt(resumed.id, "what was the word?")
    second.close()
    assert resumed.id == session.id
    assert reply.text.startswith("You said: what was the word?")

    recorder = Recorder()
    third = demo(make_client, state, observer=recorder)
    loaded = third.load_session(session.id, work)
    replayed = [(u.kind, u.text) for u in recorder.updates]
    assert loaded.replayed_updates == 4
    assert replayed[0] == (UpdateKind.USER_MESSAGE_CHUNK, "remember the word tangerine")
    assert replayed[2] == (UpdateKind.USER_MESSAGE_CHUNK, "what was the word?")
    assert [kind for kind, _ in replayed] == [UpdateKind.USER_MESSAGE_CHUNK, UpdateKind.AGENT_MESSAGE_CHUNK] * 2
    assert replayed[1][1] is not None
    assert replayed[1][1].startswith("You said: remember the word tangerine")
    assert third.prompt(loaded.session.id, "and now?").stop_reason is StopReason.END_TURN
    page = third.list_sessions(work)
    assert [(s.session_id, s.title) for s in page.sessions] == [(session.id, "remember the word tangerine")]
    third.close()


def test_authentication_is_required_and_a_secret_key_never_reaches_the_journal(
    make_client: MakeClient, tmp_path: Path
) -> None:
    journal_path = tmp_path / "journal.jsonl"
    journal = tinyacp.JsonlJournal(journal_path)
    env = {key: value for key, value in os.environ.items() if key != "TINYACP_DEMO_API_KEY"}
    client = demo(
        make_client,
        tmp_path / "state",
        "--require-auth",
        observer=Journaled(journal),
        env=env,
        epoch=journal.begin_epoch(),
    )

    with pytest.raises(AuthRequired) as caught:
        client.new_session(tmp_path)
    assert [method.id for method in caught.value.auth_methods] == ["demo-login", "demo-api-key"]
    with pytest.raises(AuthRequired, match="TINYACP_DEMO_API_KEY"):
        client.authenticate("demo-api-key")  # no key in the agent's environment, none sent
    with pytest.raises(NotAdvertised):
        client.authenticate("github")
    client.authenticate("demo-api-key", meta={"api-key": Secret(KEY)})
    session = client.new_session(tmp_path)
    client.logout()
    with pytest.raises(AuthRequired):
        client.prompt(session.id, "hello")
    client.close()
    journal.close()

    assert KEY.encode() not in journal_path.read_bytes()
    redacted = [r for r in tinyacp.JsonlJournal.read(journal_path) if r.get("redacted")]
    assert [r["method"] for r in redacted] == ["authenticate"]


def test_the_api_key_method_takes_the_key_from_the_agents_environment(make_client: MakeClient, tmp_path: Path) -> None:
    env = {**os.environ, "TINYACP_DEMO_API_KEY": KEY}
    client = demo(make_client, tmp_path / "state", "--require-auth", env=env)
    client.authenticate("demo-api-key")
    assert client.new_session(tmp_path).id.startswith("demo-")
    with pytest.raises(AuthRequired, match="does not match"):
        client.authenticate("demo-api-key", meta={"api-key": Secret("wrong")})
    client.close()


def test_modes_and_the_model_option_change_the_turn_and_the_session_state(
    make_client: MakeClient, tmp_path: Path
) -> None:
    recorder = Recorder()
    client = demo(make_client, tmp_path / "state", observer=recorder, policy=PermissionPolicy())
    session = client.new_session(tmp_path)
    assert session.modes is not None
    assert [mode.id for mode in session.modes.available_modes] == ["default", "auto"]
    assert [(o.id, o.category, o.current_value) for o in session.config_options] == [
        ("mode", "mode", "default"),
        ("model", "model", "demo-small"),
    ]
    with pytest.raises(NotAdvertised):
        client.set_mode(session.id, "yolo")
    with pytest.raises(NotAdvertised):
        client.set_model(session.id, "gpt-9")

    client.set_mode(session.id, "auto")
    client.set_model(session.id, "demo-large")
    result = client.prompt(session.id, "list")  # auto: no permission request, though the policy denies all
    state = client.session_state(session.id)
    client.close()

    assert recorder.of("permission_request") == []
    assert "I read" in result.text
    assert state.modes is not None
    assert state.modes.current_mode_id == "auto"
    assert {(o.id, o.current_value) for o in state.config_options} == {("mode", "auto"), ("model", "demo-large")}
    assert [u.kind for u in recorder.updates[:2]] == [UpdateKind.CURRENT_MODE_UPDATE, UpdateKind.CONFIG_OPTION_UPDATE]


def test_each_turn_reports_usage_and_a_growing_cost(make_client: MakeClient, tmp_path: Path) -> None:
    client = demo(make_client, tmp_path / "state")
    session = client.new_session(tmp_path)
    first = client.prompt(session.id, "one")
    second = client.prompt(session.id, "two, a longer prompt")
    client.close()

    for result in (first, second):
        usage = result.usage
        assert usage is not None
        assert usage.input_tokens is not None
        assert usage.output_tokens is not None
        assert usage.total_tokens == usage.input_tokens + usage.output_tokens
        assert usage.context_size == 200000
        assert usage.cost is not None
        assert usage.cost.currency == "USD"
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.cost is not None
    assert second.usage.cost is not None
    assert second.usage.cost.amount > first.usage.cost.amount > 0
    assert second.usage.context_used is not None
    assert first.usage.context_used is not None
    assert second.usage.context_used > first.usage.context_used
    assert first.meta is None


def test_close_delete_and_an_unknown_session(make_client: MakeClient, tmp_path: Path) -> None:
    client = demo(make_client, tmp_path / "state")
    kept = client.new_session(tmp_path)
    gone = client.new_session(tmp_path)
    client.close_session(kept.id)
    with pytest.raises(SessionNotFound):
        client.prompt(kept.id, "closed")
    client.delete_session(gone.id)
    with pytest.raises(SessionNotFound):
        client.load_session(gone.id, tmp_path)
    with pytest.raises(SessionNotFound):
        client.delete_session("demo-999")
    listed = client.list_sessions()
    assert [s.session_id for s in listed.sessions] == [kept.id]
    assert listed.next_cursor is None
    resumed = client.resume_session(kept.id, tmp_path, system_prompt=SystemPrompt("Answer in French."))
    result = client.prompt(resumed.id, "bonjour")
    client.close()
    assert result.text.startswith("System prompt: Answer in French.\nYou said: bonjour")
