"""tinyacp against an agent built on the official ACP Python SDK (``tests/agents/sdk_agent.py``).

Nobody here wrote the SDK's protocol code, so these tests keep the client honest about what a third-party
peer sends: its framing, its ids (the SDK numbers its requests from 0), its update shapes, and how it treats
our permission answers and ``session/cancel``. Each test runs against ``Client`` and ``AsyncClient``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import AGENTS, ClientLike, MakeClient, Recorder, wait_for
from tinyacp import DecisionSource, PermissionPolicy, PermissionReply, StopReason, UpdateKind

SDK_AGENT = AGENTS / "sdk_agent.py"
TIMEOUT = 20.0

# One turn of the SDK agent with --chunks 3: three chunks, the tool call, its outcome, the final chunk.
TURN_KINDS = [
    UpdateKind.AGENT_MESSAGE_CHUNK,
    UpdateKind.AGENT_MESSAGE_CHUNK,
    UpdateKind.AGENT_MESSAGE_CHUNK,
    UpdateKind.TOOL_CALL,
    UpdateKind.TOOL_CALL_UPDATE,
    UpdateKind.AGENT_MESSAGE_CHUNK,
]
CHUNKS = "chunk 1 of 3chunk 2 of 3chunk 3 of 3"


def start(
    make_client: MakeClient, cwd: Path, observer: Recorder, *, chunks: int = 3, **options: Any
) -> tuple[ClientLike, tinyacp.Session]:
    command = [sys.executable, str(SDK_AGENT), "--chunks", str(chunks)]
    client = make_client(command=command, observer=observer, timeout=TIMEOUT, **options)
    init = client.initialize()
    assert init.protocol_version == 1
    assert init.agent_info is not None
    assert init.agent_info.name == "tinyacp-sdk-test-agent"
    return client, client.new_session(cwd)


def test_a_turn_streams_chunks_and_a_tool_call_the_policy_allows(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    client, session = start(make_client, tmp_path, recorder, policy=PermissionPolicy(kinds={"edit"}))

    result = client.prompt(session.id, "write some notes")

    assert session.id == "sdk-1"
    assert result.stop_reason is StopReason.END_TURN
    assert result.text == CHUNKS + "permission: allow"
    assert (result.chunk_count, result.update_count) == (4, 6)
    updates = recorder.updates
    assert [u.kind for u in updates] == TURN_KINDS
    assert [u.seq for u in updates] == list(range(1, 7))
    assert {u.session_id for u in updates} == {"sdk-1"}
    assert (updates[3].tool_call_id, updates[3].title, updates[3].tool_kind, updates[3].status) == (
        "tool_1",
        "Write notes.txt",
        "edit",
        "pending",
    )
    assert (updates[4].tool_call_id, updates[4].status) == ("tool_1", "completed")
    (request,) = recorder.of("permission_request")
    assert request.request_id == 0  # the SDK numbers its own requests from 0, apart from ours
    assert request.tool_call.tool_call_id == "tool_1"
    assert request.decided_by is DecisionSource.POLICY
    # Every record came before the next line was read: the request sits between the tool call and its outcome.
    order = [name for name, _ in recorder.events if name in ("update", "permission_request", "permission_decision")]
    assert order == ["update"] * 4 + ["permission_request", "permission_decision"] + ["update"] * 2


def test_the_observer_decides_the_sdk_agents_permission_requests(make_client: MakeClient, tmp_path: Path) -> None:
    replies = [PermissionReply.select("allow_always"), PermissionReply.reject(), PermissionReply.allow()]
    pending = list(replies)
    recorder = Recorder(decide=lambda request: pending.pop(0))
    # The policy would allow everything: the observer's word comes first.
    client, session = start(make_client, tmp_path, recorder, policy=PermissionPolicy(allow_all=True))

    results = [client.prompt(session.id, f"turn {n}") for n in range(len(replies))]

    assert [r.text for r in results] == [
        CHUNKS + "permission: allow_always",
        CHUNKS + "permission: reject",
        CHUNKS + "permission: allow",
    ]
    outcomes = [u.status for u in recorder.updates if u.kind is UpdateKind.TOOL_CALL_UPDATE]
    assert outcomes == ["completed", "failed", "completed"]
    requests = recorder.of("permission_decision")
    assert [r.request_id for r in requests] == [0, 1, 2]
    assert [r.decided_by for r in requests] == [DecisionSource.OBSERVER] * 3
    assert [u.seq for u in recorder.updates] == list(range(1, 19))


def test_the_sdk_agents_permission_request_is_rejected_by_default(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    client, session = start(make_client, tmp_path, recorder)

    result = client.prompt(session.id, "write some notes")

    assert result.text == CHUNKS + "permission: reject"
    assert result.stop_reason is StopReason.END_TURN
    (request,) = recorder.of("permission_decision")
    assert request.decided_by is DecisionSource.DEFAULT_REJECT
    assert request.selected is not None
    assert request.selected.option_id == "reject"
    assert [u.status for u in recorder.updates if u.kind is UpdateKind.TOOL_CALL_UPDATE] == ["failed"]


def test_cancel_stops_the_sdk_agents_turn(make_client: MakeClient, tmp_path: Path) -> None:
    # So many chunks that the turn cannot end before the cancel arrives: only the cancel ends it.
    chunks = 10_000_000
    recorder = Recorder()
    client, session = start(make_client, tmp_path, recorder, chunks=chunks)
    errors: list[BaseException] = []

    def cancel_once_streaming() -> None:
        try:
            wait_for(lambda: len(recorder.updates) >= 1, what="the first chunk")
            client.cancel(session.id)
        except BaseException as exc:
            errors.append(exc)

    canceller = threading.Thread(target=cancel_once_streaming, daemon=True)
    canceller.start()
    result = client.prompt(session.id, "write a novel")
    canceller.join(TIMEOUT)

    assert not canceller.is_alive()
    assert errors == []
    assert result.stop_reason is StopReason.CANCELLED
    assert result.cancelled
    assert not result.timed_out  # our cancel ended the turn, not the deadline's
    assert 1 <= result.chunk_count < chunks
    assert result.chunk_count == result.update_count == len(recorder.updates)
    assert recorder.of("permission_request") == []
    assert [m.method for m in recorder.of("send")].count("session/cancel") == 1


def test_sessions_modes_options_and_auth_against_the_sdk_peer(make_client: MakeClient, tmp_path: Path) -> None:
    recorder = Recorder()
    client, session = start(make_client, tmp_path, recorder)
    assert session.modes is not None
    assert [mode.id for mode in session.modes.available_modes] == ["ask", "code"]
    client.authenticate("sdk-login")
    client.set_mode(session.id, "code")
    client.set_model(session.id, "sdk-large")
    state = client.session_state(session.id)
    assert state.modes is not None
    assert state.modes.current_mode_id == "code"
    assert [(o.id, o.current_value) for o in state.config_options] == [("model", "sdk-large")]

    page = client.list_sessions(tmp_path)
    assert [(s.session_id, s.cwd) for s in page.sessions] == [(session.id, str(tmp_path))]
    loaded = client.load_session("sdk-old", tmp_path)
    assert (loaded.session.id, loaded.replayed_updates) == ("sdk-old", 1)
    assert recorder.updates[-1].text == "earlier"
    with pytest.raises(tinyacp.NotAdvertised):
        client.resume_session(session.id, tmp_path)  # this SDK release does not serve session/resume
    with pytest.raises(tinyacp.SessionNotFound):
        client.load_session("sdk-missing", tmp_path)
    for unserved in (client.close_session, client.delete_session):  # this SDK release serves neither
        with pytest.raises(tinyacp.NotAdvertised):
            unserved("sdk-old")
    with pytest.raises(tinyacp.NotAdvertised):
        client.logout()
    assert {s.session_id for s in client.list_sessions().sessions} == {session.id, "sdk-old"}  # still usable
