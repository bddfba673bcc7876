"""``tinyacp agents --check``: each agent started in an empty temporary directory, ``initialize`` only, a row of
what it answered or why it did not, each under its own deadline, nothing written where the command ran.

The test agents are small scripts this module writes, named in a config file (``--config``) or given as a
command line; every run goes through :class:`helpers.cli.Cli`, whose fixture checks that no process is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import wait_for
from helpers.cli import TIMEOUT, Cli, Terminal, marked_processes
from tinyacp.cli.agents._check import _check, _table
from tinyacp.cli.agents._resolve import AgentSpec

ROOT = Path(__file__).resolve().parents[1]
DEMO = (sys.executable, "-m", "tinyacp.demo")

# An agent that answers initialize after writing a file into its working directory and saying where that was.
WRITER = """
import json, os, sys
line = sys.stdin.readline()
with open("written-by-agent.txt", "w") as f:
    f.write("x")
with open(sys.argv[1], "w") as f:
    f.write(os.getcwd())
request = json.loads(line)
result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "writer", "version": "9.9"}}
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
sys.stdin.read()
"""


def script(cli: Cli, name: str, text: str) -> Path:
    path = cli.tmp / f"{name}.py"
    path.write_text(text)
    return path


def config(cli: Cli, entries: dict[str, dict[str, Any]]) -> Path:
    """A config file with these agents (``command`` a list, other keys strings)."""
    lines = []
    for name, entry in entries.items():
        lines.append(f"[agents.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    path = cli.tmp / "check.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def rows_of(done: Any) -> dict[str, dict[str, Any]]:
    rows = json.loads(done.stdout)
    assert isinstance(rows, list)
    return {row["name"]: row for row in rows}


def test_the_demo_agent_answers_with_its_version_protocol_auth_sessions_and_newer_calls(cli: Cli) -> None:
    done = cli.run("agents", "--check", "demo", "--format", "json")
    assert done.returncode == 0, done.stderr
    row = rows_of(done)["demo"]
    assert (row["status"], row["answered"], row["checked"], row["found"]) == ("ok", True, True, True)
    assert row["agent"] == {"name": "tinyacp-demo", "version": tinyacp.__version__, "title": "tinyacp demo agent"}
    assert row["version"] == tinyacp.__version__
    assert row["protocol_version"] == 1
    assert [method["id"] for method in row["auth_methods"]] == ["demo-login", "demo-api-key"]
    assert row["auth_methods"][1]["needs"] == "set TINYACP_DEMO_API_KEY"
    assert {"list", "resume", "close", "delete", "fork"} <= set(row["session_capabilities"])
    assert row["load_session"] is True
    assert row["newer"] == {"fork": True, "system_prompt": ["append", "override"], "title": True, "providers": True}
    assert isinstance(row["seconds"], float) and 0 < row["seconds"] < TIMEOUT
    assert row["cause"] is None and row["exit_status"] is None

    text = cli.run("agents", "--check", "demo").stdout.decode()
    first, demo = text.splitlines()[:2]
    assert first.split() == ["agent", "status", "version", "protocol", "time"]
    assert re.fullmatch(rf"demo +ok +{re.escape(tinyacp.__version__)} +1 +\d+\.\d\d s", demo), demo
    assert "auth: demo-login (Demo login): Always succeeds.; demo-api-key" in text
    assert "newer: fork, system prompt (append, override), session titles, providers" in text
    assert "\x1b" not in text  # not a terminal: no colour


def test_a_program_that_prints_a_line_that_is_not_json_shows_that_line(cli: Cli) -> None:
    banner = script(cli, "banner", 'print("kimi-cli is no longer maintained \\x1b[31mred\\x1b[0m")\n')
    path = config(cli, {"banner": {"command": [sys.executable, str(banner)]}})
    done = cli.run("agents", "--config", str(path), "--check", "banner", "--format", "json")
    assert done.returncode == 1, done.stderr
    row = rows_of(done)["banner"]
    assert (row["status"], row["answered"], row["found"]) == ("not_acp", False, True)
    assert "exited before answering initialize (exit code 0)" in row["cause"] and row["exit_status"] == 0
    assert "kimi-cli is no longer maintained" in row["cause"]  # the line is in the message itself

    text = cli.run("agents", "--config", str(path), "--check", "banner").stdout.decode()
    assert re.search(r"^banner +not ACP", text, re.MULTILINE), text
    assert "kimi-cli is no longer maintained red" in " ".join(text.split())  # its escape sequences removed
    assert "\x1b" not in text


def test_a_program_that_prints_a_banner_and_waits_is_stopped_and_named(cli: Cli) -> None:
    waits = script(cli, "waits", 'import time\nprint("Welcome! Type a question:", flush=True)\ntime.sleep(600)\n')
    started = time.monotonic()
    done = cli.run("agents", "--check", shlex.join([sys.executable, str(waits)]), "--format", "json")
    assert time.monotonic() - started < TIMEOUT / 2  # stopped soon after its line, not at the 30 s deadline
    assert done.returncode == 1
    (row,) = json.loads(done.stdout)
    assert row["status"] == "not_acp" and "Welcome! Type a question:" in row["cause"]


def test_a_missing_program_says_not_found_with_the_install_hint_and_exits_7(cli: Cli) -> None:
    path = config(
        cli, {"gone": {"command": ["no-such-agent-anywhere", "--acp"], "install": "pip install no-such-agent"}}
    )
    done = cli.run("agents", "--config", str(path), "--check", "gone", "--format", "json")
    assert done.returncode == 7, done.stderr
    row = rows_of(done)["gone"]
    assert (row["status"], row["found"], row["program"], row["seconds"]) == ("not_installed", False, None, None)
    assert "not found on PATH" in row["cause"]
    assert row["details"] == ["to install gone: pip install no-such-agent"]
    text = cli.run("agents", "--config", str(path), "--check", "gone").stdout.decode()
    assert re.search(r"^gone +not installed", text, re.MULTILINE) and "to install gone: pip install" in text


NPX_OFFLINE = """#!{python}
import sys
sys.stderr.write(
    "npm error code ENOTFOUND\\n"
    "npm error network request to https://registry.npmjs.org/acp-thing failed, reason: getaddrinfo ENOTFOUND "
    "registry.npmjs.org\\n"
)
sys.exit(1)
"""


def test_an_npx_entry_without_the_network_is_not_installed_and_says_why(cli: Cli) -> None:
    bin_dir = cli.tmp / "bin"
    bin_dir.mkdir()
    npx = bin_dir / "npx"
    npx.write_text(NPX_OFFLINE.format(python=sys.executable))
    npx.chmod(0o755)
    path = config(cli, {"fetched": {"command": ["npx", "-y", "acp-thing@1.0.0"]}})
    env = dict(cli.env, PATH=str(bin_dir))
    done = cli.run("agents", "--config", str(path), "--check", "fetched", "--format", "json", env=env)
    assert done.returncode == 7, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["status"], row["found"], row["program"]) == ("not_installed", True, str(npx))
    assert "network" in row["cause"] and "acp-thing" in row["cause"]
    assert any("ENOTFOUND" in line for line in row["stderr"])
    assert isinstance(row["seconds"], float)  # npx started, and failed


def test_an_agent_that_exits_shows_its_status_and_its_stderr(cli: Cli) -> None:
    quits = script(cli, "quits", "import sys\nsys.stderr.write('cannot find my model\\n')\nsys.exit(3)\n")
    command = shlex.join([sys.executable, str(quits)])
    done = cli.run("agents", "--check", "--agent-command", command, "--agent-command", command, "--format", "json")
    assert done.returncode == 1
    (row,) = json.loads(done.stdout)  # the same command line twice is checked once
    assert (row["status"], row["exit_status"], row["source"]) == ("exited", 3, "--agent-command")
    assert "exit code 3" in row["cause"] and row["stderr"] == ["cannot find my model"]


@pytest.mark.slow
def test_agents_that_never_answer_time_out_together_within_their_deadline(cli: Cli) -> None:
    silent = script(cli, "silent", "import time\ntime.sleep(600)\n")
    entry = {"command": [sys.executable, str(silent)]}
    path = config(cli, {"slow1": entry, "slow2": entry, "slow3": entry})
    deadline = 2.0
    started = time.monotonic()
    done = cli.run(
        "agents", "--config", str(path), "--check", "slow1", "slow2", "slow3", "demo",
        "--timeout", str(deadline), "--format", "json",
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    # Checked at once, each under its own deadline: the run takes one deadline, the teardown and the command's
    # own start (a generous margin for a loaded machine), not three deadlines.
    assert elapsed < 3 * deadline + 4, elapsed
    rows = rows_of(done)
    for name in ("slow1", "slow2", "slow3"):
        assert rows[name]["status"] == "timed_out"
        assert rows[name]["cause"] == "timed out: no answer to initialize in 2 s"
        assert deadline <= rows[name]["seconds"] < deadline + 2
        assert "it wrote nothing on stdout" in rows[name]["details"]
        hints = " ".join(rows[name]["details"])
        assert "--timeout" in hints and "--startup-timeout" not in hints  # the check's own deadline is named
    assert rows["demo"]["status"] == "ok"


def test_one_at_a_time_with_concurrency_1_still_meets_each_deadline(cli: Cli) -> None:
    silent = script(cli, "silent", "import time\ntime.sleep(600)\n")
    command = shlex.join([sys.executable, str(silent)])
    started = time.monotonic()
    done = cli.run("agents", "--check", command, "demo", "--concurrency", "1", "--timeout", "1", "--format", "json")
    assert time.monotonic() - started < 1 + 8
    statuses = [row["status"] for row in json.loads(done.stdout)]
    assert statuses == ["timed_out", "ok"] and done.returncode == 1


def test_nothing_is_written_where_the_command_ran_and_the_agents_directory_is_removed(cli: Cli) -> None:
    writer = script(cli, "writer", WRITER)
    where = cli.tmp / "cwd-of-agent.txt"
    before = sorted(os.walk(cli.work))
    done = cli.run("agents", "--check", shlex.join([sys.executable, str(writer), str(where)]), "demo")
    assert done.returncode == 0, done.stderr
    assert sorted(os.walk(cli.work)) == before
    agent_cwd = Path(where.read_text())
    assert agent_cwd != cli.work and not agent_cwd.exists()  # a fresh temporary directory, removed afterwards
    assert not (cli.tmp / "state").exists()  # no journal, no index of sessions


def test_a_relative_path_on_the_command_line_is_the_one_from_where_the_command_ran(cli: Cli) -> None:
    (cli.work / "agents").mkdir()
    (cli.work / "agents" / "writer.py").write_text(WRITER)
    where = cli.tmp / "cwd-of-agent.txt"
    done = cli.run("agents", "--check", f"{shlex.quote(sys.executable)} agents/writer.py {where}", "--format", "json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["status"], row["version"]) == ("ok", "9.9")
    assert not (cli.work / "written-by-agent.txt").exists()


def test_without_names_the_agents_that_start_without_a_download_are_checked(cli: Cli) -> None:
    writer = script(cli, "writer", WRITER)
    path = config(
        cli,
        {
            "mine": {"command": [sys.executable, str(writer), str(cli.tmp / "where.txt")]},
            "fetched": {"command": ["npx", "-y", "some-acp-adapter@1.0.0"]},
            "absent": {"command": ["no-such-agent-anywhere"], "install": "pip install absent"},
        },
    )
    env = dict(cli.env, PATH=str(cli.tmp / "empty-path"))  # no built-in agent's program is found
    done = cli.run("agents", "--config", str(path), "--check", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    rows = rows_of(done)
    checked = sorted(name for name, row in rows.items() if row["checked"])
    assert checked == ["demo", "mine"]
    assert (rows["fetched"]["skipped"], rows["fetched"]["status"]) == ("download", "not_checked")
    assert rows["absent"]["skipped"] == "not_on_path"
    assert rows["absent"]["details"] == ["to install absent: pip install absent"]
    text = cli.run("agents", "--config", str(path), "--check", env=env).stdout.decode()
    footer = " ".join(text.split("\n\n")[-1].split())  # wrapped to the terminal's width: compare the words
    assert "downloads a package (name them, or --all): " in footer and "fetched" in footer
    assert "not on PATH" in footer and "absent" in footer


def test_the_json_rows_have_the_documented_keys(cli: Cli) -> None:
    done = cli.run("agents", "--check", "demo", "no-such-agent-anywhere --acp", "--format", "json")
    assert done.returncode == 7
    rows = json.loads(done.stdout)
    keys = set(rows[0])
    assert all(set(row) == keys for row in rows)
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs.split("### Checking that agents start", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    assert documented == keys


def test_a_pinned_version_beside_the_one_the_agent_reports_shows_a_mismatch() -> None:
    same = asyncio.run(_check(AgentSpec("demo", DEMO, version=tinyacp.__version__), 30.0))
    other = asyncio.run(_check(AgentSpec("old", DEMO, version="0.0.1"), 30.0))
    assert (same["pinned_version"], same["version_matches"]) == (tinyacp.__version__, True)
    assert (other["pinned_version"], other["version_matches"]) == ("0.0.1", False)
    text = _table([same, other], color=False)
    assert f"{tinyacp.__version__} (pinned)" in text
    assert f"{tinyacp.__version__}, pinned 0.0.1: differs" in text


def test_each_line_of_the_table_fits_a_narrow_terminal(cli: Cli) -> None:
    path = config(cli, {"an-agent-with-a-rather-long-name": {"command": list(DEMO)}})
    env = dict(cli.env, COLUMNS="60")
    done = cli.run("agents", "--config", str(path), "--check", "demo", "an-agent-with-a-rather-long-name", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert [line for line in lines if len(line) > 60] == []
    assert sum(line.startswith(("demo ", "an-agent-with-a")) for line in lines) == 2  # one row each


def test_on_a_terminal_the_status_is_coloured_and_the_rows_fit_its_width(cli: Cli) -> None:
    terminal = Terminal(cli, "agents", "--check", "demo")  # a terminal 120 columns wide
    assert terminal.finish() == 0
    text = terminal.output.decode()
    assert "\x1b[32mok\x1b[0m" in text
    assert max(len(line) for line in text.replace("\x1b[32m", "").replace("\x1b[0m", "").splitlines()) <= 120


def test_the_status_is_coloured_only_when_asked() -> None:
    row = asyncio.run(_check(AgentSpec("demo", DEMO), 30.0))
    assert "\x1b[32mok\x1b[0m" in _table([row], color=True)
    assert "\x1b" not in _table([row], color=False)


def test_usage_errors_start_no_agent(cli: Cli) -> None:
    assert cli.run("agents", "--all").returncode == 2
    assert cli.run("agents", "--timeout", "3").returncode == 2
    assert cli.run("agents", "--agent-command", "my-agent --acp").returncode == 2
    done = cli.run("agents", "--check", "demo", "no-such-name")
    assert done.returncode == 2 and b"unknown agent 'no-such-name'" in done.stderr
    assert done.stdout == b""  # refused before any agent started


def test_an_error_answer_to_initialize_is_an_error_but_one_asking_for_a_login_is_an_answer(cli: Cli) -> None:
    broken = cli.scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply_error", "code": -32603, "message": "no model configured"},
            {"op": "wait_eof"},
        ],
        "broken",
    )
    locked = cli.scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply_error", "code": -32000, "message": "Authentication required"},
            {"op": "wait_eof"},
        ],
        "locked",
    )
    path = config(
        cli,
        {
            "broken": {"command": shlex.split(broken)},
            "locked": {"command": shlex.split(locked), "login": "run `locked login`"},
        },
    )
    done = cli.run("agents", "--config", str(path), "--check", "broken", "locked", "--format", "json")
    rows = rows_of(done)
    assert (rows["broken"]["status"], rows["broken"]["answered"]) == ("error", False)
    assert "no model configured" in rows["broken"]["cause"]
    assert (rows["locked"]["status"], rows["locked"]["answered"]) == ("needs_login", True)
    assert any("run `locked login`" in line for line in rows["locked"]["details"])
    assert done.returncode == 1  # the error; the login alone would be 0
    alone = cli.run("agents", "--config", str(path), "--check", "locked")
    assert alone.returncode == 0 and re.search(rb"^locked +needs login", alone.stdout, re.MULTILINE)


def test_all_checks_every_known_agent_npx_entries_included(cli: Cli) -> None:
    path = config(cli, {"fetched": {"command": ["npx", "-y", "some-acp-adapter@1.0.0"]}})
    env = dict(cli.env, PATH=str(cli.tmp / "empty-path"))  # npx is not found: nothing is downloaded
    done = cli.run("agents", "--config", str(path), "--check", "--all", "--format", "json", env=env)
    assert done.returncode == 7, done.stderr
    rows = rows_of(done)
    assert all(row["checked"] for row in rows.values())
    fetched = rows["fetched"]
    assert fetched["status"] == "not_installed" and "'npx' was not found on PATH" in fetched["cause"]
    assert rows["demo"]["status"] == "ok"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_a_signal_stops_the_agents_being_checked_and_the_command(cli: Cli, signum: int, status: int) -> None:
    silent = script(cli, "silent", "import time\ntime.sleep(600)\n")
    command = shlex.join([sys.executable, str(silent)])
    proc = cli.popen("agents", "--check", command, f"{command} --again", "--timeout", "600", stderr=cli.tmp / "err")
    # The command and its two agents: each agent is a process of its own with the run's marker.
    wait_for(lambda: len(marked_processes(cli.marker)) >= 3, timeout=TIMEOUT, what="both agents started")
    proc.send_signal(signum)
    assert proc.wait(timeout=TIMEOUT) == status
    wait_for(lambda: not marked_processes(cli.marker), timeout=TIMEOUT, what="no agent left")
