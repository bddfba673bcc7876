"""The ``tinyacp`` command and the newer parts of ACP, against the demo agent (and a scripted one for what the
demo does not send): notices on stderr and never in the reply, compaction as a status line, the plan by id, a
child session's work under its name, the policy by tool name, ``probe``'s report of what an agent offers.

Each run is a subprocess of the command; where a terminal matters, it runs on a pseudo-terminal. Every wait has
a deadline (the ``Cli`` and ``Terminal`` helpers of ``helpers.cli``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from helpers import end_turn, handshake
from helpers.cli import Cli, Terminal, json_events
from helpers.hostile import EVIL, assert_clean
from tinyacp.cli.journals._show import show

INIT = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "scripted", "version": "1"}}
FALLBACK_LINE = "notice (warning): Model fallback — demo-large is overloaded; this turn uses demo-small."


# -- notices ----------------------------------------------------------------------------------------------------


def test_a_notice_goes_to_stderr_on_its_own_line_and_never_into_the_reply(cli: Cli) -> None:
    done = cli.run("prompt", "--yes", "with-notice hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == cli.expected_reply("with-notice hello")
    assert FALLBACK_LINE in done.stderr.decode().splitlines()
    assert " · 1 notice · " in done.stderr.decode()  # the done line says it again


def test_a_warning_notice_is_shown_even_when_quiet(cli: Cli) -> None:
    done = cli.run("prompt", "--yes", "--quiet", "with-notice hello")
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines() == [FALLBACK_LINE]
    assert "Model fallback" not in done.stdout.decode()


def test_json_has_a_notice_event_after_its_update_and_a_result_text_without_it(cli: Cli) -> None:
    done = cli.run("prompt", "--yes", "--format", "json", "with-notice hello")
    assert done.returncode == 0, done.stderr
    events = json_events(done.stdout)
    (at,) = [i for i, event in enumerate(events) if event["type"] == "notice"]
    update, notice = events[at - 1], events[at]
    assert update["type"] == "update" and update["kind"] == "notice"
    assert notice == {
        "type": "notice",
        "epoch": 1,
        "seq": update["seq"],
        "session_id": update["session_id"],
        "severity": "warning",
        "title": "Model fallback",
        "description": "demo-large is overloaded; this turn uses demo-small.",
    }
    assert events[-1]["text"] == cli.expected_reply("with-notice hello")
    assert events[-1]["notices"] == [
        {"severity": "warning", "title": "Model fallback", "description": notice["description"]}
    ]


# -- compaction, plan ---------------------------------------------------------------------------------------------


def test_compaction_shows_as_status_lines(cli: Cli) -> None:
    done = cli.run("prompt", "--yes", "with-compaction hello")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().splitlines()
    started = lines.index("compaction: in_progress")
    assert lines[started + 1] == f"compaction: completed — 0 earlier turns in {cli.work}."
    assert "Compact" not in done.stdout.decode()


def test_plan_operations_show_the_plan_by_id_markdown_plans_and_their_removal(cli: Cli) -> None:
    def plan_update(plan: dict[str, Any]) -> dict[str, Any]:
        return {"op": "update", "session": "s1", "update": {"sessionUpdate": "plan_update", "plan": plan}}

    entries = [{"content": "Look around", "priority": "high", "status": "in_progress"}]
    markdown = "## Plan\n1. look\n2. \x1b[2Jtell"
    agent = cli.scripted(
        [
            *handshake(),
            plan_update({"type": "items", "planId": "p1", "entries": entries}),
            plan_update({"type": "markdown", "planId": "p2", "content": markdown}),
            plan_update({"type": "file", "planId": "p3", "uri": "file:///tmp/plan.md"}),
            {"op": "update", "session": "s1", "update": {"sessionUpdate": "plan_removed", "planId": "p1"}},
            end_turn(),
        ]
    )
    done = cli.run("prompt", "--agent", agent, "hi")
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode()
    assert "plan:\n  [~] Look around\n" in err
    assert "plan:\n  ## Plan\n  1. look\n  2. tell\n" in err  # sanitized: no escape sequence reaches stderr
    assert "plan: file:///tmp/plan.md\n" in err
    assert "\x1b" not in err


# -- a child session ------------------------------------------------------------------------------------------


def test_a_child_sessions_work_is_shown_under_its_name_and_its_reply_stays_out_of_stdout(cli: Cli) -> None:
    done = cli.run("prompt", "--allow-tool", "Read", "with-subagent hello")
    assert done.returncode == 0, done.stderr
    reply = done.stdout.decode()
    assert reply.startswith('You said: with-subagent hello\nMy helper "File reader" did the reading.\nI read 2 files')
    assert reply.count("I read 2 files") == 1  # the child's own answer is not part of the reply
    lines = done.stderr.decode().splitlines()
    assert f"subagent [File reader] started: Lists the files in {cli.work} (running)" in lines
    assert f"message from the agent to [File reader]: List the files in {cli.work}." in lines
    assert f"[File reader] tool call_1 [read] Read files in {cli.work}: completed" in lines
    assert (
        f"[File reader] permission: Read files in {cli.work} [read] (Read): allowed once "
        "(by the policy: --allow-tool Read)" in lines
    )
    assert any(line.startswith("[File reader] says: I read 2 files") for line in lines)
    assert any(line.startswith("message from [File reader] to the agent: I read 2 files") for line in lines)
    assert "subagent [File reader]: idle (end_turn)" in lines
    assert any(line.startswith("done: end_turn") and " · 1 subagent · " in line for line in lines)


def test_on_a_terminal_a_childs_permission_question_says_which_child_asks(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "with-subagent hello")
    terminal.wait_for(b"allow? [y] once")
    assert b"? its subagent [File reader] asks to run: Read files in" in terminal.output
    terminal.send(b"y\n")
    assert terminal.finish() == 0
    assert b"I read 2 files" in terminal.output


def test_json_permission_events_name_the_tool_and_the_childs_parent(cli: Cli) -> None:
    done = cli.run("prompt", "--format", "json", "--allow-tool", "Read", "with-subagent hello")
    assert done.returncode == 0, done.stderr
    events = json_events(done.stdout)
    session_id = events[0]["session_id"]
    (permission,) = [event for event in events if event["type"] == "permission"]
    assert permission["session_id"] == f"{session_id}.sub-1"
    assert permission["parent_session_id"] == session_id
    assert permission["tool_call"]["name"] == "Read"
    assert (permission["decided_by"], permission["rule"]) == ("policy", "--allow-tool Read")
    assert events[-1]["subagents"] == [
        {"session_id": f"{session_id}.sub-1", "title": "File reader", "description": f"Lists the files in {cli.work}"}
    ]


# -- the policy by tool name ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "prompt", "allowed", "rule"),
    [
        (["--allow-tool", "Read"], "hello", True, "--allow-tool Read"),
        (["--allow-tool", "Read"], "with-bash hello", False, "not asked"),
        (["--yes", "--deny-tool", "Bash"], "with-bash hello", False, "--deny-tool Bash"),
        (["--allow-kind", "execute", "--deny-tool", "Bash"], "with-bash hello", False, "--deny-tool Bash"),
        (["--yes", "--deny-tool", "Bash"], "hello", True, "--yes"),
        (["--allow-tool", "Bash", "--deny-tool", "Bash"], "with-bash hello", False, "--deny-tool Bash"),
    ],
)
def test_tool_flags_allow_and_deny_by_the_tools_name(
    cli: Cli, flags: list[str], prompt: str, allowed: bool, rule: str
) -> None:
    done = cli.run("prompt", "--format", "json", *flags, prompt)
    assert done.returncode == 0, done.stderr
    (permission,) = [event for event in json_events(done.stdout) if event["type"] == "permission"]
    assert (permission["allowed"], permission["rule"]) == (allowed, rule)
    assert permission["decided_by"] == ("default-reject" if rule == "not asked" else "policy")


def test_a_denied_tool_is_rejected_on_a_terminal_without_asking(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "--deny-tool", "Bash", "with-bash hello")
    assert terminal.finish() == 0
    assert b"allow? [y]" not in terminal.output
    assert b"rejected\x1b[0m (by the policy: --deny-tool Bash)" in terminal.output


def test_batch_takes_the_tool_flags_and_keeps_notices_out_of_the_records(cli: Cli) -> None:
    items = cli.tmp / "items.jsonl"
    lines = [
        {"id": "read", "prompt": "hello"},
        {"id": "bash", "prompt": "with-bash hello"},
        {"id": "notice", "prompt": "with-notice hello"},
    ]
    items.write_text("".join(json.dumps(item) + "\n" for item in lines))
    out = cli.tmp / "out"
    done = cli.run("batch", str(items), "--out", str(out), "--yes", "--deny-tool", "Bash", "--quiet")
    assert done.returncode == 0, done.stderr
    records = {record["id"]: record for record in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert records["read"]["text"] == cli.expected_reply()
    assert records["bash"]["text"] == f"You said: with-bash hello\nI was not allowed to read the files in {cli.work}.\n"
    assert records["notice"]["text"] == cli.expected_reply("with-notice hello")
    assert records["notice"]["notices"] == [
        {"severity": "warning", "title": "Model fallback", "description": FALLBACK_LINE.partition(" — ")[2]}
    ]
    assert records["read"]["notices"] == []


# -- probe ----------------------------------------------------------------------------------------------------


def test_probe_shows_what_the_agent_offers_of_the_newer_calls(cli: Cli) -> None:
    done = cli.run("probe")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    for line in (
        "fork:                 yes",
        "system prompt:        append, override",
        "session titles:       yes",
        "providers:            yes",
        "the command opts in:  notices, compaction, plan operations, subagents, elicitation",
        "  demo: openai at https://example.com/tinyacp-demo/v1 (takes openai, anthropic)",
    ):
        assert line in lines
    report = json.loads(cli.run("probe", "--format", "json").stdout)
    assert report["newer"] == {
        "fork": True,
        "system_prompt": ["append", "override"],
        "title": True,
        "providers": True,
        "opted_in": ["notices", "compaction", "plan_operations", "subagents", "elicitation"],
        "provider_list": [
            {
                "id": "demo",
                "supported": ["openai", "anthropic"],
                "required": False,
                "current": {"api_type": "openai", "base_url": "https://example.com/tinyacp-demo/v1"},
            }
        ],
    }


def test_probe_reads_an_override_advertised_the_old_wrong_way_as_append_only(cli: Cli) -> None:
    init = {
        "protocolVersion": 1,
        "agentCapabilities": {"sessionCapabilities": {"systemPrompt": {"override": {}}}},
        "agentInfo": {"name": "scripted", "version": "1"},
    }
    agent = cli.scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": init},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s1"}},
        ]
    )
    report = json.loads(cli.run("probe", "--agent", agent, "--format", "json").stdout)
    assert report["newer"]["system_prompt"] == ["append"]
    assert report["newer"]["fork"] is False


# -- tools by name in config.toml -------------------------------------------------------------------------------


def _config(cli: Cli, text: str) -> None:
    config = cli.tmp / "config" / "tinyacp"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(text)


@pytest.mark.parametrize(
    ("table", "flags", "prompt", "verdict"),
    [
        ('allow_tools = ["Read"]', [], "hello", (True, "allow_tools Read (config.toml)")),
        ('deny_tools = ["Bash"]', ["--yes"], "with-bash hello", (False, "deny_tools Bash (config.toml)")),
        ('deny_tools = ["Bash"]', ["--yes"], "hello", (True, "--yes")),
        ('allow_tools = ["Read"]', ["--deny-tool", "Read"], "hello", (False, "--deny-tool Read")),
    ],
)
def test_an_agents_entry_in_the_config_file_allows_and_denies_tools(
    cli: Cli, table: str, flags: list[str], prompt: str, verdict: tuple[bool, str]
) -> None:
    _config(cli, f"[agents.demo]\n{table}\n")
    done = cli.run("prompt", "--format", "json", *flags, prompt)
    assert done.returncode == 0, done.stderr
    (permission,) = [event for event in json_events(done.stdout) if event["type"] == "permission"]
    assert (permission["allowed"], permission["rule"]) == verdict


def test_a_mistyped_tool_key_in_the_config_file_is_a_usage_error_that_names_the_right_one(cli: Cli) -> None:
    _config(cli, '[agents.demo]\ndeny_tool = ["Bash"]\n')
    done = cli.run("prompt", "--yes", "with-bash hello")
    assert done.returncode == 2
    assert "deny_tools" in done.stderr.decode()


def test_batch_applies_the_tools_an_agents_entry_denies(cli: Cli) -> None:
    _config(cli, '[agents.demo]\ncommand = "demo"\ndeny_tools = ["Bash"]\n')
    items = cli.tmp / "items.jsonl"
    items.write_text(json.dumps({"id": "bash", "prompt": "with-bash hello"}) + "\n")
    out = cli.tmp / "out"
    done = cli.run("batch", str(items), "--out", str(out), "--yes", "--quiet")
    assert done.returncode == 0, done.stderr
    (record,) = map(json.loads, (out / "results.jsonl").read_text().splitlines())
    assert record["text"] == f"You said: with-bash hello\nI was not allowed to read the files in {cli.work}.\n"


# -- fork -----------------------------------------------------------------------------------------------------


def _history(state: Path, session_id: str) -> list[str]:
    """The prompts a demo session's state file keeps, in order."""
    record = json.loads((state / f"{session_id}.json").read_text())
    return [update["content"]["text"] for update in record["history"][::2]]


def test_prompt_fork_forks_the_session_and_prompts_the_fork(cli: Cli, demo_state_dir: Path) -> None:
    first = cli.run("prompt", "--yes", "--format", "json", "remember this")
    assert first.returncode == 0, first.stderr
    source = json_events(first.stdout)[0]["session_id"]
    done = cli.run("prompt", "--yes", "--format", "json", "--fork", source, "and this")
    assert done.returncode == 0, done.stderr
    fork = json_events(done.stdout)[0]["session_id"]
    assert fork != source
    assert f"forked session {source} into {fork}" in done.stderr.decode()
    assert _history(demo_state_dir, fork) == ["remember this", "and this"]
    assert _history(demo_state_dir, source) == ["remember this"]  # the source is left as it was


def test_fork_of_an_unknown_session_is_a_usage_error_naming_it(cli: Cli) -> None:
    done = cli.run("prompt", "--yes", "--fork", "demo-404", "hello")
    assert done.returncode == 2
    assert "cannot fork session demo-404: the agent does not know it" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


def test_fork_with_an_agent_that_cannot_fork_is_refused_before_anything_is_sent(cli: Cli) -> None:
    agent = cli.scripted(
        [{"op": "expect", "method": "initialize"}, {"op": "reply", "result": INIT}, {"op": "wait_eof"}]
    )
    done = cli.run("prompt", "--agent", agent, "--fork", "s0", "hello")
    assert done.returncode == 2, done.stderr
    assert "cannot fork session s0" in done.stderr.decode()
    received = [json.loads(line) for line in (cli.tmp / "agent.log").read_text().splitlines()]
    assert [message.get("method") for message in received] == ["initialize"]


def test_chat_fork_goes_on_in_the_fork(cli: Cli, demo_state_dir: Path) -> None:
    terminal = Terminal(cli, "chat", "--yes", "--no-journal")
    terminal.wait_for(b"you> ")
    terminal.send(b"one\n")
    terminal.wait_for(b"done: end_turn")
    terminal.wait_for(b"you> ", count=2)
    terminal.send(b"/fork\n")
    terminal.wait_for(b"the chat goes on in the fork")
    terminal.wait_for(b"you> ", count=3)
    terminal.send(b"two\n")
    terminal.wait_for(b"done: end_turn", count=2)
    terminal.wait_for(b"you> ", count=4)
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert b"forked session demo-1 into demo-2" in terminal.output
    assert _history(demo_state_dir, "demo-1") == ["one"]
    assert _history(demo_state_dir, "demo-2") == ["one", "two"]


def test_batch_items_fork_a_session_before_their_turn(cli: Cli, demo_state_dir: Path) -> None:
    first = cli.run("prompt", "--yes", "--format", "json", "the common start")
    source = json_events(first.stdout)[0]["session_id"]
    items = cli.tmp / "items.jsonl"
    lines = [{"id": "a", "prompt": "ask a", "fork": source}, {"id": "b", "prompt": "ask b", "fork": source}]
    items.write_text("".join(json.dumps(item) + "\n" for item in lines))
    out = cli.tmp / "out"
    done = cli.run("batch", str(items), "--out", str(out), "--yes", "--quiet", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    histories = sorted(
        _history(demo_state_dir, path.stem) for path in demo_state_dir.glob("demo-*.json") if path.stem != source
    )
    assert histories == [["the common start", "ask a"], ["the common start", "ask b"]]
    assert _history(demo_state_dir, source) == ["the common start"]


def test_a_batch_item_with_an_empty_fork_is_refused_before_any_turn(cli: Cli) -> None:
    items = cli.tmp / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "prompt": "x", "fork": " "}) + "\n")
    done = cli.run("batch", str(items), "--out", str(cli.tmp / "out"))
    assert done.returncode == 2
    assert "fork names no session" in done.stderr.decode()


# -- questions (elicitation) ----------------------------------------------------------------------------------


def test_on_a_terminal_a_form_is_asked_field_by_field(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "--allow-tool", "Read", "with-question hello")
    terminal.wait_for(b"? the agent asks: How should I summarise the files?")
    terminal.wait_for(b"Your name (required): ")
    terminal.send(b"\n")
    terminal.wait_for(b"an answer is required")
    terminal.send(b"Ada\n")
    terminal.wait_for(b"Style (1: Short, 2: Long) [short]: ")
    terminal.send(b"2\n")
    terminal.wait_for(b"Lines at most (whole number, 1 to 100) [10]: ")
    terminal.send(b"many\n")
    terminal.wait_for(b"answer with a whole number")
    terminal.send(b"300\n")
    terminal.wait_for(b"at most 100")
    terminal.send(b"3\n")
    terminal.wait_for(b"Detail, from 0 to 1 (number, 0 to 1) [0.5]: ")
    terminal.send(b"\n")  # the default
    terminal.wait_for(b"Show the sizes (y/n) [y]: ")
    terminal.send(b"n\n")
    assert terminal.finish() == 0
    assert b'You answered: name="Ada", style="long", lines=3, detail=0.5, sizes=false.' in terminal.output
    assert b"question: How should I summarise the files?: \x1b[32manswered by you" in terminal.output


def test_ctrl_d_declines_the_form(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "--allow-tool", "Read", "with-question hello")
    terminal.wait_for(b"Your name (required): ")
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert b"You declined the question: I use the defaults." in terminal.output
    assert b"declined by you" in terminal.output


def test_without_a_terminal_a_form_is_declined_and_the_json_says_so(cli: Cli) -> None:
    done = cli.run("prompt", "--format", "json", "--allow-tool", "Read", "with-question hello")
    assert done.returncode == 0, done.stderr
    (event,) = [event for event in json_events(done.stdout) if event["type"] == "elicitation"]
    assert (event["mode"], event["message"], event["action"]) == (
        "form",
        "How should I summarise the files?",
        "decline",
    )
    assert event["reason"] == "declined: there is no terminal to ask"
    assert "You declined the question" in json_events(done.stdout)[-1]["text"]
    assert "question: How should I summarise the files?: declined: there is no terminal to ask" in done.stderr.decode()


def test_a_url_question_shows_the_link_sanitized_and_n_declines_it(cli: Cli) -> None:
    params = {
        "sessionId": "s1",
        "mode": "url",
        "message": "Sign in to Acme",
        "elicitationId": "e1",
        "url": "https://example.com/login?\x1b[2Jx",
    }
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "request", "id": 5, "method": "elicitation/create", "params": params},
            end_turn(),
        ]
    )
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", agent, "hi")
    terminal.wait_for(b"done there? [Enter] yes  [n] decline: ")
    terminal.send(b"n\n")
    assert terminal.finish() == 0
    assert b"? the agent asks you to open a link: Sign in to Acme" in terminal.output
    assert b"https://example.com/login?x" in terminal.output  # shown, sanitized, not opened
    assert b"not opened: open it yourself, or run with --open-urls" in terminal.output
    assert b"declined by you" in terminal.output
    received = [json.loads(line) for line in (cli.tmp / "agent.log").read_text().splitlines()]
    (answer,) = [message for message in received if message.get("id") == 5]
    assert answer["result"] == {"action": "decline"}


@pytest.mark.parametrize(
    ("spec", "text", "expected"),
    [
        ({"type": "string", "minLength": 2}, "A", (False, "at least 2 characters")),
        ({"type": "string", "maxLength": 3}, "Ada", (True, "Ada")),
        ({"type": "string", "enum": ["short", "long"]}, "2", (True, "long")),
        (
            {"type": "string", "enum": ["short", "long"]},
            "3",
            (False, "answer with one of the numbers, values or titles"),
        ),
        ({"type": "string", "oneOf": [{"const": "s", "title": "Short"}]}, "short", (True, "s")),
        ({"type": "string", "enum": ["a", "b"], "enumNames": ["Apple", "Banana"]}, "banana", (True, "b")),
        ({"type": "integer", "minimum": 1}, "0", (False, "at least 1")),
        ({"type": "integer"}, "2.5", (False, "answer with a whole number")),
        ({"type": "integer"}, "-7", (True, -7)),
        ({"type": "number", "maximum": 1}, "0.25", (True, 0.25)),
        ({"type": "number"}, "nan", (False, "answer with a finite number")),
        ({"type": "number"}, "x", (False, "answer with a number")),
        ({"type": "boolean"}, "Yes", (True, True)),
        ({"type": "boolean"}, "0", (True, False)),
        ({"type": "boolean"}, "maybe", (False, "answer y or n")),
        ({"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}}, "1, c, a", (True, ["a", "c"])),
        (
            {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}, "maxItems": 0},
            "x",
            (False, "choose at most 0"),
        ),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}},
            "a, z",
            (False, "answer with the numbers, values or titles shown, separated by commas"),
        ),
    ],
)
def test_each_kind_of_field_reads_its_answer(spec: dict[str, Any], text: str, expected: tuple[bool, Any]) -> None:
    from tinyacp.cli.run._questions import fields_of, parse

    fields = fields_of({"type": "object", "properties": {"f": spec}})
    assert not isinstance(fields, str)
    (field,) = fields
    assert parse(text, field) == expected


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            {"properties": {"f": {"type": "object"}}, "required": ["f"]},
            "its field 'f' is of a kind the command cannot ask",
        ),
        ({"properties": {"f": {"type": "array"}}, "required": ["f"]}, "its field 'f' asks for several values"),
        ({"properties": {str(i): {"type": "string"} for i in range(51)}}, "its form has 51 fields"),
        ({"properties": []}, "its form has no fields the command can read"),
    ],
)
def test_a_form_the_command_cannot_ask_is_declined_unasked(schema: dict[str, Any], why: str) -> None:
    from tinyacp.cli.run._questions import fields_of

    found = fields_of(schema)
    assert isinstance(found, str) and found.startswith(why)


def test_a_field_the_command_cannot_ask_and_need_not_is_left_out() -> None:
    from tinyacp.cli.run._questions import fields_of

    found = fields_of({"properties": {"odd": {"type": "object"}, "name": {"type": "string"}}})
    assert not isinstance(found, str)
    assert [field.name for field in found] == ["name"]


def test_show_renders_notices_compaction_plans_by_id_and_a_childs_reply_apart(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    done = cli.run(
        "prompt", "--journal", str(journal), "--allow-tool", "Read", "with-notice with-compaction with-subagent x"
    )
    assert done.returncode == 0, done.stderr
    shown = cli.run("show", str(journal))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.decode().splitlines()
    assert f"  {FALLBACK_LINE}" in lines
    assert "  compaction: completed" in lines
    assert "  plan plan-1: 2/2 done" in lines
    assert [line for line in lines if line.startswith("  subagent")] == [
        "  subagent [File reader]: running",
        "  subagent [File reader]: idle",
    ]
    said = [line for line in lines if line.startswith("  [File reader] says: I read 2 files")]
    assert len(said) == 1
    reply = lines.index("  reply:")
    assert lines[reply + 1 : reply + 3] == [
        "    You said: with-notice with-compaction with-subagent x",
        '    My helper "File reader" did the reading.',
    ]


def test_show_renders_the_agents_question_and_who_declined_it_in_text_and_json(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    done = cli.run("prompt", "--journal", str(journal), "with-question x")  # no terminal: the command declines
    assert done.returncode == 0, done.stderr
    shown = cli.run("show", str(journal))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.decode().splitlines()
    asked = lines.index("  ? question asked: How should I summarise the files?")
    assert lines[asked + 1 : asked + 3] == [
        "    fields: name, style, lines, detail, sizes",
        "    -> decline (decided by observer)",
    ]
    as_json = cli.run("show", "--format", "json", str(journal))
    assert as_json.returncode == 0, as_json.stderr
    records = [json.loads(line) for line in as_json.stdout.decode().splitlines()]
    (question,) = [record for record in records if record.get("kind") == "elicitation"]
    assert question["message"]["params"]["message"] == "How should I summarise the files?"
    ours = [record for record in records if record.get("dir") == "out" and record.get("kind") == "response"]
    (answer,) = [record for record in ours if record["message"]["id"] == question["message"]["id"]]
    assert answer["decided_by"] == "observer"
    assert answer["message"]["result"] == {"action": "decline"}


def test_show_renders_an_accepted_answer_with_its_content_and_a_childs_question_under_its_name(
    tmp_path: Path,
) -> None:
    from helpers.view import newer_journal

    journal = newer_journal(tmp_path / "newer.jsonl", tmp_path / "work")
    out, err = io.StringIO(), io.StringIO()
    assert show(journal, "text", out, err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    accepted = lines.index("  ? question asked: How should I summarise the files?") + 2
    assert lines[accepted] == '    -> accept {"name":"Ada <b>","style":"short","lines":3} (decided by observer)'
    (child,) = [number for number, line in enumerate(lines) if line.startswith("  ? [Kid ")]
    assert " question asked: Log in " in lines[child]
    assert lines[child + 1 : child + 3] == [
        "    url (not opened): javascript:window.__pwned=6",
        "    -> decline (decided by default-decline)",
    ]


def test_show_renders_a_url_question_and_its_field_names_as_plain_text_with_nothing_a_terminal_acts_on(
    cli: Cli,
) -> None:
    url = {
        "sessionId": "s1",
        "mode": "url",
        "message": f"Sign in {EVIL}",
        "elicitationId": "e1",
        "url": f"https://x/{EVIL}",
    }
    form = {"type": "object", "properties": {f"na{EVIL}me": {"type": "string"}}}
    params = {"sessionId": "s1", "mode": "form", "message": "Name?", "requestedSchema": form}
    journal = cli.tmp / "run.jsonl"
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "request", "id": 5, "method": "elicitation/create", "params": url},
            {"op": "request", "id": 6, "method": "elicitation/create", "params": params},
            end_turn(),
        ]
    )
    assert cli.run("prompt", "--journal", str(journal), "--agent", agent, "hi").returncode == 0
    shown = cli.run("show", str(journal))
    assert shown.returncode == 0, shown.stderr
    assert_clean(shown.stdout)
    lines = shown.stdout.decode().splitlines()
    (asked,) = [number for number, line in enumerate(lines) if line.startswith("  ? question asked: Sign in ")]
    assert lines[asked + 1].startswith("    url (not opened): https://x/")
    assert lines[asked + 2] == "    -> decline (decided by observer)"
    (form_asked,) = [number for number, line in enumerate(lines) if line == "  ? question asked: Name?"]
    assert lines[form_asked + 1].startswith("    fields: na") and lines[form_asked + 1].endswith("me")
    assert lines[form_asked + 2] == "    -> decline (decided by observer)"


def test_a_childs_question_says_which_child_asks(cli: Cli) -> None:
    announce = {
        "sessionUpdate": "subagent_update",
        "sessionId": "c1",
        "title": "Planner",
        "state": {"state": "running"},
    }
    form = {"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]}
    params = {"sessionId": "c1", "mode": "form", "message": "Go ahead?", "requestedSchema": form}
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "update", "session": "s1", "update": announce},
            {"op": "request", "id": 9, "method": "elicitation/create", "params": params},
            end_turn(),
        ]
    )
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", agent, "hi")
    terminal.wait_for(b"? its subagent [Planner] asks: Go ahead?")
    terminal.wait_for(b"go (y/n) (required): ")
    terminal.send(b"y\n")
    assert terminal.finish() == 0
    assert b"[Planner] question: Go ahead?: " in terminal.output
    received = [json.loads(line) for line in (cli.tmp / "agent.log").read_text().splitlines()]
    (answer,) = [message for message in received if message.get("id") == 9]
    assert answer["result"] == {"action": "accept", "content": {"go": True}}


def test_chat_asks_a_form_on_its_terminal_between_its_input_lines(cli: Cli) -> None:
    terminal = Terminal(cli, "chat", "--no-journal", "--allow-tool", "Read")
    terminal.wait_for(b"you> ")
    terminal.send(b"with-question hello\n")
    terminal.wait_for(b"Your name (required): ")
    terminal.send(b"Bo\n")
    for prompt in (b"Style (1: Short, 2: Long) [short]: ", b"[10]: ", b"[0.5]: ", b"(y/n) [y]: "):
        terminal.wait_for(prompt)
        terminal.send(b"\n")
    terminal.wait_for(b"done: end_turn")
    terminal.wait_for(b"you> ", count=2)
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert b'You answered: name="Bo", style="short", lines=10, detail=0.5, sizes=true.' in terminal.output


def test_what_an_agent_puts_in_notices_and_child_names_reaches_no_terminal_raw(cli: Cli) -> None:
    evil = "x\x1b]0;pwned\x07\x1b[2J\u202e"
    notice = {"sessionUpdate": "notice", "severity": "warning\x1b[31m", "title": evil, "description": evil}
    child = {"sessionUpdate": "subagent_update", "sessionId": "c1", "title": evil, "description": evil}
    said = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": evil}}
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "update", "session": "s1", "update": notice},
            {"op": "update", "session": "s1", "update": child},
            {"op": "update", "session": "c1", "update": said},
            end_turn(),
        ]
    )
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", agent, "hi")
    assert terminal.finish() == 0
    screen = terminal.output
    assert b"pwned" not in screen  # the OSC title sequence is removed whole
    assert b"\x1b]" not in screen and b"\x1b[2J" not in screen and "\u202e".encode() not in screen
    assert b"notice (warning" in screen and b"subagent [x" in screen and b"] says: x" in screen
