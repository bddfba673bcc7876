"""A start that takes long says so: while the agent has not answered ``initialize``, the live line (and without a
terminal, a line on stderr every ten seconds) says how long the run waits, of how long, and on what; a program
that is not ``npx``/``uvx`` gets half a minute by default, not two."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from helpers import wait_for
from helpers.cli import TIMEOUT, Cli, Terminal, marked_processes

SILENT = "import time\ntime.sleep(600)\n"


def silent_agent(cli: Cli) -> Path:
    path = cli.tmp / "silent.py"
    path.write_text(SILENT)
    return path


def fake_npx(cli: Cli) -> dict[str, str]:
    """An environment whose ``npx`` is a program that never answers (as a download that takes long)."""
    bin_dir = cli.tmp / "bin"
    bin_dir.mkdir()
    npx = bin_dir / "npx"
    npx.write_text(f"#!/bin/sh\nexec {sys.executable} {silent_agent(cli)}\n")
    npx.chmod(0o755)
    return dict(cli.env, PATH=f"{bin_dir}:{cli.env['PATH']}")


def agent_started(cli: Cli) -> bool:
    for pid in marked_processes(cli.marker):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1].endswith(b"silent.py"):
            return True
    return False


def test_the_live_line_says_what_the_start_waits_on_and_a_program_gets_half_a_minute(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent-command", f"{sys.executable} {silent_agent(cli)}", "hi")
    terminal.wait_for(b"waiting for initialize (up to 30 s): ")
    terminal.wait_for(b"has not answered yet")
    wait_for(lambda: agent_started(cli), timeout=TIMEOUT, what="the agent started")
    terminal.proc.send_signal(signal.SIGINT)
    assert terminal.finish() == 130


def test_an_npx_agent_waits_two_minutes_and_says_npx_may_be_fetching_its_package(cli: Cli) -> None:
    cli.env = fake_npx(cli)
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", "qwen", "hi")
    terminal.wait_for(b"waiting for initialize (up to 120 s): npx may be fetching @qwen-code/qwen-code@")
    wait_for(lambda: agent_started(cli), timeout=TIMEOUT, what="the fake npx started")
    terminal.proc.send_signal(signal.SIGINT)
    assert terminal.finish() == 130


@pytest.mark.slow
def test_without_a_terminal_a_line_every_ten_seconds_says_how_long_of_how_long(cli: Cli) -> None:
    cli.env = fake_npx(cli)
    done = cli.run("prompt", "--no-journal", "--agent", "qwen", "--startup-timeout", "12", "hi")
    assert done.returncode == 1
    stderr = done.stderr.decode()
    assert "still waiting for initialize: 10 s of 12 s (npx may be fetching @qwen-code/qwen-code@" in stderr
    assert stderr.count("still waiting for initialize") == 1
    assert "no answer to initialize in 12 s" in stderr
