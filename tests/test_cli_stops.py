"""A run the person stops says so: Ctrl-C or SIGTERM is never told as the agent's failure ("does not speak ACP",
"stopped by kill()"), and ``agents --check`` stopped by Ctrl-C prints the rows it has and what it stopped."""

from __future__ import annotations

import json
import shlex
import signal
import sys
from pathlib import Path

from helpers import pid_alive, wait_for
from helpers.cli import TIMEOUT, Cli, Lines, Terminal, marked_processes

SILENT = "import time\ntime.sleep(600)\n"
"""An agent that never answers: the run waits for it until it is stopped."""


def silent_agent(cli: Cli) -> str:
    path = cli.tmp / "silent.py"
    path.write_text(SILENT)
    return shlex.join([sys.executable, str(path)])


def running(cli: Cli, script: str) -> bool:
    """Whether a process of this run is the Python program ``script`` (not the command naming it in its arguments)."""
    for pid in marked_processes(cli.marker):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1].endswith(script.encode()):
            return True
    return False


def test_ctrl_c_while_the_agent_starts_says_the_person_stopped_the_run(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", silent_agent(cli), "hi")
    terminal.wait_for(b"starting ")
    wait_for(lambda: running(cli, "silent.py"), timeout=TIMEOUT, what="the agent started")
    terminal.proc.send_signal(signal.SIGINT)  # Ctrl-C: the pty is not the run's controlling terminal
    assert terminal.finish() == 130
    output = terminal.output.decode()
    assert "you stopped the run (Ctrl-C) while the agent was starting (it had not answered initialize)" in output
    assert "does not speak ACP" not in output and "check the command" not in output


def test_sigterm_during_the_turn_says_the_run_was_stopped_not_that_the_agent_was_killed(cli: Cli) -> None:
    proc = cli.popen("prompt", "-y", "--agent", "demo --delay 5", "--format", "json", "hi", stderr=cli.tmp / "err")
    lines = Lines(proc)
    session = lines.until(lambda event: event["type"] == "session")
    lines.until(lambda event: event["type"] == "update")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
    assert not pid_alive(session["pid"])
    result = lines.rest()[-1]
    assert result["outcome"] == "terminated"
    assert result["error"]["message"] == "you stopped the run (SIGTERM) during the turn; the agent was stopped"
    stderr = (cli.tmp / "err").read_text()
    assert "you stopped the run (SIGTERM) during the turn" in stderr and "kill()" not in stderr


def test_ctrl_c_in_agents_check_prints_the_rows_it_has_and_what_it_stopped(cli: Cli) -> None:
    silent = silent_agent(cli)
    terminal = Terminal(
        cli, "agents", "--check", "demo", silent, f"{silent} --never", "--concurrency", "1", "--timeout", "600"
    )
    # One at a time: the silent agent runs once the demo agent's row is done; the last one never gets its turn.
    wait_for(lambda: running(cli, "silent.py"), timeout=TIMEOUT, what="the silent agent started")
    terminal.proc.send_signal(signal.SIGINT)  # Ctrl-C: the pty is not the run's controlling terminal
    assert terminal.finish() == 130
    output = terminal.output.decode()
    assert "tinyacp-demo (tinyacp demo agent)" in output  # the row of the agent that answered
    assert "you stopped the check (Ctrl-C) after" in output and "before it answered initialize" in output
    assert "not checked, as you stopped the check before their turn: python" in output
    assert "tinyacp: you stopped the check (Ctrl-C); not finished:" in output


def test_sigterm_in_agents_check_gives_json_rows_for_every_agent(cli: Cli) -> None:
    silent = silent_agent(cli)
    proc = cli.popen("agents", "--check", "demo", silent, "--format", "json", "--timeout", "600", stderr=cli.tmp / "e")
    wait_for(lambda: running(cli, "silent.py"), timeout=TIMEOUT, what="the silent agent started")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
    assert proc.stdout is not None
    rows = json.loads(proc.stdout.read())
    statuses = [row["status"] for row in rows]
    assert len(rows) == 2 and "stopped" in statuses
    stopped = rows[statuses.index("stopped")]
    assert stopped["checked"] and stopped["cause"].startswith("you stopped the check (SIGTERM) after")
