"""Record a real agent once, then test your own code against the recording, offline and deterministically.

The first test records a turn of an agent into a journal (here the demo agent, so this file runs anywhere; point
``AGENT`` at a real one and keep the journal in your repository). The second replays it with
``tinyacp replay --strict`` as the agent: the replay answers every line the client sends with what the recorded
agent sent at that point, byte for byte, and fails loudly when the client's lines differ from the recording.

Run it with ``python -m pytest examples/test_record_replay.py``: it needs pytest and tinyacp, nothing more.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tinyacp

AGENT = [sys.executable, "-m", "tinyacp.demo"]
PROMPT = "What is in this folder?"


def summarise(client: tinyacp.Client, cwd: Path) -> tinyacp.PromptResult:
    """The code under test: one turn, with the rule that the agent may read."""
    client.initialize(timeout=60)
    session = client.new_session(cwd, timeout=60)
    return client.prompt(session.id, PROMPT, timeout=60)


def record(journal_path: Path, cwd: Path) -> tinyacp.PromptResult:
    journal = tinyacp.JsonlJournal(journal_path)
    options = tinyacp.Options(
        command=AGENT,
        cwd=cwd,
        epoch=journal.begin_epoch(),
        observer=journal,
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
    )
    with journal, tinyacp.Client(options) as client:
        return summarise(client, cwd)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# hello\n")
    return root


@pytest.fixture
def recording(tmp_path: Path, project: Path) -> tuple[Path, tinyacp.PromptResult]:
    journal = tmp_path / "recorded.jsonl"
    return journal, record(journal, project)


def test_the_recorded_turn_ended_and_read_the_folder(recording: tuple[Path, tinyacp.PromptResult]) -> None:
    _, result = recording
    assert result.stop_reason == tinyacp.StopReason.END_TURN
    assert "README.md" in result.text


def test_the_replayed_agent_gives_the_same_reply(recording: tuple[Path, tinyacp.PromptResult], project: Path) -> None:
    journal, recorded = recording
    replay = [sys.executable, "-m", "tinyacp.replay", "--strict", str(journal)]
    options = tinyacp.Options(
        command=replay,
        cwd=project,
        observer=tinyacp.BaseObserver(),
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
        stderr="tail",
    )
    with tinyacp.Client(options) as client:
        replayed = summarise(client, project)
    assert (replayed.stop_reason, replayed.text) == (recorded.stop_reason, recorded.text)
    assert client.stderr_tail() == b""  # --strict reports every difference on stderr


def test_a_different_prompt_breaks_the_strict_replay(
    recording: tuple[Path, tinyacp.PromptResult], project: Path
) -> None:
    journal, _ = recording
    replay = [sys.executable, "-m", "tinyacp.replay", "--strict", str(journal)]
    options = tinyacp.Options(command=replay, cwd=project, observer=tinyacp.BaseObserver(), stderr="tail")
    with tinyacp.Client(options) as client:
        client.initialize(timeout=60)
        session = client.new_session(project, timeout=60)
        with pytest.raises(tinyacp.AgentExited):
            client.prompt(session.id, "Something else", timeout=60)
        assert b"tinyacp replay: strict:" in (client.stderr_tail() or b"")
