"""The command against a hostile agent and hostile files on the newer surface: questions (forms) an agent gets
wrong, a probe's answers of the wrong type, a prune's ages no one means, NUL bytes in ``config.toml``, the command's
limits on a turn's notices and children, and its display keeping only what it shows. Each test failed before: a
traceback, a run ended where it should go on, or work that grew with the whole text."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import end_turn, handshake
from helpers.cli import Cli, Terminal, json_events
from tinyacp import Update
from tinyacp._messages import UpdateLine
from tinyacp.cli.run._display import Display
from tinyacp.cli.run._questions import Field, fields_of, parse, prompt_of


def _json_children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "default", "enum", "items", "title", "minimum", "a"]), children, max_size=4
    )


# --------------------------------------------------------------------------------------------------------------
# Questions (elicitation): a form that cannot be read is declined and the turn goes on; a default the field
# cannot carry is ignored; an answer that is no choice is asked again.


def _question(cli: Cli, form: dict[str, Any], *, then: list[dict[str, Any]] | None = None) -> str:
    params = {"sessionId": "s1", "mode": "form", "message": "Tell me", "requestedSchema": form}
    return cli.scripted(
        [
            *handshake(),
            {"op": "request", "id": 5, "method": "elicitation/create", "params": params},
            *(then or []),
            {
                "op": "update",
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}},
            },
            end_turn(),
        ]
    )


def _answer(cli: Cli, request_id: int = 5) -> dict[str, Any]:
    received = [json.loads(line) for line in (cli.tmp / "agent.log").read_text().splitlines()]
    (answer,) = [message for message in received if message.get("id") == request_id and "method" not in message]
    result: dict[str, Any] = answer["result"]
    return result


def _no_traceback(done: subprocess.CompletedProcess[bytes], status: int) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode == status, err
    assert "Traceback" not in err, err
    return err


UNREADABLE_REQUIRED = [5, True, 1.5, {"name": True}, "name"]


@pytest.mark.parametrize("required", UNREADABLE_REQUIRED, ids=repr)
def test_a_form_whose_required_is_not_a_list_is_declined_and_the_turn_goes_on(cli: Cli, required: Any) -> None:
    form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": required}
    done = cli.run("prompt", "--no-journal", "--format", "json", "--agent", _question(cli, form), "hi")
    _no_traceback(done, 0)
    (event,) = [event for event in json_events(done.stdout) if event["type"] == "elicitation"]
    assert event["action"] == "decline"
    assert "required" in event["reason"]
    assert json_events(done.stdout)[-1]["text"] == "ok"
    assert _answer(cli) == {"action": "decline"}


@pytest.mark.parametrize("required", [5, True], ids=repr)
def test_on_a_terminal_a_form_whose_required_is_not_a_list_is_declined_unasked(cli: Cli, required: Any) -> None:
    form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": required}
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", _question(cli, form), "hi")
    assert terminal.finish() == 0, terminal.output.decode(errors="replace")
    assert b"Traceback" not in terminal.output
    assert b"name: " not in terminal.output  # never asked
    assert _answer(cli) == {"action": "decline"}


BAD_DEFAULTS: list[tuple[dict[str, Any], str]] = [
    ({"type": "string", "default": {"a": 1}}, "an object for a string"),
    ({"type": "string", "default": ["a"]}, "a list for a string"),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": [1, 2]}, "numbers for choices"),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": "a"}, "a string for choices"),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["c"]}, "no such choice"),
    ({"type": "string", "enum": ["a", "b"], "default": "c"}, "no such choice for one"),
    ({"type": "integer", "default": "ten"}, "a string for an integer"),
    ({"type": "integer", "default": 1.5}, "a fraction for an integer"),
    ({"type": "integer", "default": True}, "a bool for an integer"),
    ({"type": "number", "default": [1]}, "a list for a number"),
    ({"type": "boolean", "default": "yes"}, "a string for a boolean"),
    ({"type": "boolean", "default": 1}, "a number for a boolean"),
]


@pytest.mark.parametrize(("spec", "what"), BAD_DEFAULTS, ids=[what for _, what in BAD_DEFAULTS])
def test_a_default_the_field_cannot_carry_is_ignored_on_a_terminal(cli: Cli, spec: dict[str, Any], what: str) -> None:
    form = {"type": "object", "properties": {"pick": {**spec, "title": "Pick"}, "name": {"type": "string"}}}
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", _question(cli, form), "hi")
    terminal.wait_for(b"Pick")
    terminal.send(b"\n")  # Enter: no default is kept, the field is not required, so it is left out
    terminal.wait_for(b"name: ")
    terminal.send(b"Ada\n")
    assert terminal.finish() == 0, terminal.output.decode(errors="replace")
    assert b"Traceback" not in terminal.output
    assert b"]: " not in terminal.output.split(b"Pick", 1)[1].split(b"\n", 1)[0]  # no default in brackets
    assert _answer(cli) == {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("typed", ["²", "٣", "0", "00"], ids=["superscript", "arabic-indic", "zero", "zeros"])
def test_a_choice_answered_with_digits_that_are_no_number_shown_is_asked_again(cli: Cli, typed: str) -> None:
    form = {"type": "object", "properties": {"style": {"type": "string", "enum": ["short", "long"], "title": "Style"}}}
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", _question(cli, form), "hi")
    terminal.wait_for(b"Style (1: short, 2: long): ")
    terminal.send(typed.encode() + b"\n")
    terminal.wait_for(b"answer with one of the numbers, values or titles")
    terminal.send(b"2\n")
    assert terminal.finish() == 0, terminal.output.decode(errors="replace")
    assert b"Traceback" not in terminal.output
    assert _answer(cli) == {"action": "accept", "content": {"style": "long"}}


@pytest.mark.parametrize("typed", ["²", "1e400"], ids=["superscript", "too large"])
def test_a_whole_number_answered_with_digits_no_int_reads_is_asked_again(cli: Cli, typed: str) -> None:
    form = {"type": "object", "properties": {"lines": {"type": "integer", "title": "Lines", "maximum": 10}}}
    terminal = Terminal(cli, "prompt", "--no-journal", "--agent", _question(cli, form), "hi")
    terminal.wait_for(b"Lines (whole number, at most 10): ")
    terminal.send(typed.encode() + b"\n")
    terminal.wait_for(b"answer with")
    terminal.send(b"3\n")
    assert terminal.finish() == 0, terminal.output.decode(errors="replace")
    assert b"Traceback" not in terminal.output
    assert _answer(cli) == {"action": "accept", "content": {"lines": 3}}


@pytest.mark.parametrize("typed", ["²", "1" * 5000, "0" * 7 + "1", "٣"])
def test_reading_a_choice_never_raises_on_digits_int_cannot_read(typed: str) -> None:
    fields = fields_of({"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "b", "c"]}}})
    assert isinstance(fields, list)
    (spec,) = fields
    assert parse(typed, spec) == (False, "answer with one of the numbers, values or titles")


KINDS = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "a", "b"])


@given(schema=st.recursive(st.none() | st.booleans() | st.integers() | KINDS | st.floats(), _json_children))
@settings(max_examples=300, deadline=None)
def test_any_json_as_a_form_is_read_or_declined_and_never_raises(schema: Any) -> None:
    for form in (schema, {"type": "object", "properties": schema}, {"properties": {"f": schema}, "required": schema}):
        fields = fields_of(form)
        if isinstance(fields, str):
            continue
        for spec in fields:
            prompt_of(spec)
            assert spec.default is None or parse_default(spec)
            for text in ("1", "y", "a,b", "²", "x"):
                parse(text, spec)


def parse_default(spec: Field) -> bool:
    """A default kept is of the field's type (what Enter sends)."""
    default = spec.default
    if spec.kind == "boolean":
        return isinstance(default, bool)
    if spec.kind in ("integer", "number"):
        return isinstance(default, int | float) and not isinstance(default, bool)
    if spec.kind == "array":
        return isinstance(default, list) and all(isinstance(item, str) for item in default)
    return isinstance(default, str)


# --------------------------------------------------------------------------------------------------------------
# journals --prune --older-than: an age no one means is refused (exit 2) and nothing is deleted.


def _journals(cli: Cli) -> Path:
    directory = cli.tmp / "state" / "tinyacp" / "journals"
    directory.mkdir(parents=True)
    for name, age in (("old.jsonl", 90 * 86400), ("new.jsonl", 60)):
        path = directory / name
        path.write_text('{"kind": "meta"}\n')
        when = time.time() - age
        os.utime(path, (when, when))
    return directory


@pytest.mark.parametrize(
    "age",
    ["9" * 400 + "d", "9" * 5000 + "d", "9" * 30 + "s", "0d", "0s", "-5d", "-0d", "1e3d", "30 days", "nan"],
)
def test_prune_refuses_an_age_no_one_means_and_deletes_nothing(cli: Cli, age: str) -> None:
    directory = _journals(cli)
    done = cli.run("journals", "--prune", f"--older-than={age}")
    err = _no_traceback(done, 2)
    assert "--older-than" in err
    assert sorted(path.name for path in directory.iterdir()) == ["new.jsonl", "old.jsonl"]


def test_prune_says_why_an_age_of_0_and_a_negative_age_are_refused(cli: Cli) -> None:
    _journals(cli)
    zero = _no_traceback(cli.run("journals", "--prune", "--older-than", "0d"), 2)
    assert "every journal" in zero and "--all" in zero
    negative = _no_traceback(cli.run("journals", "--prune", "--older-than=-5d"), 2)
    assert "negative" in negative


def test_prune_with_all_removes_every_journal_as_asked(cli: Cli) -> None:
    directory = _journals(cli)
    dry = cli.run("journals", "--prune", "--all", "--dry-run")
    _no_traceback(dry, 0)
    assert sorted(path.name for path in directory.iterdir()) == ["new.jsonl", "old.jsonl"]
    done = cli.run("journals", "--prune", "--older-than", "0s", "--all")
    out = _no_traceback(done, 0) + done.stdout.decode()
    assert "removed 2 journal(s)" in out
    assert list(directory.iterdir()) == []


def test_all_is_refused_without_prune_and_with_a_positive_age(cli: Cli) -> None:
    directory = _journals(cli)
    assert "--prune" in _no_traceback(cli.run("journals", "--all"), 2)
    assert "--all" in _no_traceback(cli.run("journals", "--prune", "--older-than", "30d", "--all"), 2)
    assert sorted(path.name for path in directory.iterdir()) == ["new.jsonl", "old.jsonl"]


def test_prune_still_removes_what_is_older_than_a_sound_age(cli: Cli) -> None:
    directory = _journals(cli)
    done = cli.run("journals", "--prune", "--older-than", "30d")
    _no_traceback(done, 0)
    assert [path.name for path in directory.iterdir()] == ["new.jsonl"]


# --------------------------------------------------------------------------------------------------------------
# probe: every answer read defensively.

PROVIDERS_INIT = {
    "protocolVersion": 1,
    "agentCapabilities": {"providers": {}},
    "agentInfo": {"name": "scripted", "version": "1"},
}


@pytest.mark.parametrize(
    "provider",
    [
        {"providerId": "p", "supported": 5},
        {"providerId": "p", "supported": True},
        {"providerId": "p", "supported": {"openai": True}},
        {"providerId": "p", "supported": "openai"},
        {"providerId": "p", "supported": ["openai", 5, None], "current": ["x"]},
        {"providerId": "p", "current": {"apiType": {"x": 1}, "baseUrl": 5}},
        {"providerId": "p", "required": "yes", "current": True},
    ],
    ids=repr,
)
@pytest.mark.parametrize("output", ["text", "json"])
def test_probe_reads_a_provider_list_of_the_wrong_types_without_a_traceback(
    cli: Cli, provider: dict[str, Any], output: str
) -> None:
    agent = cli.scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": PROVIDERS_INIT},
            {"op": "expect", "method": "providers/list"},
            {"op": "reply", "result": {"providers": [provider]}},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s1"}},
        ]
    )
    done = cli.run("probe", "--agent", agent, "--format", output)
    _no_traceback(done, 0)
    if output == "json":
        (listed,) = json.loads(done.stdout)["newer"]["provider_list"]
        assert listed["id"] == "p"
        assert all(isinstance(kind, str) for kind in listed["supported"])
        assert isinstance(listed["required"], bool)
        current = listed["current"]
        assert current is None or all(value is None or isinstance(value, str) for value in current.values())
    else:
        assert b"  p: " in done.stdout


@pytest.mark.parametrize(
    "answer",
    [5, None, [], {"providers": {"p": {}}}, {"providers": [5, "p", {"providerId": 5}, None]}, {"providers": None}],
    ids=repr,
)
def test_probe_reads_a_providers_answer_of_any_shape_without_a_traceback(cli: Cli, answer: Any) -> None:
    agent = cli.scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": PROVIDERS_INIT},
            {"op": "expect", "method": "providers/list"},
            {"op": "reply", "result": answer},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s1"}},
        ]
    )
    for output in ("text", "json"):
        done = cli.run("probe", "--agent", agent, "--format", output)
        _no_traceback(done, 0)
    listed = json.loads(done.stdout)["newer"]["provider_list"]
    assert listed == [] or isinstance(listed, str)


# --------------------------------------------------------------------------------------------------------------
# A NUL byte in config.toml: a usage error naming the entry and the key.

NUL_ENTRIES = [
    ('[agents.bad]\ncommand = ["python3", "-c\\u0000x"]\n', "agents.bad.command"),
    ('[agents.bad]\ncommand = "python3 -c\\u0000x"\n', "agents.bad.command"),
    ('[agents.bad]\ncommand = ["python3"]\nenv = { FOO = "a\\u0000b" }\n', "agents.bad.env"),
    ('[agents.bad]\ncommand = ["python3"]\nenv = { "F\\u0000O" = "a" }\n', "agents.bad.env"),
    (
        '[agents.bad.distribution.npx]\npackage = "left-pad\\u0000@1"\n',
        "agents.bad.distribution.npx.package",
    ),
    (
        '[agents.bad.distribution.uvx]\npackage = "cowsay"\nargs = ["a\\u0000"]\n',
        "agents.bad.distribution.uvx.args",
    ),
]


@pytest.mark.parametrize(("text", "key"), NUL_ENTRIES, ids=[key for _, key in NUL_ENTRIES])
@pytest.mark.parametrize("command", [["prompt", "--agent", "bad", "hi"], ["agents", "--check", "bad"]])
def test_a_nul_byte_in_a_config_entry_is_a_usage_error_naming_the_entry_and_key(
    cli: Cli, text: str, key: str, command: list[str]
) -> None:
    config = cli.tmp / "config" / "tinyacp"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(text)
    err = _no_traceback(cli.run(*command), 2)
    assert key in err, err
    assert "NUL" in err, err


# --------------------------------------------------------------------------------------------------------------
# The command's own bounds on a turn's notices and children: flags, and what the result says when they cut.


def _notices_and_children(cli: Cli) -> str:
    notices = [{"sessionUpdate": "notice", "severity": "warning", "title": f"n{i}"} for i in range(3)]
    children = [{"sessionUpdate": "subagent_update", "sessionId": f"c{i}", "title": f"C{i}"} for i in range(3)]
    return cli.scripted(
        [
            *handshake(),
            *[{"op": "update", "update": update} for update in [*notices, *children]],
            end_turn(),
        ]
    )


def test_the_commands_limits_on_notices_and_children_are_said_in_the_done_line_and_the_result(cli: Cli) -> None:
    agent = _notices_and_children(cli)
    limits = ["--max-notices", "1", "--max-subagents", "2"]
    done = cli.run("prompt", "--no-journal", *limits, "--agent", agent, "hi")
    err = _no_traceback(done, 0)
    assert "1 notice (2 left out: --max-notice*)" in err
    assert "2 subagents (1 announcement left out: --max-subagent*)" in err
    done = cli.run("prompt", "--no-journal", "--format", "json", *limits, "--agent", agent, "hi")
    _no_traceback(done, 0)
    result = json_events(done.stdout)[-1]
    assert (len(result["notices"]), result["notices_dropped"]) == (1, 2)
    assert (len(result["subagents"]), result["subagents_dropped"]) == (2, 1)


@pytest.mark.parametrize("flag", ["--max-notices", "--max-notice-bytes", "--max-subagents", "--max-subagent-bytes"])
@pytest.mark.parametrize("value", ["0", "-1", "9" * 400 + "x"])
def test_a_limit_on_notices_or_children_no_one_means_is_a_usage_error(cli: Cli, flag: str, value: str) -> None:
    err = _no_traceback(cli.run("prompt", "--no-journal", f"{flag}={value}", "hi"), 2)
    assert flag in err


# --------------------------------------------------------------------------------------------------------------
# The command's display keeps only what it shows: a thought's status line costs a chunk's length, not the whole
# thought's again (it was joined whole on every chunk: quadratic).


def _thought_update(seq: int, text: str, session: str = "s1") -> Update:
    update = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}
    raw = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})
    params = msgspec.json.decode(raw, type=UpdateLine).params
    return Update(1, seq, raw.encode(), params.update.kind, params.session_id, params.update)


def test_a_thought_chunk_costs_the_display_its_own_length_however_long_the_thought() -> None:
    display = Display(io.StringIO(), None)
    chunks = [_thought_update(seq, "x" * 1000) for seq in range(1, 4001)]  # a thought of 4 MB
    for update in chunks[:-1]:
        display.update(update)
    tracemalloc.start()
    try:
        display.update(chunks[-1])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak  # the whole thought joined again would be 4 MB
    assert display._activity == "thinking: " + "x" * 80  # the status line: the end of the thought
    display.stop()
