"""The behaviour of ``Client`` and ``AsyncClient`` against real child processes.

Every test that goes through ``make_client`` runs once against each shell (the ``AsyncClient`` behind a sync
facade) and ends with the fixture's check that no process of the agent's group is left and the agent was reaped.
The tests at the end drive ``AsyncClient`` directly, from ``asyncio.run``, for what only it does (coroutine
observers, task cancellation, ``prompt_stream``, back-pressure, many agents on one loop); they check the same
thing themselves.

The agents are ``tests/agents/scripted.py`` (a list of steps; its log shows exactly what reached the agent),
plus two small single-purpose agents: ``report_agent.py`` (how it was started) and ``backpressure_agent.py`` (how far
it got writing into a pipe nobody reads).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import (
    ACP,
    AGENTS,
    INIT_RESULT,
    UPDATE_KINDS,
    AsyncFacade,
    Background,
    ClientLike,
    Flood,
    MakeClient,
    MakeScripted,
    Recorder,
    Scripted,
    chunk,
    end_turn,
    handshake,
    pid_alive,
    wait_for,
)
from tinyacp import (
    AgentExited,
    ClientBusy,
    ClientClosed,
    DecisionSource,
    MessageKind,
    ObserverError,
    PermissionPolicy,
    PermissionReply,
    StopReason,
    UpdateKind,
    UsageError,
)
from tinyacp._process import STDERR_TAIL_BYTES, _live_group_members

# Every blocking call gets a deadline, so a broken promise fails the test instead of hanging it.
TIMEOUT = 20.0

UPDATE_EXAMPLES = ACP / "examples" / "session_update_examples.jsonl"
REPORT_AGENT = AGENTS / "report_agent.py"
PROC_AGENT = AGENTS / "proc_agent.py"

# The permission options of released agents (REAL_AGENTS.md): (allow_once, allow_always, reject_once) ids.
REAL_AGENT_OPTION_IDS = {
    "claude": ("allow", "allow_always", "reject"),
    "codex": ("approved", "approved-execpolicy-amendment", "abort"),
    "gemini": ("proceed_once", "proceed_always", "cancel"),
    "opencode": ("once", "always", "reject"),
}


def offered(agent: str) -> list[dict[str, str]]:
    """The agent's options, allow_always first, so that choosing the first option is never right by luck."""
    allow_once, allow_always, reject_once = REAL_AGENT_OPTION_IDS[agent]
    return [
        {"optionId": allow_always, "name": "Always allow", "kind": "allow_always"},
        {"optionId": reject_once, "name": "Reject", "kind": "reject_once"},
        {"optionId": allow_once, "name": "Allow once", "kind": "allow_once"},
    ]


CLAUDE_OPTIONS = [*offered("claude"), {"optionId": "reject_always", "name": "Never", "kind": "reject_always"}]


def ask(
    request_id: int | str,
    options: list[dict[str, str]],
    *,
    kind: str = "edit",
    title: str = "Write notes.txt",
    session: str = "s1",
    **extra: Any,
) -> dict[str, Any]:
    """A scripted ``session/request_permission`` step; the agent waits for the answer."""
    tool_call = {"toolCallId": f"call_{request_id}", "title": title, "kind": kind, "status": "pending"}
    params = {"sessionId": session, "toolCall": tool_call, "options": options}
    return {"op": "request", "method": "session/request_permission", "id": request_id, "params": params, **extra}


def update(payload: dict[str, Any], session: str = "s1") -> dict[str, Any]:
    return {"op": "update", "update": payload, "session": session}


def answer_prompt(reason: str) -> dict[str, Any]:
    """Answer the first prompt (id 2: initialize is 0, session/new 1), whatever the agent expected since."""
    response = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": reason}}
    return {"op": "raw", "line": json.dumps(response)}


def id_key(request_id: object) -> tuple[str, object]:
    # JSON 7 and "7" are different ids: compare with the type.
    return (type(request_id).__name__, request_id)


def answers(agent: Scripted) -> dict[tuple[str, object], dict[str, Any]]:
    """The responses that reached the agent, by (type, id)."""
    return {id_key(message.get("id")): message for message in agent.received() if "method" not in message}


def chosen(agent: Scripted, request_id: int | str) -> dict[str, Any]:
    """The outcome the agent received for one of its permission requests."""
    outcome: dict[str, Any] = answers(agent)[id_key(request_id)]["result"]["outcome"]
    return outcome


def open_session(
    make_client: MakeClient, agent: Scripted, cwd: Path, **options: Any
) -> tuple[ClientLike, tinyacp.Session]:
    """A client past initialize and session/new; a Recorder observer and a deadline unless given."""
    options.setdefault("observer", Recorder())
    options.setdefault("timeout", TIMEOUT)
    client = make_client(command=agent.argv, **options)
    client.initialize()
    return client, client.new_session(cwd)


def group_gone(client: ClientLike | tinyacp.AsyncClient) -> bool:
    return not _live_group_members(client.pid)


def call_after_close(client: ClientLike, name: str, *args: Any) -> Any:
    """Call a method of a closed client (the facade keeps its loop until the test ends)."""
    return getattr(client, name)(*args)


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# ----------------------------------------------------------------------------------------------------------------
# Starting the agent.


def test_agent_runs_in_a_process_group_of_its_own(make_client: MakeClient, tmp_path: Path) -> None:
    client = make_client(command=[sys.executable, str(REPORT_AGENT)], observer=Recorder(), timeout=TIMEOUT)
    client.initialize()
    report = json.loads(client.prompt(client.new_session(tmp_path).id, "who are you?").text)

    assert report["pid"] == client.pid
    assert report["pgid"] == report["pid"]
    assert os.getpgid(client.pid) == client.pid
    assert report["pgid"] != os.getpgid(0)


def test_a_missing_program_raises_spawn_error_and_leaks_no_fd(make_client: MakeClient, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    make_client(command=[sys.executable, "-c", "pass"]).close()  # what a first client opens once is not a leak
    before = fd_count()

    with pytest.raises(tinyacp.SpawnError, match="no-such-agent") as caught:
        make_client(command=[missing, "--acp"])

    assert isinstance(caught.value.__cause__, FileNotFoundError)
    assert fd_count() == before


def test_a_missing_working_directory_raises_spawn_error_and_leaks_no_fd(
    make_client: MakeClient, tmp_path: Path
) -> None:
    make_client(command=[sys.executable, "-c", "pass"]).close()
    before = fd_count()

    with pytest.raises(tinyacp.SpawnError, match="working directory") as caught:
        make_client(command=[sys.executable, "-c", "pass"], cwd=tmp_path / "gone")

    assert isinstance(caught.value.__cause__, OSError)
    assert fd_count() == before


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"command": ["agent"], "epoch": 0}, ValueError),
        ({"command": ["agent"], "epoch": -1}, ValueError),
        ({"command": ["agent"], "epoch": True}, ValueError),
        ({"command": "agent --acp"}, TypeError),
        ({"command": []}, ValueError),
        ({"command": ["agent"], "kill_grace": -1}, ValueError),
    ],
    ids=["epoch-0", "epoch-negative", "epoch-bool", "command-str", "command-empty", "grace-negative"],
)
def test_invalid_options_are_refused_before_anything_starts(
    make_client: MakeClient, options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        make_client(**options)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"command": ["agent", "--flag\0"]}, r"command\[1\] .* NUL byte"),
        ({"command": ["agent"], "cwd": "/srv/work\0/x"}, r"cwd .* NUL byte"),
        ({"command": ["agent"], "env": {"TOKEN": "abc\0def"}}, r"env\['TOKEN'\] holds a NUL byte"),
        ({"command": ["agent"], "env": {"A=B": "1"}}, r"env name 'A=B'"),
        ({"command": ["agent"], "env": {"": "1"}}, r"env name ''"),
    ],
    ids=["argument", "cwd", "env-value", "env-name-equals", "env-name-empty"],
)
def test_what_no_program_can_be_given_is_refused_naming_where_it_is(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        tinyacp.Options(observer=tinyacp.BaseObserver(), **options)


def test_env_none_inherits_ours_and_a_mapping_is_the_whole_environment(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINYACP_TEST_INHERITED", "from the parent")
    # Without PYTHONCOERCECLOCALE=0 the agent's Python would add LC_CTYPE to an environment with no locale.
    exact = {"TINYACP_TEST_ONLY": "this one", "PYTHONCOERCECLOCALE": "0"}
    reports = []
    for env in (None, exact):
        client = make_client(command=[sys.executable, str(REPORT_AGENT)], env=env, observer=Recorder(), timeout=TIMEOUT)
        client.initialize()
        reports.append(json.loads(client.prompt(client.new_session(tmp_path).id, "env?").text))

    inherited, given = reports
    assert inherited["env"]["TINYACP_TEST_INHERITED"] == "from the parent"
    # A superset: C libraries (readline, curses) may set variables such as COLUMNS behind os.environ's back.
    assert inherited["env"].items() >= os.environ.items()
    assert given["env"] == exact


def test_cwd_option_sets_the_agents_working_directory(make_client: MakeClient, tmp_path: Path) -> None:
    workdir = tmp_path / "agent-home"
    workdir.mkdir()
    client = make_client(command=[sys.executable, str(REPORT_AGENT)], cwd=workdir, observer=Recorder(), timeout=TIMEOUT)
    client.initialize()

    report = json.loads(client.prompt(client.new_session(tmp_path).id, "where?").text)

    assert os.path.samefile(report["cwd"], workdir)


def test_stderr_is_discarded_by_default_so_a_chatty_agent_still_answers(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    # 4 MiB is 64 times a pipe's buffer: an undrained stderr pipe would block the agent before it answers.
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "stderr", "size": 4 << 20},
            {"op": "reply", "result": INIT_RESULT},
            {"op": "expect", "method": "session/new"},
            {"op": "stderr", "size": 4 << 20},
            {"op": "reply", "result": {"sessionId": "s1"}},
        ]
    )
    client, session = open_session(make_client, agent, tmp_path)

    assert session.id == "s1"
    assert client.stderr_tail() is None


def test_stderr_tail_keeps_the_last_bytes_and_agent_exited_carries_them(make_client: MakeClient) -> None:
    # proc_agent writes one line (not JSON-RPC) to stdout, then SIZE bytes of a 251-byte pattern to stderr,
    # then exits: the tail is the pattern's last 64 KiB, which differ from its first.
    size = 5 * STDERR_TAIL_BYTES + 1234
    pattern = bytes(range(251))
    written = (pattern * (size // len(pattern) + 1))[:size]
    client = make_client(
        command=[sys.executable, str(PROC_AGENT), "--stderr-bytes", str(size)], stderr="tail", timeout=TIMEOUT
    )

    with pytest.raises(AgentExited) as caught:
        client.initialize()

    assert caught.value.returncode == 0
    assert caught.value.stderr_tail == written[-STDERR_TAIL_BYTES:]
    assert "agent stderr (tail)" in str(caught.value)
    assert str(caught.value).startswith(caught.value.message + "\n--- agent stderr (tail) ---\n")
    assert "\n" not in caught.value.message  # the command shows it on one line, the tail apart
    assert client.stderr_tail() == written[-STDERR_TAIL_BYTES:]


# ----------------------------------------------------------------------------------------------------------------
# initialize and session/new.


def test_initialize_offers_protocol_version_1_boolean_config_options_notices_and_compaction(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(handshake())
    open_session(make_client, agent, tmp_path)

    sent = agent.received()[0]
    assert sent["method"] == "initialize"
    assert sent["params"]["protocolVersion"] == 1
    capabilities = sent["params"]["clientCapabilities"]
    assert capabilities["fs"] == {"readTextFile": False, "writeTextFile": False}
    assert capabilities.get("terminal", False) is False
    assert capabilities["session"] == {"configOptions": {"boolean": {}}, "notices": {}, "compaction": {}}
    assert set(capabilities) <= {"fs", "terminal", "session"}  # the default features: no elicitation, no auth
    assert sent["params"]["clientInfo"]["name"] == "tinyacp"


def test_initialize_returns_the_agents_answer(make_client: MakeClient, scripted: MakeScripted) -> None:
    init = {**INIT_RESULT, "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}}}
    agent = scripted([{"op": "expect", "method": "initialize"}, {"op": "reply", "result": init}])
    client = make_client(command=agent.argv, timeout=TIMEOUT)

    answer = client.initialize()

    assert answer.protocol_version == 1
    assert answer.agent_capabilities.load_session is True
    assert answer.agent_capabilities.prompt_capabilities.image is True
    assert answer.agent_info is not None
    assert answer.agent_info.name == "scripted"


def test_unsupported_protocol_version_tears_the_agent_down(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [{"op": "expect", "method": "initialize"}, {"op": "reply", "result": {**INIT_RESULT, "protocolVersion": 2}}]
    )
    client = make_client(command=agent.argv, timeout=TIMEOUT)

    with pytest.raises(tinyacp.UnsupportedProtocolVersion) as caught:
        client.initialize()

    assert caught.value.version == 2
    assert client.closed
    assert client.returncode is not None
    assert group_gone(client)
    with pytest.raises(ClientClosed):
        client.new_session(tmp_path)


def test_new_session_returns_the_session_id_and_modes(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    modes = {
        "currentModeId": "ask",
        "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "Edits"}],
    }
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": INIT_RESULT},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "sess-42", "modes": modes, "models": {"ignored": True}}},
        ]
    )

    _, session = open_session(make_client, agent, tmp_path)

    assert session.id == "sess-42"
    assert session.modes is not None
    assert session.modes.current_mode_id == "ask"
    assert [(mode.id, mode.name, mode.description) for mode in session.modes.available_modes] == [
        ("ask", "Ask", None),
        ("code", "Code", "Edits"),
    ]


def test_new_session_sends_a_relative_cwd_as_an_absolute_path(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    agent = scripted(handshake())

    open_session(make_client, agent, Path("work"))

    (new,) = [message for message in agent.received() if message.get("method") == "session/new"]
    assert new["params"]["cwd"] == os.path.join(os.getcwd(), "work")
    assert new["params"]["mcpServers"] == []


# ----------------------------------------------------------------------------------------------------------------
# Updates.


def test_every_update_kind_reaches_the_observer_in_order_with_the_agents_exact_bytes(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    lines = [line for line in UPDATE_EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    kinds = [json.loads(line)["params"]["update"]["sessionUpdate"] for line in lines]
    assert sorted(kinds) == sorted(UPDATE_KINDS)  # the kinds of v1.21; the newer ones: test_newer_client.py
    (session_id,) = {json.loads(line)["params"]["sessionId"] for line in lines}
    agent = scripted([*handshake(session_id), *({"op": "raw", "line": line} for line in lines), end_turn()])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    result = client.prompt(session.id, "show me everything")

    updates = recorder.updates
    assert [u.seq for u in updates] == list(range(1, 12))
    assert [u.raw for u in updates] == [line.encode() for line in lines]
    assert [u.kind for u in updates] == [UpdateKind(kind) for kind in kinds]
    assert all(u.session_id == session_id and u.epoch == 1 for u in updates)
    assert result.update_count == 11
    assert result.chunk_count == 1
    assert result.text == "Hi!"


def test_seq_counts_over_the_clients_life_not_per_prompt_or_session(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake("s1"),
            update(chunk("one")),
            update(chunk("two")),
            end_turn(),
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s2"}},
            {"op": "expect", "method": "session/prompt"},
            update(chunk("three"), session="s2"),
            update(chunk("four"), session="s1"),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client, first = open_session(make_client, agent, tmp_path, observer=recorder, epoch=7)
    client.prompt(first.id, "first")
    second = client.new_session(tmp_path)

    result = client.prompt(second.id, "second")

    assert [(u.seq, u.session_id, u.text) for u in recorder.updates] == [
        (1, "s1", "one"),
        (2, "s1", "two"),
        (3, "s2", "three"),
        (4, "s1", "four"),
    ]
    assert {u.epoch for u in recorder.updates} == {7}
    assert result.text == "three"  # only the prompted session's chunks make the reply


# ----------------------------------------------------------------------------------------------------------------
# The prompt's result.


def test_prompt_result_text_joins_only_this_turns_message_chunks_in_order(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}
    tool_call = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read", "kind": "read"}
    agent = scripted(
        [
            *handshake(),
            update(chunk("Hel")),
            update(thought),
            update(chunk("lo, ")),
            update(tool_call),
            update(chunk("elsewhere"), session="other"),
            update(chunk("wörld")),
            end_turn(),
            {"op": "expect", "method": "session/prompt"},
            update(chunk("second")),
            end_turn(),
        ]
    )
    client, session = open_session(make_client, agent, tmp_path)

    first = client.prompt(session.id, "one")
    second = client.prompt(session.id, "two")

    assert (first.text, first.chunk_count, first.update_count) == ("Hello, wörld", 3, 5)
    assert (first.session_id, first.overflow, first.timed_out, first.cancelled) == ("s1", None, False, False)
    assert (second.text, second.chunk_count, second.update_count) == ("second", 1, 1)


def test_prompt_reports_each_stop_reason_and_keeps_an_unknown_one_as_a_string(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    reasons = ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "paused_for_tea"]
    steps = [*handshake(), end_turn(reasons[0])]
    for reason in reasons[1:]:
        steps += [{"op": "expect", "method": "session/prompt"}, end_turn(reason)]
    steps[-1] = {"op": "reply", "result": {"stopReason": reasons[-1], "usage": {"inputTokens": 3}, "extra": 1}}
    client, session = open_session(make_client, scripted(steps), tmp_path)

    results = [client.prompt(session.id, f"prompt {n}") for n in range(len(reasons))]

    assert [r.stop_reason for r in results[:5]] == [StopReason(reason) for reason in reasons[:5]]
    assert results[5].stop_reason == "paused_for_tea"
    assert not isinstance(results[5].stop_reason, StopReason)
    assert results[5].meta == {"extra": 1}
    assert results[5].usage == tinyacp.TurnUsage(input_tokens=3)


def test_an_update_after_the_prompt_response_is_recorded_during_the_next_call(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    late = {"sessionUpdate": "available_commands_update", "availableCommands": []}
    agent = scripted(
        [
            *handshake(),
            update(chunk("one")),
            end_turn(),
            update(late),  # codex-acp did this
            {"op": "expect", "method": "session/prompt"},
            update(chunk("two")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)
    client.prompt(session.id, "one")

    second = client.prompt(session.id, "two")

    assert [(u.seq, u.kind) for u in recorder.updates] == [
        (1, UpdateKind.AGENT_MESSAGE_CHUNK),
        (2, UpdateKind.AVAILABLE_COMMANDS_UPDATE),
        (3, UpdateKind.AGENT_MESSAGE_CHUNK),
    ]
    assert second.text == "two"


def test_updates_that_came_in_one_read_with_an_answer_are_recorded_in_order_by_the_next_call(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    response = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}  # 0 initialize, 1 session/new
    late = [chunk("late "), {"sessionUpdate": "available_commands_update", "availableCommands": []}, chunk("too")]
    notifications = [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": payload}}
        for payload in late
    ]
    # One write: the answer and the updates after it reach the client in one read, so the first prompt returns
    # with the updates read but not yet handled.
    both = "".join(json.dumps(message) + "\n" for message in [response, *notifications]).encode()
    agent = scripted(
        [
            *handshake(),
            {"op": "raw_b64", "data": base64.b64encode(both).decode()},
            {"op": "expect", "method": "session/prompt"},
            update(chunk("!")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)
    first = client.prompt(session.id, "one")
    assert recorder.updates == []

    second = client.prompt(session.id, "two")

    assert [u.raw for u in recorder.updates] == [json.dumps(message).encode() for message in notifications] + [
        recorder.updates[-1].raw
    ]
    assert [u.seq for u in recorder.updates] == [1, 2, 3, 4]
    assert (first.text, first.chunk_count) == ("", 0)
    # What reached the client after an answer counts in the turn in flight when it is handled, as before.
    assert (second.text, second.chunk_count, second.update_count) == ("late too!", 3, 4)


def test_an_update_after_the_last_response_is_recorded_at_close(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    late = {"sessionUpdate": "available_commands_update", "availableCommands": []}
    response = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}  # 0 initialize, 1 session/new
    notification = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": late}}
    # One write, so the late update is in the pipe (or our buffer) by the time the prompt returns.
    both = (json.dumps(response) + "\n" + json.dumps(notification) + "\n").encode()
    agent = scripted([*handshake(), {"op": "raw_b64", "data": base64.b64encode(both).decode()}])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)
    client.prompt(session.id, "one")

    client.close()

    assert [u.kind for u in recorder.updates] == [UpdateKind.AVAILABLE_COMMANDS_UPDATE]
    assert recorder.updates[0].raw == json.dumps(notification).encode()


# ----------------------------------------------------------------------------------------------------------------
# Permission requests.


def test_the_observer_decides_a_permission_request_by_option_id(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake(),
            ask(0, CLAUDE_OPTIONS),
            ask(1, CLAUDE_OPTIONS),
            ask(2, CLAUDE_OPTIONS),
            end_turn(),
        ]
    )
    replies = {
        0: PermissionReply.select("reject_always"),
        1: PermissionReply.select("allow_always"),
        2: PermissionReply.select("not-offered"),  # treated as a rejection
    }
    recorder = Recorder(decide=lambda request: replies[request.request_id])  # type: ignore[index]
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    client.prompt(session.id, "go")

    assert [chosen(agent, n) for n in range(3)] == [
        {"outcome": "selected", "optionId": "reject_always"},
        {"outcome": "selected", "optionId": "allow_always"},
        {"outcome": "selected", "optionId": "reject"},
    ]
    decided = recorder.of("permission_decision")
    assert [r.decided_by for r in decided] == [DecisionSource.OBSERVER] * 3
    assert [r.allowed for r in decided] == [False, True, False]


def test_allow_and_reject_map_onto_each_real_agents_options_by_kind(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    cases = [(agent, action) for agent in REAL_AGENT_OPTION_IDS for action in ("allow", "reject")]
    steps = [*handshake()]
    for number, (name, action) in enumerate(cases):
        steps.append(ask(number, offered(name), title=f"{name} {action}"))
    agent = scripted([*steps, end_turn()])

    def decide(request: tinyacp.PermissionRequest) -> PermissionReply:
        action = (request.tool_call.title or "").split()[1]
        return PermissionReply.allow() if action == "allow" else PermissionReply.reject()

    client, session = open_session(make_client, agent, tmp_path, observer=Recorder(decide=decide))

    client.prompt(session.id, "go")

    for number, (name, action) in enumerate(cases):
        allow_once, _, reject_once = REAL_AGENT_OPTION_IDS[name]
        expected = allow_once if action == "allow" else reject_once
        assert chosen(agent, number) == {"outcome": "selected", "optionId": expected}, (name, action)


# qwen-code 0.24.4's options for a shell command, in its order: two lasting "always" options come first, and the
# first of them writes a rule into <cwd>/.qwen/settings.json.
QWEN_EXEC_OPTIONS = [
    {"optionId": "proceed_always_project", "name": "Always Allow in project: ls", "kind": "allow_always"},
    {"optionId": "proceed_always_user", "name": "Always Allow for user: ls", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
]


def test_an_allowed_qwen_command_is_answered_with_allow_once_never_its_first_always_allow_in_project_option(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake(),
            ask(0, QWEN_EXEC_OPTIONS, kind="execute", title="ls"),
            ask(1, QWEN_EXEC_OPTIONS, kind="execute", title="rm -rf build"),
            ask(2, QWEN_EXEC_OPTIONS, kind="execute", title="ls -l"),
            end_turn(),
        ]
    )

    def decide(request: tinyacp.PermissionRequest) -> PermissionReply | None:
        return PermissionReply.allow() if request.tool_call.title == "ls -l" else None

    policy = PermissionPolicy(title_prefixes=("ls",))
    client, session = open_session(make_client, agent, tmp_path, observer=Recorder(decide=decide), policy=policy)

    client.prompt(session.id, "go")

    # The policy's allow (0), its default reject (1), and the observer's allow (2): chosen by kind, never by place.
    assert [chosen(agent, n)["optionId"] for n in range(3)] == ["proceed_once", "cancel", "proceed_once"]


def test_the_policy_allows_by_kind_and_by_title_prefix(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake(),
            ask(0, offered("gemini"), kind="read", title="cat README.md"),
            ask(1, offered("gemini"), kind="edit", title="Write notes.txt"),
            ask(2, offered("gemini"), kind="execute", title="rm -rf build"),
            ask(3, offered("gemini"), kind="edit", title="Write secrets.txt"),
            end_turn(),
        ]
    )
    recorder = Recorder()
    policy = PermissionPolicy(kinds={"read"}, title_prefixes=("Write notes",))
    client, session = open_session(make_client, agent, tmp_path, observer=recorder, policy=policy)

    client.prompt(session.id, "go")

    assert [chosen(agent, n)["optionId"] for n in range(4)] == ["proceed_once", "proceed_once", "cancel", "cancel"]
    assert [r.decided_by for r in recorder.of("permission_decision")] == [
        DecisionSource.POLICY,
        DecisionSource.POLICY,
        DecisionSource.DEFAULT_REJECT,
        DecisionSource.DEFAULT_REJECT,
    ]


def test_permission_requests_are_rejected_by_default(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    only_allow = [option for option in offered("codex") if option["kind"].startswith("allow")]
    agent = scripted([*handshake(), ask(0, offered("codex"), kind="read"), ask(1, only_allow), end_turn()])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    client.prompt(session.id, "go")

    assert chosen(agent, 0) == {"outcome": "selected", "optionId": "abort"}
    assert chosen(agent, 1) == {"outcome": "cancelled"}  # no reject option offered: refuse all the same
    assert [r.decided_by for r in recorder.of("permission_decision")] == [DecisionSource.DEFAULT_REJECT] * 2


def test_the_agent_gets_the_permission_answer_only_after_on_permission_decision_returned(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    marker = tmp_path / "decision-recorded"
    agent = scripted([*handshake(), ask(0, CLAUDE_OPTIONS, check_file=str(marker)), end_turn()])
    recorder = Recorder(decide=lambda request: PermissionReply.allow(), on_decision=lambda request: marker.touch())
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    result = client.prompt(session.id, "go")

    assert result.text == "file:yes"
    events = [(name, value) for name, value in recorder.events if name != "message"]
    decision = [name for name, _ in events].index("permission_decision")
    name, answer = events[decision + 1]  # the answer's record comes right after the decision
    assert (name, answer.method, answer.id) == ("send", None, 0)
    assert chosen(agent, 0) == {"outcome": "selected", "optionId": "allow"}


class Failing(Recorder):
    """A recorder whose method ``where`` raises ``error``."""

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where
        self.error = RuntimeError(f"the journal is full ({where})")

    def _maybe_fail(self, name: str) -> None:
        if name == self.where:
            raise self.error

    def on_update(self, update: tinyacp.Update) -> None:
        super().on_update(update)
        self._maybe_fail("on_update")

    def on_permission_request(self, request: tinyacp.PermissionRequest) -> tinyacp.PermissionReply | None:
        reply = super().on_permission_request(request)
        self._maybe_fail("on_permission_request")
        return reply

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        super().on_permission_decision(request)
        self._maybe_fail("on_permission_decision")


@pytest.mark.parametrize("where", ["on_update", "on_permission_request", "on_permission_decision"])
def test_an_observer_that_raises_stops_everything_before_the_client_acts(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path, where: str
) -> None:
    # The agent ignores SIGTERM, so it reads (and logs) whatever we wrote before it sees its stdin close.
    agent = scripted([{"op": "ignore_sigterm"}, *handshake(), update(chunk("before")), ask(5, CLAUDE_OPTIONS)])
    observer = Failing(where)
    # The policy allows everything: an answer that slipped out would be the worst one, an allow.
    client, session = open_session(
        make_client, agent, tmp_path, observer=observer, policy=PermissionPolicy(allow_all=True), kill_grace=5.0
    )

    with pytest.raises(ObserverError) as caught:
        client.prompt(session.id, "go")

    assert caught.value.__cause__ is observer.error
    assert client.closed
    assert client.returncode is not None and client.returncode >= 0  # it ended by itself, after reading all
    assert group_gone(client)
    assert id_key(5) not in answers(agent)
    assert [m.method for m in observer.of("send")] == ["initialize", "session/new", "session/prompt"]
    with pytest.raises(ClientClosed):
        client.prompt(session.id, "again")


def test_a_client_without_an_observer_is_refused_when_made_with_a_message_that_says_what_to_pass(
    client_kind: str, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    options = tinyacp.Options(command=command)  # the options alone may lack it, to be completed later

    with pytest.raises(tinyacp.MissingDurableObserver) as caught:
        if client_kind == "sync":
            tinyacp.Client(options)
        else:
            AsyncFacade(options)

    message = str(caught.value)
    assert "observer=tinyacp.JsonlJournal(" in message and "observer=tinyacp.BaseObserver()" in message
    assert isinstance(caught.value, tinyacp.UsageError)
    assert not marker.exists()  # nothing was started


# ----------------------------------------------------------------------------------------------------------------
# Requests we do not serve, ids, and lines that are not messages.


def test_requests_we_do_not_serve_get_method_not_found_with_their_id_echoed(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    read = {"sessionId": "s1", "path": str(tmp_path / "notes.txt")}
    terminal = {"sessionId": "s1", "command": "ls"}
    agent = scripted(
        [
            *handshake(),
            {"op": "request", "method": "fs/read_text_file", "id": 7, "params": read},
            {"op": "request", "method": "terminal/create", "id": "7", "params": terminal},
            update(chunk("carried on")),
            end_turn(),
        ]
    )
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    result = client.prompt(session.id, "go")

    for request_id in (7, "7"):
        answer = answers(agent)[id_key(request_id)]
        assert (answer["jsonrpc"], answer["id"]) == ("2.0", request_id)
        assert (answer["error"]["code"], answer["error"]["message"]) == (-32601, "Method not found")
    requests = [m for m in recorder.of("message") if m.kind is MessageKind.REQUEST]
    assert [(m.method, m.id) for m in requests] == [("fs/read_text_file", 7), ("terminal/create", "7")]
    assert result.text == "carried on"


def test_string_permission_request_ids_are_echoed_exactly(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    uuid = "ad12f768-3946-4658-9fee-661169fd3d47"  # codex-acp's kind of id
    agent = scripted([*handshake(), ask(uuid, offered("codex")), ask("0", offered("codex")), end_turn()])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    client.prompt(session.id, "go")

    assert chosen(agent, uuid) == {"outcome": "selected", "optionId": "abort"}
    assert chosen(agent, "0") == {"outcome": "selected", "optionId": "abort"}
    assert id_key(0) not in answers(agent)
    assert [r.request_id for r in recorder.of("permission_request")] == [uuid, "0"]


def test_lines_that_are_not_json_rpc_messages_are_recorded_and_skipped(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    junk = [
        "Loading model weights...",  # a log line on stdout
        '{"jsonrpc":"2.0","method":"session/update","params":',  # cut short
        "[1, 2, 3]",
        '"just a string"',
        '{"hello": "world"}',
        '{"jsonrpc":"1.0","method":"session/update","params":{}}',
        '{"jsonrpc":"2.0"}',
    ]
    agent = scripted([*handshake(), *({"op": "raw", "line": line} for line in junk), update(chunk("ok")), end_turn()])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    result = client.prompt(session.id, "go")

    invalid = [m for m in recorder.of("message") if m.kind is MessageKind.INVALID]
    assert [m.raw for m in invalid] == [line.encode() for line in junk]
    assert all(m.detail for m in invalid)
    assert result.text == "ok"
    assert [u.seq for u in recorder.updates] == [1]


def test_an_error_response_raises_request_error_and_the_client_stays_usable(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake(),
            {"op": "reply_error", "code": -32000, "message": "Authentication required", "data": {"retry": False}},
            {"op": "expect", "method": "session/prompt"},
            update(chunk("fine now")),
            end_turn(),
        ]
    )
    client, session = open_session(make_client, agent, tmp_path)

    with pytest.raises(tinyacp.RequestError) as caught:
        client.prompt(session.id, "first")

    error = caught.value
    assert (error.method, error.code, error.message, error.data) == (
        "session/prompt",
        -32000,
        "Authentication required",
        {"retry": False},
    )
    assert not client.closed
    assert client.prompt(session.id, "second").text == "fine now"


# ----------------------------------------------------------------------------------------------------------------
# cancel() and kill().


def test_cancel_from_another_thread_during_a_prompt(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake(),
            update(chunk("working")),
            {"op": "expect", "method": "session/cancel"},
            ask(3, CLAUDE_OPTIONS),
            update(chunk(", stopped")),
            answer_prompt("cancelled"),
        ]
    )
    recorder = Recorder(decide=lambda request: PermissionReply.allow())  # the cancel overrides the observer
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    def cancel_once_working() -> None:
        wait_for(lambda: len(recorder.updates) >= 1, what="the first update")
        client.cancel(session.id)

    canceller = Background(cancel_once_working)
    result = client.prompt(session.id, "go")
    canceller.join()

    assert result.stop_reason is StopReason.CANCELLED
    assert result.cancelled
    assert not result.timed_out  # our cancel ended the turn, not the deadline's
    assert result.text == "working, stopped"
    assert chosen(agent, 3) == {"outcome": "cancelled"}
    assert [r.decided_by for r in recorder.of("permission_decision")] == [DecisionSource.CANCELLED]
    assert [u.text for u in recorder.updates] == ["working", ", stopped"]
    client.close()
    assert agent.methods().count("session/cancel") == 1
    assert [m.method for m in recorder.of("send")].count("session/cancel") == 1


def test_cancel_with_no_call_in_flight_is_written_at_once(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(
        [
            *handshake(),
            end_turn(),
            {"op": "expect", "method": "session/cancel"},
            {"op": "expect", "method": "session/prompt"},
            end_turn(),
        ]
    )
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)
    client.prompt(session.id, "one")

    client.cancel(session.id)

    wait_for(lambda: "session/cancel" in agent.methods(), what="the cancel to reach the agent")
    assert recorder.of("send")[-1].method == "session/cancel"
    assert not client.prompt(session.id, "two").cancelled
    assert agent.methods().count("session/cancel") == 1


@pytest.mark.parametrize("stubborn", [False, True], ids=["obeys-sigterm", "ignores-sigterm"])
def test_kill_from_another_thread_ends_a_prompt_with_agent_exited(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path, stubborn: bool
) -> None:
    first = [{"op": "ignore_sigterm"}] if stubborn else []
    agent = scripted([*first, *handshake(), update(chunk("busy")), {"op": "hang"}])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder, kill_grace=0.2)

    def kill_once_busy() -> None:
        wait_for(lambda: len(recorder.updates) >= 1, what="the first update")
        client.kill()

    killer = Background(kill_once_busy)
    # The prompt's deadline is far off: only kill() can end this turn in time.
    with pytest.raises(AgentExited) as caught:
        client.prompt(session.id, "go", timeout=60)
    killer.join()

    assert caught.value.signal == (signal.SIGKILL if stubborn else signal.SIGTERM)
    assert group_gone(client)
    assert client.closed
    with pytest.raises(ClientClosed):
        client.prompt(session.id, "again")


def test_an_agent_exiting_mid_prompt_raises_agent_exited_with_its_exit_code(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted([*handshake(), update(chunk("partial")), {"op": "exit", "code": 3}])
    recorder = Recorder()
    client, session = open_session(make_client, agent, tmp_path, observer=recorder)

    with pytest.raises(AgentExited, match="exit code 3") as caught:
        client.prompt(session.id, "go", timeout=60)

    assert caught.value.returncode == 3
    assert caught.value.signal is None
    assert [u.text for u in recorder.updates] == ["partial"]  # what came before the exit is recorded
    assert client.closed


def test_an_agent_killed_by_a_signal_mid_prompt_raises_agent_exited_naming_it(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted([*handshake(), {"op": "exit", "signal": int(signal.SIGKILL)}])
    client, session = open_session(make_client, agent, tmp_path)

    with pytest.raises(AgentExited, match="SIGKILL") as caught:
        client.prompt(session.id, "go", timeout=60)

    assert caught.value.signal == signal.SIGKILL
    assert caught.value.returncode == -signal.SIGKILL


def test_an_agent_closing_its_stdout_but_running_on_raises_agent_exited_and_is_stopped(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted([*handshake(), {"op": "close_stdout"}, {"op": "hang"}])
    client, session = open_session(make_client, agent, tmp_path, kill_grace=0.2)

    with pytest.raises(AgentExited, match="closed its output"):
        client.prompt(session.id, "go", timeout=60)

    assert client.returncode is not None
    assert not pid_alive(client.pid)
    assert group_gone(client)


# ----------------------------------------------------------------------------------------------------------------
# close() and one call at a time.

# Started by the agent: ignores SIGTERM, then appends its pid to the file argv[1] (so the test knows the
# disposition is in place), then waits. With "orphan" it first starts such a process and exits, leaving it
# reparented to init but still in the agent's process group (what an agent run through npx looks like).
STUBBORN = """
import os, signal, subprocess, sys, time
if sys.argv[2] == "orphan":
    subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[1], "-", sys.argv[3]])
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "a") as ready:
    ready.write(f"{os.getpid()}\\n")
time.sleep(60)
"""


def test_close_ends_every_process_the_agent_started_even_those_ignoring_sigterm(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    spawned, ready = tmp_path / "spawned.pids", tmp_path / "ready.pids"
    plain = [sys.executable, "-c", "import time; time.sleep(60)"]
    stubborn = [sys.executable, "-c", STUBBORN, str(ready), "-", STUBBORN]
    orphaner = [sys.executable, "-c", STUBBORN, str(ready), "orphan", STUBBORN]
    spawns = [{"op": "spawn", "argv": argv, "pidfile": str(spawned)} for argv in (plain, plain, stubborn, orphaner)]
    agent = scripted([{"op": "expect", "method": "initialize"}, *spawns, {"op": "reply", "result": INIT_RESULT}])
    client = make_client(command=agent.argv, timeout=TIMEOUT, kill_grace=0.2)
    client.initialize()
    wait_for(lambda: ready.exists() and len(ready.read_text().split()) == 2, what="the stubborn processes")
    pids = [int(pid) for pid in spawned.read_text().split()[:2] + ready.read_text().split()]
    assert all(pid_alive(pid) and os.getpgid(pid) == client.pid for pid in pids)

    client.close()

    assert [pid for pid in pids if pid_alive(pid)] == []
    assert group_gone(client)
    client.close()  # twice is fine
    for name, args in (("initialize", ()), ("new_session", (tmp_path,)), ("prompt", ("s1", "hi")), ("cancel", ("s1",))):
        with pytest.raises(ClientClosed):
            call_after_close(client, name, *args)


@pytest.mark.parametrize("client_kind", ["sync"])  # two threads on one sync client; AsyncClient: see below
def test_a_second_call_from_another_thread_while_one_is_in_flight_raises_client_busy(
    make_client: MakeClient, scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted([*handshake(), {"op": "expect", "method": "session/cancel"}, answer_prompt("cancelled")])
    client, session = open_session(make_client, agent, tmp_path)
    first = Background(lambda: client.prompt(session.id, "first"))
    wait_for(lambda: "session/prompt" in agent.methods(), what="the first prompt to reach the agent")

    for call in (client.initialize, lambda: client.new_session(tmp_path), lambda: client.prompt(session.id, "2")):
        with pytest.raises(ClientBusy):
            call()

    client.cancel(session.id)  # cancel is the one call allowed alongside
    result = first.join()
    assert (result.stop_reason, result.timed_out) == (StopReason.CANCELLED, False)
    assert agent.methods().count("session/prompt") == 1


# ----------------------------------------------------------------------------------------------------------------
# AsyncClient only, driven from asyncio.run.


def run_async(main: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(2 * TIMEOUT):
            await main()

    asyncio.run(bounded())


async def until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """``wait_for`` for coroutines: poll without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def async_client(command: list[str], **options: Any) -> AsyncIterator[tinyacp.AsyncClient]:
    """An AsyncClient, closed after; then no process of its agent's group may be left, and the agent is reaped."""
    options.setdefault("timeout", TIMEOUT)
    options.setdefault("observer", tinyacp.BaseObserver())
    client = tinyacp.AsyncClient(tinyacp.Options(command=command, **options))
    try:
        yield client
    finally:
        await client.close()
        await until(lambda: group_gone(client), what=f"agent group {client.pid} gone")
        with pytest.raises(ChildProcessError):
            os.waitpid(client.pid, os.WNOHANG)


def test_async_a_second_call_from_another_task_while_one_is_in_flight_raises_client_busy(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted([*handshake(), {"op": "expect", "method": "session/cancel"}, answer_prompt("cancelled")])

    async def main() -> None:
        async with async_client(agent.argv, observer=Recorder()) as client:
            await client.initialize()
            session = await client.new_session(tmp_path)
            first = asyncio.create_task(client.prompt(session.id, "first"))
            await until(lambda: "session/prompt" in agent.methods(), what="the first prompt to reach the agent")

            with pytest.raises(ClientBusy):
                await client.prompt(session.id, "second")
            with pytest.raises(ClientBusy):
                await client.new_session(tmp_path)
            with pytest.raises(ClientBusy):
                await client.initialize()

            await client.cancel(session.id)
            result = await first
            assert (result.stop_reason, result.timed_out) == (StopReason.CANCELLED, False)
        assert agent.methods().count("session/prompt") == 1

    run_async(main)


class SlowAsyncObserver:
    """Coroutine methods that take their time; ``events`` says in which order they finished."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker
        self.events: list[tuple[Any, ...]] = []

    async def on_update(self, update: tinyacp.Update) -> None:
        await asyncio.sleep(0.05 if update.seq == 1 else 0)
        self.events.append(("update", update.seq, update.text))

    async def on_permission_request(self, request: tinyacp.PermissionRequest) -> PermissionReply:
        await asyncio.sleep(0.05)
        self.events.append(("permission_request", request.request_id))
        return PermissionReply.allow()

    async def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        await asyncio.sleep(0.2)
        self.marker.touch()
        self.events.append(("permission_decision", request.request_id))

    async def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        await asyncio.sleep(0)
        self.events.append(("send", message.method, message.id))


def test_async_observer_coroutines_are_awaited_in_order_before_the_client_acts(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    marker = tmp_path / "decision-recorded"
    agent = scripted(
        [
            *handshake(),
            update(chunk("a")),
            update(chunk("b")),
            ask(0, CLAUDE_OPTIONS, check_file=str(marker)),
            update(chunk("c")),
            end_turn(),
        ]
    )
    observer = SlowAsyncObserver(marker)

    async def main() -> None:
        async with async_client(agent.argv, observer=observer) as client:
            await client.initialize()
            session = await client.new_session(tmp_path)
            result = await client.prompt(session.id, "go")
        assert result.text == "abfile:yesc"

    run_async(main)

    turn = observer.events[observer.events.index(("send", "session/prompt", 2)) + 1 :]
    assert turn == [
        ("update", 1, "a"),
        ("update", 2, "b"),
        ("permission_request", 0),
        ("permission_decision", 0),
        ("send", None, 0),
        ("update", 3, "file:yes"),
        ("update", 4, "c"),
    ]
    assert chosen(agent, 0) == {"outcome": "selected", "optionId": "allow"}


def test_async_cancelling_the_prompting_task_sends_cancel_tears_down_and_reraises(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    # The agent ignores SIGTERM and reads until its stdin closes, so its log shows all we wrote.
    agent = scripted([{"op": "ignore_sigterm"}, *handshake(), update(chunk("started")), {"op": "wait_eof"}])
    recorder = Recorder()

    async def main() -> None:
        async with async_client(agent.argv, observer=recorder, kill_grace=5.0) as client:
            await client.initialize()
            session = await client.new_session(tmp_path)
            task = asyncio.create_task(client.prompt(session.id, "go"))
            await until(lambda: len(recorder.updates) == 1, what="the first update")

            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

            assert task.cancelled()
            assert client.closed
            assert client.returncode == 0  # it read to the end of its input, then exited by itself
            assert group_gone(client)
            with pytest.raises(ClientClosed):
                await client.prompt(session.id, "again")

    run_async(main)
    assert agent.methods().count("session/cancel") == 1
    assert [m.method for m in recorder.of("send")][-1] == "session/cancel"


def test_async_prompt_stream_yields_this_turns_updates_in_order_then_the_result(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    tool_call = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read", "kind": "read"}
    agent = scripted(
        [
            *handshake(),
            update(chunk("a")),
            update(chunk("not this turn's"), session="other"),
            update(tool_call),
            update(chunk("b")),
            end_turn(),
        ]
    )
    recorder = Recorder()

    async def main() -> None:
        async with async_client(agent.argv, observer=recorder) as client:
            await client.initialize()
            session = await client.new_session(tmp_path)
            seen: list[tinyacp.Update] = []
            async with client.prompt_stream(session.id, "go") as stream:
                assert "session/prompt" not in [m.method for m in recorder.of("send")]  # sent on first use
                async for item in stream:
                    assert recorder.updates[-1] is item  # recorded before it is handed out
                    if not seen:
                        with pytest.raises(UsageError):
                            stream.result  # noqa: B018 - the turn has not ended yet
                    seen.append(item)

            assert [(u.seq, u.kind) for u in seen] == [
                (1, UpdateKind.AGENT_MESSAGE_CHUNK),
                (3, UpdateKind.TOOL_CALL),
                (4, UpdateKind.AGENT_MESSAGE_CHUNK),
            ]
            assert (stream.result.text, stream.result.update_count) == ("ab", 3)
            assert stream.result.stop_reason is StopReason.END_TURN
            assert len(recorder.updates) == 4

    run_async(main)


def test_async_prompt_stream_does_not_read_while_the_consumer_holds_back(tmp_path: Path) -> None:
    flood = Flood(tmp_path)  # about 700 KB: ten times what the pipe and our line buffer hold together

    async def main() -> None:
        async with async_client(flood.command, **flood.options()) as client:
            await client.initialize()
            session = await client.new_session(tmp_path)
            async with client.prompt_stream(session.id, "flood") as stream:
                first = await anext(stream)

                # The consumer holds on to the first update; the agent fills the pipe and gets stuck.
                await until(lambda: flood.status()[0] == "stuck", timeout=TIMEOUT, what="the agent to get stuck")
                assert flood.held_back()
                assert flood.recorder.updates == [first]

                rest = [item async for item in stream]
            assert len(rest) == flood.count - 1
            assert stream.result.chunk_count == flood.count
            assert stream.result.text == "".join(f"{n:08d}" for n in range(flood.count))
        assert flood.status()[0] == "done"

    run_async(main)


def test_async_fifty_agents_from_one_event_loop_each_with_its_own_observer(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agents = 50
    parts = 5
    # A small line buffer per client: fifty of the default 2 MiB would be memory this test does not need.
    limits = {
        "reader_limits": tinyacp.ReaderLimits(max_line=65536),
        "transfer_limits": tinyacp.TransferLimits(max_update_bytes=65536),
    }

    async def converse(number: int) -> tuple[Recorder, tinyacp.PromptResult]:
        steps = [*handshake(f"s{number}")]
        steps += [update(chunk(f"{number}.{part} "), session=f"s{number}") for part in range(parts)]
        agent = scripted([*steps, end_turn()], name=f"agent{number}")
        recorder = Recorder()
        async with async_client(agent.argv, observer=recorder, **limits) as client:
            await client.initialize()
            session = await client.new_session(tmp_path)
            return recorder, await client.prompt(session.id, f"hello {number}")

    async def main() -> None:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(converse(number)) for number in range(agents)]
        for number, task in enumerate(tasks):
            recorder, result = task.result()
            expected = [f"{number}.{part} " for part in range(parts)]
            assert result.session_id == f"s{number}"
            assert result.text == "".join(expected)
            assert [(u.seq, u.session_id, u.text) for u in recorder.updates] == [
                (seq, f"s{number}", text) for seq, text in enumerate(expected, start=1)
            ]

    run_async(main)


def _agent_fds(client: tinyacp.AsyncClient) -> set[int]:
    """The numbers of the fds the client watches on the event loop: the agent's stdout, the wake-up, the exit."""
    proc = client._proc
    return {fd for fd in (proc.stdout_fd, proc.wake_fd, proc.exit_fd) if fd is not None and fd >= 0}


def _settle(future: asyncio.Future[int], value: int) -> None:
    if not future.done():
        future.set_result(value)


async def _reused_numbers_work_with_the_loop(numbers: set[int]) -> None:
    """Take the freed numbers again (sockets; the lowest free number comes first) and check that a reader added
    for each fires: had a number stayed registered, the loop would take the new reader for the old one, which
    the kernel forgot when the fd closed, and it would never fire."""
    loop = asyncio.get_running_loop()
    held: list[socket.socket] = []
    try:
        by_number: dict[int, socket.socket] = {}
        for _ in range(64):
            if numbers <= by_number.keys():
                break
            pair = socket.socketpair()
            held.extend(pair)
            by_number.update((end.fileno(), peer) for end, peer in (pair, pair[::-1]))
        assert numbers <= by_number.keys(), "the freed numbers were not reused"
        for number in sorted(numbers):
            fired: asyncio.Future[int] = loop.create_future()
            loop.add_reader(number, _settle, fired, number)
            try:
                by_number[number].send(b"x")
                assert await asyncio.wait_for(fired, TIMEOUT) == number
            finally:
                loop.remove_reader(number)
    finally:
        for end in held:
            end.close()


def test_async_the_agents_fds_leave_the_event_loop_before_they_are_closed(scripted: MakeScripted) -> None:
    """The client keeps its readers registered between calls; closing it removes them before the fds close."""
    agent = scripted(handshake())

    async def main() -> None:
        async with async_client(agent.argv) as client:
            await client.initialize()
            numbers = _agent_fds(client)
            assert numbers <= client._watch.fds, "still watched between two calls"
        await _reused_numbers_work_with_the_loop(numbers)

    run_async(main)


def test_async_a_client_dropped_without_close_stops_its_agent_and_leaves_no_fd_watched(scripted: MakeScripted) -> None:
    agent = scripted(handshake())

    async def main() -> None:
        client = tinyacp.AsyncClient(
            tinyacp.Options(command=agent.argv, timeout=TIMEOUT, observer=tinyacp.BaseObserver())
        )
        await client.initialize()
        numbers, pid = _agent_fds(client), client.pid
        del client
        gc.collect()
        await until(lambda: not _live_group_members(pid), what=f"agent group {pid} gone")
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        await _reused_numbers_work_with_the_loop(numbers)

    run_async(main)


def test_async_output_between_calls_is_read_by_the_next_call_without_spinning_the_loop(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    """Readers are level-triggered: one left registered while the agent's unread output waits between two calls
    would fire on every iteration of the loop. It is removed when it fires with nobody waiting, and the next call
    reads what came."""
    note = {"jsonrpc": "2.0", "method": "_vendor/note", "params": {}}
    agent = scripted(
        [*handshake()[:2], {"op": "sleep", "seconds": 0.2}, {"op": "send", "message": note}, *handshake()[2:]]
    )
    recorder = Recorder()

    async def main() -> None:
        async with async_client(agent.argv, observer=recorder) as client:
            await client.initialize()
            stdout = client._proc.stdout_fd
            await until(lambda: stdout not in client._watch.fds, what="the idle reader removed once it fired")
            await client.new_session(tmp_path)
        assert "_vendor/note" in [message.method for message in recorder.of("message")]

    run_async(main)


def test_async_a_line_written_while_the_loop_slept_wakes_the_waiting_client_once() -> None:
    """The loop reports a readable pipe again in the iteration after the one that woke the waiter, from a poll made
    before the woken task read the pipe dry. That report must not wake the task's next wait: it would cost a wake
    for nothing with every line an agent writes while the loop sleeps."""
    from tinyacp._async_client import _Watch

    async def main() -> None:
        loop = asyncio.get_running_loop()
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        watch = _Watch()
        try:
            first: asyncio.Future[int | None] = loop.create_future()
            watch.wait_for(loop, [read_end], first)
            os.write(write_end, b"one line\n")
            assert await asyncio.wait_for(first, TIMEOUT) == read_end
            assert os.read(read_end, 100) == b"one line\n"  # read dry, as the client does before it waits again
            second: asyncio.Future[int | None] = loop.create_future()
            watch.wait_for(loop, [read_end], second)
            for _ in range(5):
                await asyncio.sleep(0)
            assert not second.done(), "woken by the report of a line already read"
            os.write(write_end, b"the next line\n")
            assert await asyncio.wait_for(second, TIMEOUT) == read_end
        finally:
            watch.forget()
            os.close(read_end)
            os.close(write_end)

    run_async(main)


def _threads() -> set[int]:
    return {int(tid) for tid in os.listdir("/proc/self/task")}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts this process's threads in /proc")
def test_async_the_event_loop_reads_the_stderr_tail_no_thread_and_a_chatty_agent_still_answers(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    """Built in a running event loop, the client has the loop read the agent's stderr: no thread per agent, and 4 MiB
    of stderr (64 pipes' worth) written before an answer do not block the agent."""
    steps = handshake()
    agent = scripted(
        [*steps[:3], {"op": "stderr", "size": 4 << 20}, {"op": "stderr", "text": "last words"}, *steps[3:]]
    )

    async def main() -> None:
        before = _threads()
        async with async_client(agent.argv, stderr="tail") as client:
            assert _threads() <= before, "no thread reads the tail"
            await client.initialize()
            await client.new_session(tmp_path)
            tail = client.stderr_tail()
            assert tail is not None and tail.endswith(b"last words") and len(tail) == STDERR_TAIL_BYTES
        assert client.stderr_tail() == tail

    run_async(main)


def test_async_an_agent_that_ignores_sigterm_is_killed_after_the_grace_and_its_dying_words_are_kept(
    scripted: MakeScripted,
) -> None:
    """The teardown waits for the exit on the event loop, which reads stderr meanwhile; past ``kill_grace`` the
    rest (SIGKILL, the reap) goes on as ever."""
    agent = scripted([{"op": "ignore_sigterm"}, {"op": "stderr", "text": "still here"}, {"op": "hang"}])

    async def main() -> None:
        started = time.monotonic()
        async with async_client(agent.argv, stderr="tail", kill_grace=0.3) as client:
            await until(lambda: client.stderr_tail() == b"still here", what="the agent's stderr")
        assert client.returncode == -signal.SIGKILL
        assert time.monotonic() - started >= 0.3

    run_async(main)
