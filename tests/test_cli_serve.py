"""The command serves files and terminals (``--serve``, ``--root``, ``--allow-command``, ``--deny-command``, the
agent's keys in ``config.toml``, ``tinyacp batch``): decided by the flags, asked on a terminal, refused without
one; each action shown and recorded; what was refused did not happen."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import agent_request as request
from helpers import turn_steps as steps
from helpers.cli import Cli, Terminal, json_events

pytestmark = pytest.mark.smoke


def answers(cli: Cli, name: str = "agent") -> dict[int, dict[str, Any]]:
    log = cli.tmp / f"{name}.log"
    lines = [json.loads(line) for line in log.read_bytes().splitlines() if line.strip()]
    return {line["id"]: line for line in lines if "method" not in line and "id" in line}


def refused(answer: dict[str, Any]) -> bool:
    return "error" in answer and "refused by the client's rules" in answer["error"]["message"]


def test_the_flags_decide_served_actions_and_each_is_shown_and_recorded(cli: Cli) -> None:
    work = cli.work
    agent = cli.scripted(
        steps(
            request(1, "fs/read_text_file", path=str(work / "a.txt")),
            request(2, "fs/write_text_file", path=str(work / "new.txt"), content="nope"),
            request(3, "terminal/create", command="echo served-ok"),
            request(4, "terminal/wait_for_exit", terminalId="term-1"),
            request(5, "terminal/release", terminalId="term-1"),
            request(6, "terminal/create", command=f"rm -rf {work / 'a.txt'}"),
            request(7, "fs/read_text_file", path="/etc/hostname"),
        )
    )
    done = cli.run(
        "prompt",
        "--agent",
        agent,
        "--serve",
        "read,write",
        "--serve",
        "terminal",
        "--allow-kind",
        "read",
        "--allow-command",
        "echo *",
        "--deny-command",
        "*rm *",
        "--format",
        "json",
        "go",
    )
    assert done.returncode == 0, done.stderr
    got = answers(cli)
    assert got[1]["result"] == {"content": "hello\n"}
    assert refused(got[2]) and not (work / "new.txt").exists()
    assert got[3]["result"] == {"terminalId": "term-1"} and got[4]["result"] == {"exitCode": 0, "signal": None}
    assert refused(got[6]) and (work / "a.txt").exists()
    assert refused(got[7])
    served = [event for event in json_events(done.stdout) if event["type"] == "served"]
    assert [(e["kind"], e["allowed"], e["decided_by"], e["rule"]) for e in served] == [
        ("read", True, "policy", "--allow-kind read"),
        ("edit", False, "default-refuse", "no rule allows it and there is no terminal to ask"),
        ("execute", True, "policy", "--allow-command 'echo *'"),
        ("execute", False, "policy", "--deny-command '*rm *'"),
        ("read", False, "confinement", served[4]["reason"]),
    ]
    stderr = done.stderr.decode()
    assert f"read {work / 'a.txt'}: allowed (--allow-kind read)" in stderr
    assert "read 6 bytes" in stderr
    assert "run echo served-ok" in stderr and "term-1 exited with 0" in stderr


def test_yes_allows_served_actions_inside_the_roots_only(cli: Cli, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    agent = cli.scripted(
        steps(
            request(1, "fs/write_text_file", path=str(extra / "kept.txt"), content="yes"),
            request(2, "fs/write_text_file", path=str(tmp_path / "outside.txt"), content="no"),
        )
    )
    done = cli.run("prompt", "--agent", agent, "--serve", "write", "--root", str(extra), "--yes", "go")
    assert done.returncode == 0, done.stderr
    got = answers(cli)
    assert got[1]["result"] == {} and (extra / "kept.txt").read_text() == "yes"
    assert refused(got[2]) and not (tmp_path / "outside.txt").exists()
    assert "(--yes)" in done.stderr.decode()


def test_an_action_no_rule_decides_is_asked_on_a_terminal(cli: Cli) -> None:
    target = cli.work / "asked.txt"
    agent = cli.scripted(
        steps(
            request(1, "fs/write_text_file", path=str(target), content="yes\x1b[2J"),
            request(2, "fs/write_text_file", path=str(cli.work / "second.txt"), content="no"),
        )
    )
    term = Terminal(cli, "prompt", "--agent", agent, "--serve", "write", "--no-journal", "go")
    term.wait_for(b"asks tinyacp to write")
    term.send(b"y\n")
    term.wait_for(b"asks tinyacp to write", count=2)
    term.send(b"n\n")
    assert term.finish() == 0, term.output
    assert target.read_text() == "yes\x1b[2J" and not (cli.work / "second.txt").exists()
    shown = term.output.replace(b"\x1b[32m", b"").replace(b"\x1b[31m", b"").replace(b"\x1b[0m", b"")
    assert b"allowed (by you)" in shown and b"refused (by you)" in shown, shown


def test_the_agents_entry_in_config_serves_and_the_flags_add(cli: Cli) -> None:
    marker = cli.work / "ran"
    agent_steps = steps(
        request(1, "terminal/create", command=sys.executable, args=["-c", f"open({str(marker)!r}, 'w').close()"]),
        request(2, "terminal/wait_for_exit", terminalId="term-1"),
        request(3, "terminal/release", terminalId="term-1"),
        request(4, "fs/write_text_file", path=str(cli.work / "w.txt"), content="w"),
    )
    command = cli.scripted(agent_steps)
    config = cli.tmp / "config" / "tinyacp"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'[agents.mine]\ncommand = {json.dumps(command)}\nserve = ["terminal"]\n'
        f"allow_commands = [{json.dumps(sys.executable + ' *')}]\n"
    )
    done = cli.run("prompt", "--agent", "mine", "--serve", "write", "--allow-kind", "edit", "go")
    assert done.returncode == 0, done.stderr
    got = answers(cli)
    assert got[2]["result"] == {"exitCode": 0, "signal": None} and marker.exists()
    assert got[4]["result"] == {} and (cli.work / "w.txt").read_text() == "w"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--serve", "read,exec"], "read, write and terminal"),
        (["--allow-command", "ls*"], "--serve terminal"),
        (["--serve", "read", "--root", "/no/such/folder"], "not a directory"),
    ],
)
def test_serve_flags_are_checked_before_the_agent_starts(cli: Cli, flags: list[str], words: str) -> None:
    done = cli.run("prompt", "--agent", "demo", *flags, "hello")
    assert done.returncode == 2, done.stderr
    assert words in done.stderr.decode()


def test_a_batch_serves_by_its_flags(cli: Cli) -> None:
    agent = cli.scripted(steps(request(1, "fs/write_text_file", path=str(cli.work / "b.txt"), content="batch")))
    items = cli.tmp / "items.jsonl"
    items.write_text(json.dumps({"id": "one", "prompt": "go"}) + "\n")
    done = cli.run(
        "batch", str(items), "--out", str(cli.tmp / "out"), "--agent", agent, "--serve", "write", "--allow-kind", "edit"
    )
    assert done.returncode == 0, done.stderr
    assert (cli.work / "b.txt").read_text() == "batch"


def test_show_renders_served_actions_their_decisions_and_how_they_ended(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    done = cli.run(
        "prompt",
        "--serve",
        "read,write,terminal",
        "--yes",
        "--journal",
        str(journal),
        "with-read with-write with-terminal hello",
    )
    assert done.returncode == 0, done.stderr
    shown = cli.run("show", str(journal))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.decode()
    assert f"? asks the client to read {cli.work / 'a.txt'}\n    -> allowed (decided by policy: " in text
    assert "    -> 6 bytes read" in text
    assert f"? asks the client to write {cli.work / 'demo-notes.md'}" in text and "; a new file" in text
    assert f"? asks the client to run ls -l {cli.work}" in text
    assert "  terminal/wait_for_exit term-1\n    -> exit 0" in text


def test_an_unnamed_tool_is_allowed_by_no_rule_while_a_tool_is_denied(cli: Cli) -> None:
    options = [
        {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "No", "kind": "reject_once"},
    ]
    unnamed = {"toolCallId": "c1", "title": "Read notes", "kind": "read"}
    agent = cli.scripted(steps(request(1, "session/request_permission", toolCall=unnamed, options=options)))
    done = cli.run("prompt", "--agent", agent, "--allow-kind", "read", "--deny-tool", "Bash", "--format", "json", "go")
    assert done.returncode == 0, done.stderr
    (permission,) = [event for event in json_events(done.stdout) if event["type"] == "permission"]
    assert (permission["allowed"], permission["decided_by"]) == (False, "default-reject")
    assert answers(cli)[1]["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
