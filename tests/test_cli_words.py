"""Words for refusals: a session the agent does not know, a tool rule that matched nothing, an empty tool name, a
config or batch file that cannot be used, and the journals' names."""

from __future__ import annotations

import pytest

from helpers.cli import Cli


def test_a_session_the_agent_does_not_know_gets_the_hint_a_fork_gets(cli: Cli) -> None:
    done = cli.run("prompt", "--no-journal", "--session", "demo-nope", "hi")
    assert done.returncode == 1
    stderr = done.stderr.decode()
    assert "cannot continue the session: the agent does not know it (Resource not found: unknown session)" in stderr
    assert "`tinyacp sessions --agent NAME` lists the agent's own" in stderr
    forked = cli.run("prompt", "--no-journal", "--fork", "demo-nope", "hi")
    assert "`tinyacp sessions --agent NAME` lists the agent's own" in forked.stderr.decode()


def test_a_tool_rule_that_matched_nothing_names_the_tools_the_agent_used(cli: Cli) -> None:
    done = cli.run("prompt", "--no-journal", "--allow-tool", "read", "--deny-tool", "bash", "hi")
    assert done.returncode == 0
    stderr = done.stderr.decode()
    assert "--allow-tool read matched no tool call: the agent's tool calls were named Read (names match exactly)" in (
        stderr
    )
    assert "--deny-tool bash matched no tool call: the agent's tool calls were named Read" in stderr


def test_a_tool_rule_that_matched_says_nothing_more(cli: Cli) -> None:
    done = cli.run("prompt", "--no-journal", "--allow-tool", "Read", "hi")
    assert done.returncode == 0, done.stderr
    assert b"matched no tool call" not in done.stderr
    assert b"(1 allowed, 0 rejected)" in done.stderr


def test_a_tool_rule_is_not_questioned_when_the_agent_asked_no_permission(cli: Cli) -> None:
    done = cli.run("prompt", "--no-journal", "--allow-tool", "read", "all-kinds")
    assert done.returncode == 0, done.stderr
    assert b"matched no tool call" not in done.stderr


@pytest.mark.parametrize("flag", ["--allow-tool", "--deny-tool"])
@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_tool_name_is_refused(cli: Cli, flag: str, name: str) -> None:
    for command in ("prompt", "chat"):
        done = cli.run(command, "--no-journal", flag, name, *(["hi"] if command == "prompt" else []))
        assert done.returncode == 2
        assert f"argument {flag}: a tool name cannot be empty or blank" in done.stderr.decode()
