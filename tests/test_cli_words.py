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


@pytest.mark.parametrize("key", ["allow_tools", "deny_tools"])
def test_an_empty_tool_name_in_the_config_file_is_refused_with_its_entry_and_key(cli: Cli, key: str) -> None:
    path = cli.tmp / "config" / "tinyacp" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(f'[agents.demo]\n{key} = ["Read", " "]\n')
    done = cli.run("prompt", "--no-journal", "--agent", "demo", "hi")
    assert done.returncode == 2
    assert f"agents.demo.{key}: a tool name cannot be empty or blank: ' '" in done.stderr.decode()


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


def journal_names(cli: Cli, count: int) -> list[str]:
    """Run the demo ``count`` times with a journal; the names ``tinyacp journals`` prints, newest first."""
    for _ in range(count):
        assert cli.run("prompt", "-y", "hi").returncode == 0
    listed = cli.run("journals").stdout.decode().splitlines()[1:]
    return [row.split()[-1] for row in listed]


def test_the_names_journals_prints_are_taken_by_show_and_view(cli: Cli) -> None:
    (name,) = journal_names(cli, 1)
    shown = cli.run("show", name)
    assert shown.returncode == 0, shown.stderr
    assert "> initialize" in shown.stdout.decode() and "tinyacp: showing the journal " in shown.stderr.decode()
    page = cli.tmp / "page.html"
    viewed = cli.run("view", name, "-o", str(page))
    assert viewed.returncode == 0, viewed.stderr
    assert page.is_file() and name.encode() not in viewed.stderr


def test_journals_limit_says_how_many_of_how_many(cli: Cli) -> None:
    journal_names(cli, 3)
    header, *rows = cli.run("journals", "--limit", "2").stdout.decode().splitlines()
    assert header.startswith("2 of 3 journals, ") and len(rows) == 2
    assert cli.run("journals", "--limit", "3").stdout.decode().startswith("3 journal(s), ")


def test_show_of_a_binary_file_prints_no_byte_of_it(cli: Cli) -> None:
    binary = cli.work / "blob.jsonl"
    binary.write_bytes(bytes(range(256)) * 40 + b"\n\x00\x1b[2J\xff\n" * 30)
    done = cli.run("show", str(binary))
    assert done.returncode == 2
    assert done.stdout == b""
    assert "not a tinyacp journal: its first 20 lines are not journal records" in done.stderr.decode()


def test_show_of_a_journal_with_binary_lines_names_them_without_their_bytes(cli: Cli) -> None:
    (name,) = journal_names(cli, 1)
    journal = cli.tmp / "state" / "tinyacp" / "journals" / name
    first, *rest = journal.read_bytes().splitlines(keepends=True)
    mixed = cli.work / "mixed.jsonl"
    mixed.write_bytes(b"".join([first, b"\x00\x01\xff\xfe\x1b[2J binary\n", *rest]))
    done = cli.run("show", str(mixed))
    assert done.returncode == 0, done.stderr
    assert b"journal line 2 is not a record: (15 bytes that are not text)" in done.stdout
    assert b"\x00" not in done.stdout and b"\x1b[2J" not in done.stdout
