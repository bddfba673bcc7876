"""A run refused before its prompt keeps no journal of its own (``journals`` and ``show last`` list only runs that
prompted); a forked run's journal names its sessions; ``sessions`` shows a title for a chat's session."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from helpers import wait_for
from helpers.cli import TIMEOUT, Cli, Terminal, marked_processes


def journals(cli: Cli) -> list[Path]:
    directory = cli.tmp / "state" / "tinyacp" / "journals"
    return sorted(directory.glob("*.jsonl")) if directory.is_dir() else []


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--continue"], "no earlier session of demo"),
        (["--mode", "nope"], "the agent offers no mode 'nope'"),
        (["--set", "nope=1"], "the agent has no config option 'nope'"),
        (["--auth", "nope"], "the agent offers no auth method 'nope'"),
    ],
)
def test_a_run_refused_before_its_prompt_keeps_no_journal(cli: Cli, flags: list[str], said: str) -> None:
    done = cli.run("prompt", *flags, "hi")
    assert done.returncode == 2
    stderr = done.stderr.decode()
    assert said in stderr and "no journal kept: the run was refused before its prompt" in stderr
    assert journals(cli) == []
    assert b"no journal yet" in cli.run("show", "last").stderr
    assert cli.run("journals").stdout.decode().startswith("no journals in ")


def test_a_refused_run_keeps_a_journal_it_was_given(cli: Cli) -> None:
    path = cli.tmp / "mine.jsonl"
    done = cli.run("prompt", "--journal", str(path), "--mode", "nope", "hi")
    assert done.returncode == 2
    assert path.is_file() and f"journal: {path}" in done.stderr.decode()


def test_ctrl_c_while_the_agent_starts_keeps_no_journal(cli: Cli) -> None:
    silent = cli.tmp / "silent.py"
    silent.write_text("import time\ntime.sleep(600)\n")
    terminal = Terminal(cli, "prompt", "--agent-command", f"{sys.executable} {silent}", "hi")

    def started() -> bool:
        for pid in marked_processes(cli.marker):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if len(argv) > 1 and argv[1].endswith(b"silent.py"):
                return True
        return False

    wait_for(started, timeout=TIMEOUT, what="the agent started")
    terminal.proc.send_signal(signal.SIGINT)
    assert terminal.finish() == 130
    assert b"no journal kept" in terminal.output
    assert journals(cli) == []


def test_a_run_that_failed_on_the_agents_side_keeps_its_journal(cli: Cli) -> None:
    done = cli.run("prompt", "--session", "demo-nope", "hi")
    assert done.returncode == 1
    assert len(journals(cli)) == 1


def test_a_forked_runs_journal_names_the_session_it_forked_and_its_own(cli: Cli) -> None:
    assert cli.run("prompt", "-y", "hi").returncode == 0
    first = json.loads(cli.run("sessions", "--format", "json").stdout)["sessions"][0]["session_id"]
    forked = cli.run("prompt", "-y", "--fork", first, "again")
    assert forked.returncode == 0, forked.stderr
    shown = cli.run("show", "last").stdout.decode()
    assert f"> session/fork {first} in {cli.work}" in shown
    assert "< session demo-" in shown.split("> session/fork", 1)[1]


def test_sessions_shows_the_first_line_of_a_chat_as_its_title(cli: Cli) -> None:
    terminal = Terminal(cli, "chat", "-y", "--no-journal")
    terminal.wait_for(b"you> ")
    terminal.send(b"hello from the chat\n")
    terminal.wait_for(b"you> ", count=2)
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    listed = json.loads(cli.run("sessions", "--format", "json").stdout)["sessions"]
    assert [entry["title"] for entry in listed] == ["hello from the chat"]
    assert "hello from the chat" in cli.run("sessions").stdout.decode()
