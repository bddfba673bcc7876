"""Replay: a recorded agent as a test double, strict and lax."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import Journaled, Recorder

SRC = Path(__file__).resolve().parents[1] / "src"
DEMO = [sys.executable, "-m", "tinyacp.demo"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


def _replay(path: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "tinyacp.replay", str(path), *flags]


def _converse(client: Any, cwd: Path, text: str) -> tinyacp.PromptResult:
    client.initialize(timeout=10)
    session = client.new_session(cwd, timeout=10)
    result: tinyacp.PromptResult = client.prompt(session.id, text, timeout=10)
    return result


@dataclass
class Recorded:
    path: Path
    cwd: Path
    observer: Recorder
    result: tinyacp.PromptResult


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """A run of the demo agent (read allowed), journaled; made once, replayed by every test here."""
    tmp_path = tmp_path_factory.mktemp("recording")
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    path = tmp_path / "demo.jsonl"
    journal = tinyacp.JsonlJournal(path)
    observer = Journaled(journal)
    options = tinyacp.Options(
        command=DEMO,
        env=_env(),
        cwd=tmp_path,
        epoch=journal.begin_epoch(),
        observer=observer,
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
    )
    with tinyacp.Client(options) as client:
        result = _converse(client, tmp_path, "hello")
    journal.close()
    return Recorded(path, tmp_path, observer, result)


@pytest.mark.parametrize("strict", [False, True], ids=["lax", "strict"])
def test_a_replayed_demo_run_gives_the_same_updates_and_reply(
    make_client: Any, recording: Recorded, strict: bool
) -> None:
    path, recorded, recorded_result = recording.path, recording.observer, recording.result
    replayed = Recorder()
    client = make_client(
        command=_replay(path, *(["--strict"] if strict else [])),
        env=_env(),
        observer=replayed,
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
        stderr="tail",
    )
    result = _converse(client, recording.cwd, "hello")
    assert [update.raw for update in replayed.updates] == [update.raw for update in recorded.updates]
    assert result.text == recorded_result.text
    assert "You said: hello" in result.text and "notes.txt" in result.text
    assert result.stop_reason == recorded_result.stop_reason == "end_turn"
    (decision,) = replayed.of("permission_decision")
    assert decision.allowed


def test_strict_replay_fails_loudly_when_the_client_says_something_else(make_client: Any, recording: Recorded) -> None:
    path = recording.path
    client = make_client(
        command=_replay(path, "--strict"),
        env=_env(),
        observer=Recorder(),
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
        stderr="tail",
    )
    with pytest.raises(tinyacp.AgentExited) as caught:
        _converse(client, recording.cwd, "goodbye")
    assert caught.value.returncode == 1
    tail = (caught.value.stderr_tail or b"").decode()
    assert "differs from the recording" in tail
    assert "goodbye" in tail and "hello" in tail


def test_strict_replay_fails_when_the_client_answers_a_permission_differently(
    make_client: Any, recording: Recorded
) -> None:
    path = recording.path
    client = make_client(command=_replay(path, "--strict"), env=_env(), observer=Recorder(), stderr="tail")
    with pytest.raises(tinyacp.AgentExited) as caught:
        _converse(client, recording.cwd, "hello")  # no policy: the permission is rejected, the recording allowed it
    assert caught.value.returncode == 1
    assert '"optionId":"reject"' in (caught.value.stderr_tail or b"").decode()


def test_lax_replay_plays_the_recording_whatever_the_client_sends(
    tmp_path: Path, make_client: Any, recording: Recorded
) -> None:
    path, recorded = recording.path, recording.observer
    replayed = Recorder()
    client = make_client(command=_replay(path), env=_env(), observer=replayed, stderr="tail")
    result = _converse(client, tmp_path, "goodbye")  # another prompt, and the permission rejected
    assert [update.raw for update in replayed.updates] == [update.raw for update in recorded.updates]
    assert "You said: hello" in result.text


def _drive(command: list[str], lines: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, str]:
    """Send lines to a replay over raw pipes, close its stdin, collect what it wrote."""
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode()
    done = subprocess.run(command, input=payload, capture_output=True, env=_env(), timeout=30, check=False)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    return answers, done.returncode, done.stderr.decode()


def _client_lines(path: Path, ids: list[Any]) -> list[dict[str, Any]]:
    """The recorded client lines, renumbered with ``ids`` (requests only) — what another client would send."""
    lines = [
        json.loads(tinyacp.JsonlJournal.raw(record))
        for record in tinyacp.JsonlJournal.read(path)
        if record.get("dir") == "out"
    ]
    numbered = iter(ids)
    for line in lines:
        if "method" in line and "id" in line:
            line["id"] = next(numbered)
    return lines


@pytest.mark.parametrize("strict", [False, True], ids=["lax", "strict"])
def test_replay_answers_with_the_ids_the_client_used(recording: Recorded, strict: bool) -> None:
    path = recording.path
    lines = _client_lines(path, ["a", "b", "c"])
    answers, code, stderr = _drive(_replay(path, *(["--strict"] if strict else [])), lines)
    assert code == 0, stderr
    responses = [answer for answer in answers if "method" not in answer]
    assert [response["id"] for response in responses] == ["a", "b", "c"]
    assert responses[-1]["result"]["stopReason"] == "end_turn"
    permission = next(answer for answer in answers if answer.get("method") == "session/request_permission")
    assert permission["id"] == 0  # the agent's own ids are replayed as recorded


def test_strict_replay_fails_when_the_client_stops_early(recording: Recorded) -> None:
    path = recording.path
    lines = _client_lines(path, [0, 1, 2])[:1]
    answers, code, stderr = _drive(_replay(path, "--strict"), lines)
    assert code == 1
    assert "stopped before sending 3 recorded line(s)" in stderr
    assert answers[0]["result"]["agentInfo"]["name"] == "tinyacp-demo"
    answers, code, _ = _drive(_replay(path), lines)
    assert code == 0


def test_lax_replay_answers_an_unrecorded_request_with_an_error(recording: Recorded) -> None:
    path = recording.path
    stray = {"jsonrpc": "2.0", "id": 9, "method": "session/set_mode", "params": {"sessionId": "x", "modeId": "y"}}
    answers, code, stderr = _drive(_replay(path), [stray])
    assert code == 0
    assert answers == [{"jsonrpc": "2.0", "id": 9, "error": answers[0]["error"]}]
    assert answers[0]["error"]["code"] == -32603
    assert "no recorded counterpart" in stderr


def test_replay_of_a_journal_without_lines_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        journal.begin_epoch()
    _, code, stderr = _drive(_replay(path), [])
    assert code == 2
    assert "no recorded line" in stderr
