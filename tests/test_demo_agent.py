"""The demo agent (``python -m tinyacp.demo``) and the SDK-built test agent, driven through raw pipes.

Every line an agent writes is checked against the vendored ACP schemas that know it (see ``helpers.agent_pipe``). The
newer parts of ACP the demo speaks (notices, compaction, plan operations, subagents, fork, elicitation, the
unstable methods) are tested in ``test_demo_features.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import UPDATE_KINDS
from helpers.agent_pipe import (
    READ_TIMEOUT,
    Message,
    Spawn,
    assert_end_turn,
    kinds,
    message_text,
    selecting,
    spawning,
    validator,
)
from tinyacp._version import __version__
from tinyacp.demo import _settings as demo_settings
from tinyacp.demo import _store as demo_store

DEMO_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


@pytest.fixture
def spawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spawn]:
    yield from spawning(tmp_path_factory)


# -- the schema check itself --------------------------------------------------------------------------------


def test_validator_rejects_a_docs_example_that_breaks_the_schema() -> None:
    # session-modes.mdx shows `modeId`; the schema requires `currentModeId` (FACTS.md section 12).
    bad = {"sessionId": "s", "update": {"sessionUpdate": "current_mode_update", "modeId": "code"}}
    assert not validator("SessionNotification").is_valid(bad)
    assert validator("Agent").is_valid({"jsonrpc": "2.0", "method": "session/update", "params": bad})


# -- the demo agent -----------------------------------------------------------------------------------------


def test_initialize_answer(spawn: Spawn) -> None:
    agent = spawn()
    agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, request_id=0)
    assert agent.read() == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {
                    "list": {},
                    "resume": {},
                    "close": {},
                    "delete": {},
                    "additionalDirectories": {},
                    "systemPrompt": {"mode": {"override": {}}},
                    "fork": {},
                    "title": {},
                },
                "auth": {"logout": {}},
                "providers": {},
            },
            "authMethods": [
                {"id": "demo-login", "name": "Demo login", "description": "Always succeeds."},
                {
                    "id": "demo-api-key",
                    "name": "Demo API key",
                    "description": "Uses $TINYACP_DEMO_API_KEY from the agent's environment, or a key sent as "
                    "_meta.api-key.",
                },
            ],
            "agentInfo": {"name": "tinyacp-demo", "title": "tinyacp demo agent", "version": __version__},
        },
    }
    assert agent.close() == 0


def test_session_new_and_its_params(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    answer = agent.read()["result"]
    assert (answer["sessionId"], answer["modes"]["currentModeId"]) == ("demo-1", "default")
    assert [mode["id"] for mode in answer["modes"]["availableModes"]] == ["default", "auto"]
    assert [(o["id"], o["currentValue"]) for o in answer["configOptions"]] == [
        ("mode", "default"),
        ("model", "demo-small"),
    ]
    agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert agent.read()["result"]["sessionId"] == "demo-2"
    bad_params: list[dict[str, object]] = [
        {"cwd": "relative/dir", "mcpServers": []},
        {"mcpServers": []},
        {"cwd": str(tmp_path)},
    ]
    for bad in bad_params:
        agent.request("session/new", bad)
        assert agent.read()["error"]["code"] == -32602
    agent.prompt("demo-99", "hello")
    assert agent.read()["error"]["code"] == -32002  # resource (the session) not found
    assert agent.close() == 0


@pytest.mark.parametrize("option_id", ["allow", "allow_always"])
def test_allowed_prompt_lists_the_files(spawn: Spawn, tmp_path: Path, option_id: str) -> None:
    (tmp_path / "a.txt").write_bytes(b"one\ntwo\n")
    (tmp_path / "b.md").write_bytes(b"no newline")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "crlf.txt").write_bytes(b"x\r\ny\r\nz")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "hidden.txt").write_bytes(b"not listed\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    agent = spawn()
    session_id = agent.start_session(tmp_path)

    requests: list[Message] = []
    prompt_id = agent.prompt(session_id, "list them")
    updates, response = agent.read_turn(prompt_id, selecting(option_id, requests, agent))

    assert_end_turn(response)
    chunks = ["agent_message_chunk"] * 3
    assert kinds(updates) == [
        "plan",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "plan",
        *chunks,
        "plan",
        "usage_update",
    ]
    cwd = str(tmp_path)
    assert [entry["status"] for entry in updates[0]["entries"]] == ["pending", "pending"]
    assert [entry["priority"] for entry in updates[0]["entries"]] == ["high", "medium"]
    assert updates[2] == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_1",
        "title": f"Read files in {cwd}",
        "name": "Read",
        "kind": "read",
        "status": "pending",
        "locations": [{"path": cwd}],
    }
    (request,) = requests
    assert request["id"] == 0
    assert request["params"] == {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": "call_1",
            "title": f"Read files in {cwd}",
            "name": "Read",
            "kind": "read",
            "status": "pending",
        },
        "options": DEMO_OPTIONS,
    }
    assert updates[3] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "in_progress",
    }
    table = "bytes\tlines\tname\n8\t2\ta.txt\n10\t1\tb.md\n7\t3\tcrlf.txt\n0\t0\tempty"
    assert updates[4] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": table}}],
    }
    assert [entry["status"] for entry in updates[5]["entries"]] == ["completed", "in_progress"]
    assert [entry["status"] for entry in updates[-2]["entries"]] == ["completed", "completed"]
    assert updates[-1]["sessionUpdate"] == "usage_update"
    assert updates[-1]["size"] == 200000
    assert updates[-1]["cost"]["currency"] == "USD"
    assert updates[6]["content"]["text"] == "You said: list them\n"
    assert message_text(updates) == (
        f"You said: list them\nI read 4 files in {cwd}:\n"
        "- a.txt: 8 bytes, 2 lines\n"
        "- b.md: 10 bytes, 1 line\n"
        "- crlf.txt: 7 bytes, 3 lines\n"
        "- empty: 0 bytes, 0 lines\n"
    )

    # A second turn: the agent's own request ids and tool call ids go on counting.
    prompt_id = agent.prompt(session_id, "again")
    updates, response = agent.read_turn(prompt_id, selecting(option_id, requests, agent))
    assert_end_turn(response)
    assert requests[1]["id"] == 1
    assert updates[2]["toolCallId"] == "call_2"
    assert agent.close() == 0


def test_rejected_prompt(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn("--chunks", "1")
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "read please")
    updates, response = agent.read_turn(prompt_id, selecting("reject", [], agent))
    assert_end_turn(response)
    assert kinds(updates) == [
        "plan",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "usage_update",
    ]
    assert updates[3] == {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "failed"}
    assert message_text(updates) == f"You said: read please\nI was not allowed to read the files in {tmp_path}.\n"
    assert agent.close() == 0


def test_cancelled_permission_outcome_cancels_the_turn(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "hi")
    updates, response = agent.read_turn(
        prompt_id, lambda request: agent.answer(request, {"outcome": {"outcome": "cancelled"}})
    )
    assert response["result"] == {"stopReason": "cancelled"}
    assert kinds(updates) == ["plan", "agent_thought_chunk", "tool_call", "tool_call_update"]
    assert updates[-1]["status"] == "failed"
    assert agent.close() == 0


def test_session_cancel_while_the_permission_is_pending(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "hi")
    pending: list[Message] = []

    def cancel_instead_of_answering(request: Message) -> None:
        pending.append(request)
        # A cancel for another session changes nothing; the one for this session ends the turn.
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "demo-other"}})
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})

    updates, response = agent.read_turn(prompt_id, cancel_instead_of_answering)

    assert response["result"] == {"stopReason": "cancelled"}
    assert kinds(updates) == ["plan", "agent_thought_chunk", "tool_call", "tool_call_update"]
    assert updates[-1] == {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "failed"}
    # The answer the protocol still requires arrives late: ignored, and the agent carries on.
    agent.answer(pending[0], {"outcome": {"outcome": "cancelled"}})
    prompt_id = agent.prompt(session_id, "again")
    updates, response = agent.read_turn(prompt_id, selecting("allow", [], agent))
    assert_end_turn(response)
    assert agent.close() == 0


def test_cancel_during_the_reply_with_delay(spawn: Spawn, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n" * 100)
    agent = spawn("--delay", "0.05", "--chunks", "50")
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "hi")
    updates: list[Message] = []
    while True:
        message = agent.read()
        if message.get("method") == "session/request_permission":
            agent.answer(message, {"outcome": {"outcome": "selected", "optionId": "allow"}})
            continue
        if "method" not in message:
            break
        updates.append(message["params"]["update"])
        if kinds(updates).count("agent_message_chunk") == 1 and kinds(updates)[-1] == "agent_message_chunk":
            # Right after the first chunk; the agent sees the cancel during its next pause.
            agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    assert message["id"] == prompt_id
    assert message["result"] == {"stopReason": "cancelled"}
    chunks = kinds(updates).count("agent_message_chunk")
    assert 1 <= chunks < 50
    # The tool call had completed before the cancel: nothing is marked failed, no plan says "done".
    assert [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update"] == [
        "in_progress",
        "completed",
    ]
    assert kinds(updates)[-1] == "agent_message_chunk"
    assert agent.close() == 0


def test_cancel_before_the_tool_call_with_delay(spawn: Spawn, tmp_path: Path) -> None:
    # The delay is long, but a cancel ends the pause at once: the test does not wait for it.
    agent = spawn("--delay", "5")
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "hi")
    first = agent.read()
    assert first["params"]["update"]["sessionUpdate"] == "plan"
    started = time.monotonic()
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    updates, response = agent.read_turn(prompt_id)
    assert time.monotonic() - started < 4
    assert response["result"] == {"stopReason": "cancelled"}
    assert updates == []
    assert agent.close() == 0


@pytest.mark.parametrize(("flag", "text"), [(True, "show me"), (False, "please show all-kinds now")])
def test_allkinds(spawn: Spawn, tmp_path: Path, flag: bool, text: str) -> None:
    agent = spawn(*(["--all-kinds"] if flag else []))
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, text)
    updates, response = agent.read_turn(prompt_id)  # no permission request in this mode
    assert kinds(updates) == UPDATE_KINDS
    assert_end_turn(response)
    assert updates[0]["content"] == {"type": "text", "text": text}
    assert updates[1]["content"]["text"].startswith(f"You said: {text}\n")
    assert agent.close() == 0


@pytest.mark.parametrize("request_id", ["fs-1", 7, "0"])
def test_unknown_method_echoes_the_id(spawn: Spawn, request_id: int | str) -> None:
    agent = spawn()
    agent.request("fs/read_text_file", {"sessionId": "demo-1", "path": "/etc/hostname"}, request_id=request_id)
    response = agent.read()
    assert response == {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32601, "message": "Method not found"},
    }
    assert type(response["id"]) is type(request_id)
    assert agent.close() == 0


def test_noise_is_ignored(spawn: Spawn) -> None:
    agent = spawn()
    agent.send_raw("this is not JSON")
    agent.send_raw("[1, 2, 3]")
    agent.send_raw("")
    agent.send({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}})  # never asked
    agent.send({"jsonrpc": "2.0", "method": "_vendor/hello", "params": {}})
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "demo-1"}})
    request_id = agent.request("initialize", {"protocolVersion": 1})
    assert agent.read()["id"] == request_id  # the first line the agent wrote
    assert agent.close() == 0


def test_prompts_are_answered_one_turn_at_a_time(spawn: Spawn, tmp_path: Path) -> None:
    # With a delay, the second prompt arrives while the first turn runs: it waits for that turn to end.
    agent = spawn("--all-kinds", "--delay", "0.02")
    session_id = agent.start_session(tmp_path)
    first = agent.prompt(session_id, "one")
    second = agent.prompt(session_id, "two")
    updates, response = agent.read_turn(first)
    assert (kinds(updates), response["result"]) == (UPDATE_KINDS, {"stopReason": "end_turn"})
    updates, response = agent.read_turn(second)
    assert (kinds(updates), response["result"]) == (UPDATE_KINDS, {"stopReason": "end_turn"})
    assert updates[0]["content"]["text"] == "two"
    assert agent.close() == 0


def test_a_turn_that_needs_no_answer_finishes_after_stdin_closes(spawn: Spawn, tmp_path: Path) -> None:
    # So that `printf '...' | python -m tinyacp.demo --all-kinds` shows a whole turn.
    agent = spawn("--all-kinds")
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "bye")
    assert agent.proc.stdin is not None
    agent.proc.stdin.close()
    updates, response = agent.read_turn(prompt_id)
    assert kinds(updates) == UPDATE_KINDS
    assert_end_turn(response)
    assert agent.close() == 0


def test_exits_when_stdin_closes_mid_turn(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    session_id = agent.start_session(tmp_path)
    agent.prompt(session_id, "hi")
    while agent.read().get("method") != "session/request_permission":
        pass
    assert agent.close() == 0


# -- the command line and the state files, in process ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--chunks", "1"],
        ["--delay=0.05", "--chunks", "50", "--chunks=2", "--delay", "1e-3"],
        ["--state-dir", "a dir", "--require-auth", "--verbose", "--all-kinds", "--verbose"],
        ["--state-dir=", "--state-dir=a=b"],
        ["--chunks", " 7 ", "--delay", "0"],
        ["--with", "notice", "--with=subagent,bash", "--all-kinds"],
    ],
)
def test_a_plain_command_line_is_read_without_argparse_as_argparse_reads_it(argv: list[str]) -> None:
    plain = demo_settings.plain_settings(argv)
    assert plain is not None
    assert vars(plain) == vars(demo_settings.argparse_settings(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--chunk", "1"],
        ["--delay", "-1"],
        ["--delay=-1", "--delay", "1"],
        ["--chunks", "0"],
        ["--chunks", "x", "--chunks", "2"],
        ["--verbose=yes"],
        ["--state-dir"],
        ["--state-dir", "-x"],
        ["--", "--verbose"],
        ["extra"],
        ["--with", "everything"],
        ["--with", "notice,"],
    ],
)
def test_any_other_command_line_is_left_to_argparse(argv: list[str]) -> None:
    assert demo_settings.plain_settings(argv) is None


def test_the_agent_starts_without_the_modules_it_only_needs_for_help(tmp_path: Path) -> None:
    """argparse (with locale and shutil), dataclasses and typing once cost more CPU than the rest of the start,
    which every test and every batch turn pays."""

    def imported(*argv: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", *argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=READ_TIMEOUT,
            check=True,
        )
        return {line.rpartition(b"|")[2].strip().decode() for line in done.stderr.splitlines()}

    agent = imported("-m", "tinyacp.demo", "--chunks", "1", "--state-dir", str(tmp_path))
    assert "json" in agent  # -X importtime reported the imports
    heavy = {"argparse", "dataclasses", "locale", "shutil", "typing"}
    assert sorted(heavy & (agent - imported("-c", "pass"))) == []


def test_a_session_file_keeps_every_field_but_the_system_prompt(tmp_path: Path) -> None:
    store = demo_store.Store(str(tmp_path))
    history = [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}]
    session = demo_store.Session("demo-7", "/w", title="hi", used=3, cost=0.5, history=history, system_prompt="terse")
    store.save(session)
    assert (tmp_path / "demo-7.json").read_text(encoding="utf-8") == (
        '{"session_id": "demo-7", "cwd": "/w", "title": "hi", "updated_at": "", "mode": "default", '
        '"model": "demo-small", "used": 3, "cost": 0.5, "history": ' + json.dumps(history) + "}"
    )
    loaded = store.load("demo-7")
    assert loaded is not None
    assert (loaded.record(), loaded.system_prompt) == (session.record(), None)
    assert store.next_number() == 8


@pytest.mark.parametrize(
    ("session_id", "number"),
    [
        ("demo-1", 1),
        ("demo-007", 7),
        ("demo-123456789", 123456789),
        ("demo-", None),
        ("demo-1234567890", None),
        ("demo-\u0663", None),
        ("demo-+1", None),
        ("demo-1\n", None),
        ("../demo-1", None),
        ("other-1", None),
    ],
)
def test_only_the_ids_the_demo_makes_name_a_session_file(session_id: str, number: int | None) -> None:
    assert demo_store.session_number(session_id) == number
    assert (demo_store.Store("state")._path(session_id) is None) == (number is None)


def test_a_new_sessions_number_comes_from_the_stored_file_names_without_reading_the_files(tmp_path: Path) -> None:
    """Each new session would cost more than the one before if every stored session were read to number it."""
    (tmp_path / "demo-41.json").write_text("not even JSON", encoding="utf-8")
    (tmp_path / "demo-7.json").write_text("{}", encoding="utf-8")
    (tmp_path / "demo-99.txt").write_text("", encoding="utf-8")
    (tmp_path / "other-500.json").write_text("", encoding="utf-8")
    assert demo_store.Store(str(tmp_path)).next_number() == 42
    assert demo_store.Store(str(tmp_path / "missing")).next_number() == 1


def test_agents_sharing_a_state_directory_never_get_the_same_session_number(tmp_path: Path) -> None:
    """A batch runs many demo agents on one state directory: each new session claims its number by creating its
    file exclusively, so no session's file is another's, even when the suggested next number is stale."""
    first, second = demo_store.Store(str(tmp_path)), demo_store.Store(str(tmp_path))
    assert [first.claim(1), second.claim(1), first.claim(1)] == [1, 2, 3]
    (tmp_path / "next-number").write_text("2", encoding="ascii")  # stale: an older agent's suggestion
    assert second.claim(1) == 4
    (tmp_path / "next-number").write_text("not a number", encoding="ascii")  # damaged: the names are read
    assert first.claim(1) == 5
    assert first.claim(9) == 9  # an agent's own counter ahead of the directory wins
    assert sorted(path.name for path in tmp_path.iterdir() if path.suffix == ".json") == [
        f"demo-{n}.json" for n in (1, 2, 3, 4, 5, 9)
    ]


def test_a_new_session_is_written_into_the_file_that_claimed_its_number_and_the_hint_in_place(
    tmp_path: Path,
) -> None:
    """Every file made and thrown away frees an inode, and on ext4 without a journal each file made later nearby
    (a batch's journals) skips the recently freed ones one by one: a new session makes no file it throws away."""
    store = demo_store.Store(str(tmp_path))
    number = store.claim(1)
    claimed = (tmp_path / f"demo-{number}.json").stat().st_ino
    hint = (tmp_path / "next-number").stat().st_ino
    store.save(demo_store.Session(f"demo-{number}", str(tmp_path), updated_at="2026-12-01T00:00:00.000000Z"))
    assert (tmp_path / f"demo-{number}.json").stat().st_ino == claimed
    loaded = store.load(f"demo-{number}")
    assert loaded is not None and loaded.session_id == f"demo-{number}" and loaded.cwd == str(tmp_path)
    assert store.claim(1) == number + 1
    assert (tmp_path / "next-number").stat().st_ino == hint
    assert int((tmp_path / "next-number").read_bytes()) == number + 2
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        f"demo-{number}.json",
        f"demo-{number + 1}.json",
        "next-number",
    ]


def test_a_new_session_number_costs_no_listing_of_the_stored_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each new session would cost more than the one before if the stored sessions were listed to number it."""
    store = demo_store.Store(str(tmp_path))
    for _ in range(50):
        store.claim(1)

    def listed(path: object) -> list[str]:
        raise AssertionError("the stored sessions were listed")

    monkeypatch.setattr(os, "listdir", listed)
    assert store.claim(1) == 51


def test_an_unwritable_state_directory_still_numbers_sessions(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")  # a directory cannot be made under a file
    assert demo_store.Store(str(blocked / "state")).claim(3) == 3


# -- the agent built on the official SDK ---------------------------------------------------------------------


def test_sdk_agent_prompt_turn(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn("--chunks", "2", sdk=True)
    session_id = agent.start_session(tmp_path)
    requests: list[Message] = []
    prompt_id = agent.prompt(session_id, "hello")
    updates, response = agent.read_turn(prompt_id, selecting("allow_always", requests, agent))
    assert_end_turn(response)
    assert kinds(updates) == [
        "agent_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert message_text(updates) == "chunk 1 of 2chunk 2 of 2permission: allow_always"
    assert updates[3]["status"] == "completed"
    (request,) = requests
    assert request["id"] == 0
    assert [(o["optionId"], o["kind"]) for o in request["params"]["options"]] == [
        ("allow", "allow_once"),
        ("allow_always", "allow_always"),
        ("reject", "reject_once"),
        ("reject_always", "reject_always"),
    ]
    assert agent.close() == 0


def test_sdk_agent_honours_session_cancel(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn("--chunks", "1", sdk=True)
    session_id = agent.start_session(tmp_path)
    prompt_id = agent.prompt(session_id, "hello")

    def cancel_then_answer(request: Message) -> None:
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
        agent.answer(request, {"outcome": {"outcome": "cancelled"}})

    updates, response = agent.read_turn(prompt_id, cancel_then_answer)
    assert response["result"] == {"stopReason": "cancelled"}
    assert message_text(updates).endswith("permission: cancelled")
    assert [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update"] == ["failed"]
    assert agent.close() == 0


def test_every_answer_beyond_one_turn_fits_the_schema_and_sessions_outlive_the_process(
    spawn: Spawn, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = spawn("--state-dir", str(state), "--require-auth")
    first.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    first.read()
    first.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert first.read()["error"]["code"] == -32000
    first.request("authenticate", {"methodId": "demo-login"})
    assert first.read()["result"] == {}
    first.request("session/new", {"cwd": str(tmp_path), "mcpServers": [], "additionalDirectories": ["/lib"]})
    session_id = first.read()["result"]["sessionId"]
    first.request("session/set_mode", {"sessionId": session_id, "modeId": "auto"})
    mode, options, answer = first.read(), first.read(), first.read()
    assert mode["params"]["update"] == {"sessionUpdate": "current_mode_update", "currentModeId": "auto"}
    assert options["params"]["update"]["sessionUpdate"] == "config_option_update"
    assert answer["result"] == {}
    first.request("session/set_config_option", {"sessionId": session_id, "configId": "model", "value": "demo-large"})
    chosen = first.read()["result"]["configOptions"]
    assert [(o["id"], o["currentValue"]) for o in chosen] == [("mode", "auto"), ("model", "demo-large")]
    first.request("session/set_config_option", {"sessionId": session_id, "configId": "model", "value": "huge"})
    assert first.read()["error"]["code"] == -32602
    updates, response = first.read_turn(first.prompt(session_id, "hello"))
    assert kinds(updates)[-1] == "usage_update"
    assert_end_turn(response)
    first.request("logout", {})
    assert first.read()["result"] == {}
    assert first.close() == 0
    assert sorted(path.name for path in state.iterdir()) == [f"{session_id}.json", "next-number"]

    second = spawn("--state-dir", str(state))
    second.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    second.read()
    second.request("session/list", {"cwd": str(tmp_path)})
    (listed,) = second.read()["result"]["sessions"]
    assert (listed["sessionId"], listed["cwd"], listed["title"]) == (session_id, str(tmp_path), "hello")
    second.request("session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []})
    replayed = [second.read()["params"]["update"] for _ in range(2)]
    assert kinds(replayed) == ["user_message_chunk", "agent_message_chunk"]
    loaded = second.read()["result"]
    assert loaded["modes"]["currentModeId"] == "auto"
    second.request("session/resume", {"sessionId": session_id, "cwd": str(tmp_path)})
    assert "modes" in second.read()["result"]
    second.request("session/resume", {"sessionId": "demo-404", "cwd": str(tmp_path)})
    assert second.read()["error"]["code"] == -32002
    second.request("session/resume", {"sessionId": "../../etc/passwd", "cwd": str(tmp_path)})
    assert second.read()["error"]["code"] == -32002
    second.request("session/close", {"sessionId": session_id})
    assert second.read()["result"] == {}
    second.request("session/delete", {"sessionId": session_id})
    assert second.read()["result"] == {}
    assert [path.name for path in state.iterdir()] == ["next-number"]  # deleted; its number is not given again
    assert second.close() == 0
