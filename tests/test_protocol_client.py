"""Authentication, sessions across processes, configuration, metadata and usage through ``Client`` and
``AsyncClient``, against the scripted agent (``tests/agents/scripted.py``): every test runs with both shells.

The agent's log is exactly what reached it, so each test checks the lines written (against the schema), that a
refused call wrote nothing, what was recorded in which order, and which error the call raised.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import INIT_RESULT, Journaled, MakeClient, MakeScripted, Recorder, Scripted, chunk, end_turn
from helpers.schema import check_client_line
from tinyacp import (
    AuthRequired,
    Cost,
    LoadedSession,
    NotAdvertised,
    Secret,
    SessionNotFound,
    SessionPage,
    TransferLimitExceeded,
    TransferLimits,
    TurnUsage,
)
from tinyacp.cli.journals._show import show
from tinyacp.replay import Mismatch, Replayer, load_recording

TIMEOUT = 20.0
SECRET = "sk-test-4f1c2a77d0e3b9"
INIT: dict[str, Any] = {
    **INIT_RESULT,
    "agentCapabilities": {
        "loadSession": True,
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        "auth": {"logout": {}},
    },
    "authMethods": [
        {"id": "api-key", "name": "API key"},
        {"id": "tui", "name": "Terminal login", "type": "terminal"},
    ],
}
OPTIONS: list[dict[str, Any]] = [
    {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": "small",
        "options": [{"value": "small", "name": "Small"}, {"value": "large", "name": "Large"}],
    },
    {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": False},
]
SESSION_ANSWER = {
    "sessionId": "s1",
    "modes": {
        "currentModeId": "read-only",
        "availableModes": [{"id": "read-only", "name": "RO"}, {"id": "auto", "name": "Auto"}],
    },
    "configOptions": OPTIONS,
}


def opening(init: dict[str, Any] = INIT, answer: dict[str, Any] = SESSION_ANSWER) -> list[dict[str, Any]]:
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": answer},
    ]


def start(
    make_client: MakeClient, agent: Scripted, tmp_path: Path, observer: Recorder | None = None, **options: Any
) -> Any:
    client = make_client(command=agent.argv, observer=observer or Recorder(), timeout=TIMEOUT, **options)
    client.initialize()
    return client


def written(agent: Scripted, method: str) -> list[dict[str, Any]]:
    return [message for message in agent.received() if message.get("method") == method]


def test_authentication_required_then_authenticate_with_a_secret_then_the_session_opens(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": INIT},
            {"op": "expect", "method": "session/new"},
            {"op": "reply_error", "code": -32000, "message": "Authentication required"},
            {"op": "expect", "method": "authenticate"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": SESSION_ANSWER},
        ]
    )
    journal_path = tmp_path / "journal.jsonl"
    journal = tinyacp.JsonlJournal(journal_path)
    recorder = Journaled(journal)
    client = start(make_client, agent, tmp_path, recorder, epoch=journal.begin_epoch())

    with pytest.raises(AuthRequired) as caught:
        client.new_session(tmp_path)
    assert [method.id for method in caught.value.auth_methods] == ["api-key", "tui"]
    with pytest.raises(NotAdvertised):
        client.authenticate("tui")
    client.authenticate("api-key", meta={"api-key": Secret(SECRET)})
    session = client.new_session(tmp_path)
    client.close()
    journal.close()

    assert session.id == "s1"
    (auth,) = written(agent, "authenticate")
    assert check_client_line(agent.log.read_bytes().splitlines()[2], "AuthenticateRequest") == auth
    assert auth["params"] == {"methodId": "api-key", "_meta": {"api-key": SECRET}}  # the agent got the plain value
    (sent,) = [message for message in recorder.of("send") if message.method == "authenticate"]
    assert sent.secrets == (Secret(SECRET),)
    assert SECRET.encode() in sent.raw
    data = journal_path.read_bytes()
    assert SECRET.encode() not in data
    assert SECRET[3:12].encode() not in data
    (record,) = [
        r for r in tinyacp.JsonlJournal.read(journal_path) if r.get("method") == "authenticate" and r["dir"] == "out"
    ]
    assert record["redacted"] == 1
    assert '"<secret>"' in record["line"]


def test_refused_calls_write_nothing_and_record_nothing(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    bare = {**INIT_RESULT, "authMethods": []}
    agent = scripted(opening(bare, {"sessionId": "s1"}))
    recorder = Recorder()
    client = start(make_client, agent, tmp_path, recorder)
    session = client.new_session(tmp_path)
    sends = len(recorder.of("send"))

    for call in (
        lambda: client.load_session("old", tmp_path),
        lambda: client.resume_session("old", tmp_path),
        lambda: client.close_session("s1"),
        lambda: client.delete_session("s1"),
        client.list_sessions,
        client.logout,
        lambda: client.authenticate("api-key"),
        lambda: client.set_mode(session.id, "auto"),
        lambda: client.set_config_option(session.id, "model", "large"),
        lambda: client.set_model(session.id, "large"),
    ):
        with pytest.raises(NotAdvertised):
            call()
    client.close()

    assert len(recorder.of("send")) == sends
    assert agent.methods() == ["initialize", "session/new"]


def test_resume_list_close_delete_and_logout_write_schema_lines_and_return_typed_answers(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    listing = {"sessions": [{"sessionId": "old", "cwd": str(tmp_path), "title": "Earlier"}], "nextCursor": "n2"}
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": INIT},
            {"op": "expect", "method": "session/list"},
            {"op": "reply", "result": listing},
            {"op": "expect", "method": "session/resume"},
            {"op": "reply", "result": {"modes": SESSION_ANSWER["modes"]}},
            {"op": "expect", "method": "session/close"},
            {"op": "reply_error", "code": -32002, "message": "Resource not found"},
            {"op": "expect", "method": "session/close"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "session/delete"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "logout"},
            {"op": "reply", "result": {}},
        ]
    )
    client = start(make_client, agent, tmp_path)
    page = client.list_sessions(tmp_path)
    session = client.resume_session("old", tmp_path, meta={"traceparent": "t"})
    with pytest.raises(SessionNotFound):
        client.close_session("nope")
    client.close_session("old")
    client.delete_session("old")
    client.logout()
    client.close()

    assert isinstance(page, SessionPage)
    assert [(s.session_id, s.title) for s in page.sessions] == [("old", "Earlier")]
    assert page.next_cursor == "n2"
    assert session.id == "old"
    assert session.modes is not None
    parts = {
        "session/list": "ListSessionsRequest",
        "session/resume": "ResumeSessionRequest",
        "session/close": "CloseSessionRequest",
        "session/delete": "DeleteSessionRequest",
        "logout": "LogoutRequest",
    }
    lines = agent.log.read_bytes().splitlines()
    for raw, message in zip(lines, agent.received(), strict=True):
        if message.get("method") in parts:
            check_client_line(raw, parts[message["method"]])
    assert written(agent, "session/list")[0]["params"] == {"cwd": str(tmp_path)}
    assert written(agent, "session/resume")[0]["params"] == {
        "sessionId": "old",
        "cwd": str(tmp_path),
        "mcpServers": [],
        "_meta": {"traceparent": "t"},
    }


def test_a_load_records_the_replayed_history_before_the_answer(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    user = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "earlier question"}}
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": INIT},
            {"op": "expect", "method": "session/load"},
            {"op": "update", "session": "old", "update": user},
            {"op": "update", "session": "old", "update": chunk("earlier answer")},
            {"op": "reply", "result": {"configOptions": OPTIONS}},
            {"op": "expect", "method": "session/prompt"},
            {"op": "update", "session": "old", "update": chunk("more")},
            end_turn(),
        ]
    )
    recorder = Recorder()
    client = start(make_client, agent, tmp_path, recorder)
    loaded = client.load_session("old", tmp_path)
    result = client.prompt("old", "go on")
    client.close()

    assert isinstance(loaded, LoadedSession)
    assert (loaded.session.id, loaded.replayed_updates) == ("old", 2)
    assert [option.id for option in loaded.session.config_options] == ["model", "fast"]
    assert [u.text for u in recorder.updates] == ["earlier question", "earlier answer", "more"]
    order = [(name, getattr(value, "method", None)) for name, value in recorder.events]
    assert order == [
        ("send", "initialize"),
        ("message", "initialize"),
        ("send", "session/load"),
        ("update", None),
        ("update", None),
        ("message", "session/load"),
        ("send", "session/prompt"),
        ("update", None),
        ("message", "session/prompt"),
    ]
    assert result.text == "more"
    check_client_line(agent.log.read_bytes().splitlines()[1], "LoadSessionRequest")


def test_a_replay_longer_than_max_updates_is_refused(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    replay = [{"op": "update", "session": "old", "update": chunk(f"line {n}")} for n in range(3)]
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": INIT},
            {"op": "expect", "method": "session/load"},
            *replay,
            {"op": "reply", "result": {}},
        ]
    )
    client = start(make_client, agent, tmp_path, transfer_limits=TransferLimits(max_updates=2))
    with pytest.raises(TransferLimitExceeded, match="max_updates"):
        client.load_session("old", tmp_path)


def test_configuration_calls_write_schema_lines_and_keep_the_session_state(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    large = [{**OPTIONS[0], "currentValue": "large"}, OPTIONS[1]]
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/set_mode"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "session/set_config_option"},
            {"op": "reply", "result": {"configOptions": [OPTIONS[0], {**OPTIONS[1], "currentValue": True}]}},
            {"op": "expect", "method": "session/set_config_option"},
            {"op": "update", "update": {"sessionUpdate": "config_option_update", "configOptions": large}},
            {"op": "reply", "result": {"configOptions": large}},
            {"op": "expect", "method": "session/set_mode"},
            {"op": "reply", "result": {}},
        ]
    )
    recorder = Recorder()
    client = start(make_client, agent, tmp_path, recorder)
    session = client.new_session(tmp_path)
    client.set_mode(session.id, "auto", meta={"why": "test"})
    options = client.set_config_option(session.id, "fast", True)
    client.set_model(session.id, "large")
    with pytest.raises(NotAdvertised):
        client.set_mode(session.id, "plan")
    client.set_mode(session.id, "plan", force=True)
    state = client.session_state(session.id)
    client.close()

    assert [(o.id, o.current_value) for o in options] == [("model", "small"), ("fast", True)]
    assert state.modes is not None
    assert state.modes.current_mode_id == "plan"
    assert [(o.id, o.current_value) for o in state.config_options] == [("model", "large"), ("fast", False)]
    lines = agent.log.read_bytes().splitlines()
    parts = (
        ["InitializeRequest", "NewSessionRequest"] + ["SetSessionModeRequest"] + ["SetSessionConfigOptionRequest"] * 2
    )
    for raw, part in zip(lines, [*parts, "SetSessionModeRequest"], strict=True):
        check_client_line(raw, part)
    params = [message["params"] for message in agent.received()[2:]]
    assert params == [
        {"sessionId": "s1", "modeId": "auto", "_meta": {"why": "test"}},
        {"sessionId": "s1", "configId": "fast", "type": "boolean", "value": True},
        {"sessionId": "s1", "configId": "model", "value": "large"},
        {"sessionId": "s1", "modeId": "plan"},
    ]
    forced = [message.forced for message in recorder.of("send")]
    assert forced == [False, False, False, False, False, True]


def test_the_prompt_result_carries_the_turns_usage(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    usage = {"sessionUpdate": "usage_update", "used": 1200, "size": 200000, "cost": {"amount": 0.01, "currency": "USD"}}
    agent = scripted(
        [
            *opening(),
            {"op": "expect", "method": "session/prompt"},
            {"op": "update", "update": chunk("hi")},
            {"op": "update", "update": usage},
            {
                "op": "reply",
                "result": {
                    "stopReason": "end_turn",
                    "usage": {"inputTokens": 1000, "outputTokens": 200, "totalTokens": 1200},
                },
            },
        ]
    )
    client = start(make_client, agent, tmp_path)
    session = client.new_session(tmp_path)
    result = client.prompt(session.id, "hi", meta={"traceparent": "00-1-2-01"})
    client.close()

    assert result.usage == TurnUsage(
        input_tokens=1000,
        output_tokens=200,
        total_tokens=1200,
        context_used=1200,
        context_size=200000,
        cost=Cost(0.01, "USD"),
    )
    assert result.meta is None
    (prompt,) = written(agent, "session/prompt")
    assert prompt["params"]["_meta"] == {"traceparent": "00-1-2-01"}
    check_client_line(agent.log.read_bytes().splitlines()[2], "PromptRequest")


def test_a_redacted_line_replays_strictly_with_any_key_and_show_says_what_was_not_stored(tmp_path: Path) -> None:
    journal_path = tmp_path / "journal.jsonl"
    with tinyacp.JsonlJournal(journal_path) as journal:
        epoch = journal.begin_epoch()
        line = (
            b'{"jsonrpc":"2.0","id":0,"method":"authenticate","params":{"methodId":"k","_meta":{"api-key":"'
            + SECRET.encode()
            + b'"}}}'
        )
        journal.on_send(tinyacp.OutgoingMessage(epoch, line, "authenticate", 0, (Secret(SECRET),), forced=True))
        journal.on_message(
            tinyacp.AgentMessage(
                epoch, b'{"jsonrpc":"2.0","id":0,"result":{}}', tinyacp.MessageKind.RESPONSE, "authenticate", 0
            )
        )
    assert SECRET.encode() not in journal_path.read_bytes()

    recording = load_recording(journal_path)
    (step,) = recording.steps
    assert step.redacted
    read_fd, write_fd = os.pipe()
    try:
        replayer = Replayer(recording, strict=True, out_fd=write_fd, log=io.StringIO())
        other = line.replace(SECRET.encode(), b"another-key")
        replayer.receive(other)  # any string stands where the secret was
        assert os.read(read_fd, 4096) == b'{"jsonrpc":"2.0","id":0,"result":{}}\n'
        strict = Replayer(load_recording(journal_path), strict=True, out_fd=write_fd, log=io.StringIO())
        with pytest.raises(Mismatch):
            strict.receive(other.replace(b'"methodId":"k"', b'"methodId":"j"'))
    finally:
        os.close(read_fd)
        os.close(write_fd)

    out = io.StringIO()
    show(journal_path, "text", out, io.StringIO())
    assert "1 secret not stored" in out.getvalue()
    assert "force=True" in out.getvalue()
    assert SECRET not in out.getvalue()


def test_legacy_models_a_system_prompt_and_more_directories_reach_the_agent(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    init = {
        **INIT,
        "agentCapabilities": {"sessionCapabilities": {"systemPrompt": {}, "additionalDirectories": {}}},
    }
    models = {
        "currentModelId": "flash",
        "availableModels": [{"modelId": "flash", "name": "F"}, {"modelId": "pro", "name": "P"}],
    }
    agent = scripted(
        [
            *opening(init, {"sessionId": "g1", "models": models}),
            {"op": "expect", "method": "session/set_model"},
            {"op": "reply", "result": {}},
        ]
    )
    client = start(make_client, agent, tmp_path)
    extra = tmp_path / "lib"
    with pytest.raises(NotAdvertised, match="override"):
        client.new_session(tmp_path, system_prompt=tinyacp.SystemPrompt("Be terse.", mode="override"))
    session = client.new_session(
        tmp_path, system_prompt=tinyacp.SystemPrompt("Be terse."), additional_directories=[extra], meta={"k": "v"}
    )
    assert session.models is not None
    assert [model.model_id for model in session.models.available_models] == ["flash", "pro"]
    with pytest.raises(NotAdvertised):
        client.set_model(session.id, "ultra")
    client.set_model(session.id, "pro")
    state = client.session_state(session.id)
    client.close()

    assert state.models is not None
    assert state.models.current_model_id == "pro"
    lines = agent.log.read_bytes().splitlines()
    new = check_client_line(lines[1], "NewSessionRequest")["params"]
    assert new == {
        "cwd": str(tmp_path),
        "mcpServers": [],
        "additionalDirectories": [str(extra)],
        "systemPrompt": {"mode": "append", "content": [{"type": "text", "text": "Be terse."}]},
        "_meta": {"k": "v"},
    }
    assert check_client_line(lines[2], "ExtRequest") == {
        "jsonrpc": "2.0",
        "id": 2,  # the refused calls used no id
        "method": "session/set_model",
        "params": {"sessionId": "g1", "modelId": "pro"},
    }
    assert len(lines) == 3
