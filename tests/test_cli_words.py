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


def test_a_default_agent_typo_in_the_config_file_says_where_it_came_from(cli: Cli) -> None:
    path = cli.tmp / "config" / "tinyacp" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('default_agent = "claud"\n')
    for args in (("prompt", "--no-journal", "hi"), ("batch", "--out", "out", "items.jsonl")):
        (cli.work / "items.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
        done = cli.run(*args)
        assert done.returncode == 2
        stderr = done.stderr.decode()
        assert f"default_agent = 'claud' in the config file {path}: unknown agent 'claud'; did you mean 'claude'?" in (
            stderr
        )
    done = cli.run("prompt", "--no-journal", "--agent", "claud", "hi")  # the flag's own typo: no file named
    assert "config file" not in done.stderr.decode() and "unknown agent 'claud'" in done.stderr.decode()


def test_an_agent_name_that_is_not_utf8_says_so_as_cwd_does(cli: Cli) -> None:
    done = cli.run("prompt", "--no-journal", "--agent", "\udcff\udcfeagent", "hi")
    assert done.returncode == 2
    assert "is not UTF-8 text (byte 0xff at character 0)" in done.stderr.decode()
    assert "unknown agent" not in done.stderr.decode()


@pytest.mark.parametrize(
    ("mark", "words"),
    [(b"\xef\xbb\xbf", "a UTF-8 byte-order mark (EF BB BF)"), (b"\xff\xfe", "a UTF-16 byte-order mark (FF FE)")],
)
def test_a_batch_file_with_a_byte_order_mark_says_so(cli: Cli, mark: bytes, words: str) -> None:
    (cli.work / "items.jsonl").write_bytes(mark + b'{"id": "a", "prompt": "hi"}\n')
    done = cli.run("batch", "--out", "out", "items.jsonl")
    assert done.returncode == 2
    assert f"items.jsonl: starts with {words}: save it as UTF-8 without one" in done.stderr.decode()


def test_batch_out_naming_a_file_says_it_must_be_a_directory(cli: Cli) -> None:
    (cli.work / "items.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    (cli.work / "results.txt").write_text("mine\n")
    done = cli.run("batch", "--out", "results.txt", "items.jsonl")
    assert done.returncode == 2
    assert "--out results.txt: must be a directory (it is a file)" in done.stderr.decode()
    assert (cli.work / "results.txt").read_text() == "mine\n"


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_empty_batch_file_says_it_has_no_items(cli: Cli, text: str) -> None:
    (cli.work / "items.jsonl").write_text(text)
    done = cli.run("batch", "--out", "out", "items.jsonl")
    assert done.returncode == 2
    assert "items.jsonl: has no items (a batch file is one JSON object per line)" in done.stderr.decode()
    assert not (cli.work / "out").exists()
