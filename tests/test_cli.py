"""The ``tinyacp`` command, run as a subprocess: formats, exit codes, permissions, terminals, signals, journals.

Every run carries a marker in its environment, which the agent inherits; after each test no live process with
that marker may be left (the CLI, its agent, or anything the agent started).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import io
import json
import operator
import os
import re
import select
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import chunk, end_turn, handshake, pid_alive, wait_for
from helpers.cli import (
    CLI,
    EVIL_OUTPUT,
    EVIL_REPLY,
    EVIL_TITLE,
    SESSION_WITH_SETTINGS,
    SRC,
    TIMEOUT,
    Cli,
    Lines,
    Terminal,
    init_answer,
    json_events,
    lines_received,
    name_scripted_agent,
    steps_with_settings,
)

# --------------------------------------------------------------------------------------------------------------
# The main job.


@pytest.mark.smoke
def test_prompt_runs_the_demo_agent_by_default_reply_on_stdout_work_on_stderr(cli: Cli) -> None:
    done = cli.run("prompt", "--yes", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == cli.expected_reply()
    err = done.stderr.decode()
    assert "starting demo" in err
    assert "[ ] Read the files in the working directory" in err  # the plan, as a checklist
    assert "[x] Read the files in the working directory" in err  # and as it changed
    assert "[read] Read files in" in err and ": pending" in err and ": completed" in err
    assert "allowed once (by the policy: --yes)" in err
    assert "done: end_turn" in err
    assert "\x1b" not in err  # not a terminal: no colour, no animation


@pytest.mark.smoke
def test_json_format_prints_one_event_per_line_ending_with_the_result(cli: Cli) -> None:
    done = cli.run("prompt", "--format", "json", "--allow-kind", "read", "hello")
    assert done.returncode == 0, done.stderr
    events = json_events(done.stdout)
    assert events[0]["type"] == "session"
    assert events[0]["agent"]["name"] == "tinyacp-demo"
    assert events[-1]["type"] == "result"
    assert [event["type"] for event in events[1:-1]].count("permission") == 1
    updates = [event for event in events if event["type"] == "update"]
    assert [event["seq"] for event in updates] == list(range(1, len(updates) + 1))
    assert all(event["epoch"] == 1 for event in events)
    # The command opts in to plan operations: the demo sends its plan as plan_update.
    assert updates[0]["kind"] == "plan_update" and updates[0]["update"]["sessionUpdate"] == "plan_update"
    (permission,) = [event for event in events if event["type"] == "permission"]
    assert permission["decided_by"] == "policy" and permission["rule"] == "--allow-kind read"
    assert permission["allowed"] is True and permission["selected"] == "allow"
    assert permission["tool_call"]["kind"] == "read"
    result = events[-1]
    assert result["outcome"] == "end_turn" and result["exit_code"] == 0
    assert result["stop_reason"] == "end_turn"
    assert result["text"] == cli.expected_reply()
    assert result["counts"] == {"updates": len(updates), "chunks": 3, "permissions": 1, "allowed": 1, "rejected": 0}
    assert result["overflow"] is None and result["timed_out"] is False
    assert isinstance(result["elapsed"], float)
    assert result["seq"] == updates[-1]["seq"]


@pytest.mark.parametrize(
    ("flags", "allowed", "rule"),
    [
        (["--allow-kind", "read"], True, "--allow-kind read"),
        (["--allow-title", "Read files in "], True, '--allow-title "Read files in "'),
        (["-y"], True, "--yes"),
        (["--allow-kind", "edit", "--allow-title", "Delete"], False, "not asked"),
    ],
)
def test_permission_flags_build_the_policy(cli: Cli, flags: list[str], allowed: bool, rule: str) -> None:
    done = cli.run("prompt", "--format", "json", *flags, "hello")
    assert done.returncode == 0
    (permission,) = [event for event in json_events(done.stdout) if event["type"] == "permission"]
    assert permission["allowed"] is allowed
    assert permission["rule"] == rule
    assert permission["decided_by"] == ("policy" if allowed else "default-reject")


def test_without_a_terminal_a_request_no_rule_allows_is_rejected_and_the_run_says_so(cli: Cli) -> None:
    done = cli.run("prompt", "hello")
    assert done.returncode == 0
    assert done.stdout.decode() == f"You said: hello\nI was not allowed to read the files in {cli.work}.\n"
    err = done.stderr.decode()
    assert "rejected (no rule allows it and there is no terminal to ask)" in err
    assert "1 permission request was rejected" in err and "--allow-kind KIND" in err


def test_prompt_text_dash_reads_the_prompt_from_stdin(cli: Cli) -> None:
    done = cli.run("prompt", "-y", "-", input=b"from stdin")
    assert done.returncode == 0
    assert done.stdout.decode().startswith("You said: from stdin\n")


# --------------------------------------------------------------------------------------------------------------
# Exit status.


@pytest.mark.parametrize(
    ("reason", "code", "outcome"),
    [
        ("refusal", 3, "refusal"),
        ("max_tokens", 4, "incomplete"),
        ("max_turn_requests", 4, "incomplete"),
        ("something_newer", 4, "incomplete"),
        ("cancelled", 130, "cancelled"),
    ],
)
def test_each_stop_reason_has_its_exit_status(cli: Cli, reason: str, code: int, outcome: str) -> None:
    agent = cli.scripted([*handshake(), {"op": "update", "update": chunk("partial")}, end_turn(reason)])
    done = cli.run("prompt", "--agent", agent, "--format", "json", "hi")
    assert done.returncode == code, done.stderr
    result = json_events(done.stdout)[-1]
    assert (result["outcome"], result["stop_reason"], result["exit_code"]) == (outcome, reason, code)


def test_the_done_line_counts_one_update_in_the_singular(cli: Cli) -> None:
    agent = cli.scripted([*handshake(), {"op": "update", "update": chunk("partial")}, end_turn("end_turn")])
    done = cli.run("prompt", "--no-journal", "--agent", agent, "hi")
    assert done.returncode == 0, done.stderr
    assert " · 1 update · 0 permissions" in done.stderr.decode(), done.stderr


@pytest.mark.parametrize(
    "steps",
    [
        [*handshake(), {"op": "exit", "code": 3}],
        [*handshake(), {"op": "reply_error", "code": -32603, "message": "the model is down"}],
    ],
    ids=["agent-exits", "error-answer"],
)
def test_an_agent_error_exits_1_with_a_message(cli: Cli, steps: list[dict[str, Any]]) -> None:
    done = cli.run("prompt", "--agent", cli.scripted(steps), "--format", "json", "hi")
    assert done.returncode == 1
    result = json_events(done.stdout)[-1]
    assert result["outcome"] == "agent_error" and result["error"]["message"]
    assert "tinyacp: error:" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


def test_timeout_cancels_the_turn_and_exits_5(cli: Cli) -> None:
    # The deadline must fall inside the turn, after the start-up: generous on a loaded machine, and still far
    # before the demo agent's next update.
    done = cli.run("prompt", "--agent", "demo --delay 60", "--timeout", "8", "--format", "json", "hi")
    assert done.returncode == 5, done.stderr
    result = json_events(done.stdout)[-1]
    assert result["outcome"] == "timeout" and result["timed_out"] is True
    assert result["stop_reason"] == "cancelled"


def test_quiet_hides_progress_but_not_how_a_failed_run_ended(cli: Cli) -> None:
    done = cli.run("prompt", "-q", "--no-journal", "-y", "hello")
    assert (done.returncode, done.stderr) == (0, b"") and done.stdout.startswith(b"You said: hello\n")
    done = cli.run("prompt", "-q", "--no-journal", "--agent", "demo --delay 60", "--timeout", "5", "hi")
    assert done.returncode == 5
    assert done.stderr.decode().startswith("done: cancelled (timed out)"), done.stderr
    done = cli.run("prompt", "-q", "--no-journal", "--agent-command", "false", "hi")
    assert done.returncode != 0 and done.stderr.startswith(b"tinyacp: error: ")


def test_the_json_sample_in_the_docs_has_the_fields_of_a_real_run(cli: Cli) -> None:
    page = (SRC.parent / "docs" / "command.md").read_text(encoding="utf-8")
    sample = page.split("## JSON events", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    documented = {event["type"]: event for event in map(json.loads, sample.splitlines())}
    done = cli.run("prompt", "--format", "json", "--allow-kind", "read", "What is in this folder?")
    assert done.returncode == 0, done.stderr
    real = {event["type"]: event for event in json_events(done.stdout)}
    for kind in ("session", "permission", "result"):
        assert sorted(documented[kind]) == sorted(real[kind]), kind


def test_demo_agent_help_names_the_command_it_was_run_as(cli: Cli) -> None:
    done = cli.run("demo-agent", "--help")
    assert done.returncode == 0 and done.stdout.startswith(b"usage: tinyacp demo-agent "), done.stdout
    done = cli.run("demo-agent", "--delay", "soon")
    assert done.returncode == 2 and done.stderr.startswith(b"usage: tinyacp demo-agent "), done.stderr


def test_a_reply_past_the_reply_limit_exits_6_and_stdout_keeps_what_fit(cli: Cli) -> None:
    done = cli.run("prompt", "-y", "--max-reply-chunks", "1", "hello")
    assert done.returncode == 6, done.stderr
    assert done.stdout == b"You said: hello\n"
    assert b"reply limit reached" in done.stderr


@pytest.mark.smoke
@pytest.mark.parametrize(
    "args",
    [
        ["prompt", "--file", "missing.txt", "hi"],
        ["prompt", "--image", "a.txt", "hi"],
        ["prompt", "--cwd", "nowhere", "hi"],
        ["prompt", "--max-line", "1K", "--max-update-bytes", "2K", "hi"],
        ["prompt", "--timeout", "soon", "hi"],
        ["prompt", "--agent", "", "hi"],
        ["prompt", "--agent-command", "", "hi"],
        ["prompt", " "],
        ["prompt", ""],
        ["prompt"],
        [],
    ],
)
def test_usage_errors_exit_2(cli: Cli, args: list[str]) -> None:
    done = cli.run(*args)
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr


def test_a_broken_config_file_is_a_usage_error(cli: Cli) -> None:
    config = cli.tmp / "config" / "tinyacp"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[agents.x]\ncommand = 42\n")
    done = cli.run("prompt", "hi")
    assert done.returncode == 2
    assert "agents.x.command: expected str | array" in done.stderr.decode()


def test_a_missing_agent_gets_an_install_hint_not_a_traceback(cli: Cli) -> None:
    empty = cli.tmp / "empty-path"
    empty.mkdir()
    env = dict(cli.env, PATH=str(empty))
    done = cli.run("prompt", "--agent", "gemini", "--format", "json", "hi", env=env)
    assert done.returncode == 7
    err = done.stderr.decode()
    assert "'npx' was not found on PATH" in err and "Node.js" in err
    assert "Traceback" not in err
    assert json_events(done.stdout)[-1]["outcome"] == "not_installed"
    done = cli.run("probe", "--agent", "claude", env=env)
    assert done.returncode == 7
    assert "Node.js" in done.stderr.decode()
    done = cli.run("prompt", "--agent", "no-such-agent-program --acp", "hi")
    assert done.returncode == 7
    assert "'no-such-agent-program' was not found on PATH" in done.stderr.decode()


# --------------------------------------------------------------------------------------------------------------
# Ctrl-C and other signals.


@pytest.mark.smoke
def test_ctrl_c_once_cancels_the_turn_and_leaves_no_process(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    proc = cli.popen(
        "prompt", "-y", "--agent", "demo --delay 0.5", "--format", "json", "--journal", str(journal), "hi",
        stderr=cli.tmp / "err.txt",
    )  # fmt: skip
    lines = Lines(proc)
    session = lines.until(lambda event: event["type"] == "session")
    lines.until(lambda event: event["type"] == "update")  # the turn runs
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=TIMEOUT) == 130
    result = lines.rest()[-1]
    assert result["outcome"] == "cancelled" and result["stop_reason"] == "cancelled"
    assert not pid_alive(session["pid"])
    sent = [record.get("method") for record in tinyacp.JsonlJournal.read(journal) if record.get("dir") == "out"]
    assert "session/cancel" in sent
    assert "cancelling the turn" in (cli.tmp / "err.txt").read_text()


def test_ctrl_c_twice_kills_the_agent_group(cli: Cli) -> None:
    pidfile = cli.tmp / "children.txt"
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "ignore_sigterm"},
            {"op": "spawn", "argv": [sys.executable, "-c", "import time; time.sleep(60)"], "pidfile": str(pidfile)},
            {"op": "update", "update": chunk("working")},
            {"op": "hang"},  # deaf to session/cancel, and to SIGTERM
        ]
    )
    journal = cli.tmp / "run.jsonl"
    proc = cli.popen(
        "prompt", "--agent", agent, "--kill-grace", "0.3", "--format", "json", "--journal", str(journal), "hi",
        stderr=cli.tmp / "err.txt",
    )  # fmt: skip
    lines = Lines(proc)
    session = lines.until(lambda event: event["type"] == "session")
    lines.until(lambda event: event["type"] == "update")
    child = int(pidfile.read_text())
    proc.send_signal(signal.SIGINT)
    wait_for(
        lambda: any(r.get("method") == "session/cancel" for r in tinyacp.JsonlJournal.read(journal)),
        what="the cancel sent",
    )
    assert proc.poll() is None  # the agent ignores the cancel: the run waits for it
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=TIMEOUT) == 130
    assert not pid_alive(session["pid"]) and not pid_alive(child)
    result = lines.rest()[-1]
    assert result["outcome"] == "cancelled" and result["error"]["type"] == "AgentExited"
    assert "stopping the agent" in (cli.tmp / "err.txt").read_text()


def test_sigterm_stops_the_agent_and_exits_143(cli: Cli) -> None:
    proc = cli.popen("prompt", "-y", "--agent", "demo --delay 5", "--format", "json", "hi", stderr=cli.tmp / "e")
    lines = Lines(proc)
    session = lines.until(lambda event: event["type"] == "session")
    lines.until(lambda event: event["type"] == "update")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
    assert not pid_alive(session["pid"])
    assert lines.rest()[-1]["outcome"] == "terminated"


# --------------------------------------------------------------------------------------------------------------
# A terminal.


@pytest.mark.parametrize(
    ("answer", "allowed", "said"),
    [(b"y", True, b"allowed once"), (b"n", False, b"rejected"), (b"", False, b"rejected")],
    ids=["yes", "no", "enter"],
)
def test_on_a_terminal_the_person_is_asked(cli: Cli, answer: bytes, allowed: bool, said: bytes) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "hello")
    terminal.wait_for(b"allow? [y] once")
    assert b"Read files in" in terminal.output
    terminal.send(answer + b"\n")
    assert terminal.finish() == 0
    assert said + b"\x1b[0m (by you)" in terminal.output
    reply = b"I read 2 files" if allowed else b"I was not allowed"
    assert reply in terminal.output


def test_allow_for_this_run_covers_later_requests_of_the_same_kind(cli: Cli) -> None:
    def request(request_id: int, title: str) -> dict[str, Any]:
        tool = {"toolCallId": f"t{request_id}", "title": title, "kind": "edit"}
        options = [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ]
        params = {"sessionId": "s1", "toolCall": tool, "options": options}
        return {"op": "request", "id": request_id, "method": "session/request_permission", "params": params}

    agent = cli.scripted([*handshake(), request(1, "Edit a.txt"), request(2, "Edit b.md"), end_turn()])
    journal = cli.tmp / "run.jsonl"
    terminal = Terminal(cli, "prompt", "--agent", agent, "--journal", str(journal), "hi")
    terminal.wait_for(b"allow? [y] once")
    terminal.send(b"a\n")
    assert terminal.finish() == 0
    assert terminal.output.count(b"allow? [y] once") == 1
    decisions = [record for record in tinyacp.JsonlJournal.read(journal) if record["type"] == "decision"]
    assert [decision["outcome"]["optionId"] for decision in decisions] == ["yes", "yes"]  # once each, not "always"
    assert b"by you, for all 'edit' requests in this run" in terminal.output


def test_ctrl_c_while_asking_cancels_the_turn(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    terminal = Terminal(cli, "prompt", "--journal", str(journal), "hello")
    terminal.wait_for(b"allow? [y] once")
    terminal.proc.send_signal(signal.SIGINT)
    assert terminal.finish() == 130
    (decision,) = [record for record in tinyacp.JsonlJournal.read(journal) if record["type"] == "decision"]
    assert decision["outcome"] == {"outcome": "cancelled"}
    assert b"Traceback" not in terminal.output


class _Question:
    """The prompt run's :class:`Asker` and :class:`Interrupts` in this process, wired as ``tinyacp prompt`` wires
    them, asking on a pipe instead of a terminal."""

    def __init__(self) -> None:
        from tinyacp.cli.run._display import Display
        from tinyacp.cli.run._terminal import Asker, Interrupts

        self.display = Display(io.StringIO(), None)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.in_r, self.in_w = os.pipe()
        self.interrupts = Interrupts(self.display, self.wake_w)
        self.asker = Asker(self.display, self.in_r, self.wake_r, lambda: self.interrupts.interrupted)

    def ask(self, unstick_after: float = 10.0) -> str:
        """The person's answer; a waiting question gets ``n`` (reject) typed after ``unstick_after`` seconds, so
        a wake-up that never comes fails the test instead of hanging it."""
        from tinyacp import PermissionRequest
        from tinyacp._messages import PermissionOption, PermissionToolCall
        from tinyacp._process import signals_blocked

        options = [PermissionOption("yes", "Yes", "allow_once"), PermissionOption("no", "No", "reject_once")]
        request = PermissionRequest(1, b"{}", 1, "s1", PermissionToolCall("t1", "Read notes", "read"), options)
        unstick = threading.Timer(unstick_after, os.write, (self.in_w, b"n\n"))
        with signals_blocked():
            unstick.start()
        self.interrupts.install()
        try:
            return self.asker.ask(request, "'read' requests")
        finally:
            self.interrupts.restore()
            unstick.cancel()
            unstick.join()

    def close(self) -> None:
        for fd in (self.wake_r, self.wake_w, self.in_r, self.in_w):
            os.close(fd)


def test_ctrl_c_landing_just_before_the_question_waits_still_interrupts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Python handler runs only between two bytecodes: a SIGINT that lands after the interpreter last looked
    # for signals and before select() sleeps is seen by no one until select() returns. Here it lands exactly
    # there: raise() and select() run one after the other in C, with no bytecode between them.
    from tinyacp.cli.run import _terminal

    raise_signal = getattr(ctypes.CDLL(None), "raise")  # signal.raise_signal would run the handler at once
    real_select = select.select
    pending = [signal.SIGINT]

    def select_after_a_signal(r: list[int], w: list[int], x: list[int]) -> Any:
        calls = [functools.partial(real_select, r, w, x)]
        if pending:
            calls.insert(0, functools.partial(raise_signal, pending.pop()))
        return list(map(operator.call, calls))[-1]

    monkeypatch.setattr(_terminal, "select", types.SimpleNamespace(select=select_after_a_signal))
    question = _Question()
    try:
        assert question.ask() == "interrupted"
    finally:
        question.close()
    assert not pending and question.interrupts.interrupted


def test_a_signal_of_an_earlier_moment_does_not_answer_the_question() -> None:
    # A chat's Ctrl-C at the input line leaves its byte in the wake pipe; the next turn's question still waits.
    question = _Question()
    try:
        os.write(question.wake_w, bytes([signal.SIGINT]))
        os.write(question.in_w, b"y\n")
        assert question.ask() == "once"
    finally:
        question.close()
    assert not question.interrupts.interrupted


def _evil_agent(cli: Cli) -> str:
    options = [{"optionId": "ok", "name": "ok", "kind": "allow_once"}]
    permission = {
        "op": "request",
        "id": 1,
        "method": "session/request_permission",
        "params": {"sessionId": "s1", "toolCall": {"toolCallId": "t1", "title": EVIL_TITLE}, "options": options},
    }
    plan = {"sessionUpdate": "plan", "entries": [{"content": "step \x1b[31mred\x1b[0m", "status": "in_progress"}]}
    tool = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": EVIL_TITLE, "kind": "read"}
    done = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": EVIL_OUTPUT}}],
    }
    steps = [
        *handshake(),
        {"op": "update", "update": plan},
        {"op": "update", "update": tool},
        permission,
        {"op": "update", "update": done},
        {"op": "update", "update": chunk(EVIL_REPLY)},
        end_turn(),
    ]
    return cli.scripted(steps)


def _assert_clean(screen: bytes) -> None:
    for bad in (b"\x1b]", b"\x1b[2J", b"\x1b[31m", b"\x07", b"abc\rXYZ", b"line1\rOVER", "\u202e".encode()):
        assert bad not in screen, (bad, screen)
    assert "\u009b".encode() not in screen


def test_an_agents_control_characters_never_reach_the_terminal(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    terminal = Terminal(cli, "prompt", "-y", "--agent", _evil_agent(cli), "--journal", str(journal), "hi")
    assert terminal.finish() == 0
    _assert_clean(terminal.output)
    assert b"Read notes" in terminal.output and b"XYZ" in terminal.output and b"OVER" in terminal.output
    raw = b"".join(
        tinyacp.JsonlJournal.raw(record) for record in tinyacp.JsonlJournal.read(journal) if "line" in record
    )
    assert b"\\u001b]0;pwned\\u0007" in raw  # the journal keeps what the agent sent


def test_without_a_terminal_the_display_is_sanitized_and_stdout_is_the_exact_reply(cli: Cli) -> None:
    done = cli.run("prompt", "-y", "--agent", _evil_agent(cli), "hi")
    assert done.returncode == 0, done.stderr
    _assert_clean(done.stderr)
    assert b"\x1b" not in done.stderr and b"\r" not in done.stderr
    assert done.stdout == EVIL_REPLY.encode()  # a file gets the reply as the agent wrote it


# --------------------------------------------------------------------------------------------------------------
# Journals, show, replay.


def test_every_run_is_journaled_by_default_readable_by_its_owner_only(cli: Cli) -> None:
    assert cli.run("prompt", "-y", "hello").returncode == 0
    directory = cli.tmp / "state" / "tinyacp" / "journals"
    (journal,) = directory.iterdir()
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    records = tinyacp.JsonlJournal.read(journal)
    assert records[0]["type"] == "epoch"
    assert any(record.get("method") == "session/prompt" for record in records)
    assert cli.run("prompt", "-y", "--no-journal", "hello").returncode == 0
    assert len(list(directory.iterdir())) == 1


@pytest.mark.smoke
def test_show_renders_a_journal_and_a_torn_last_line_is_ignored(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    assert cli.run("prompt", "-y", "--journal", str(journal), "hello").returncode == 0
    shown = cli.run("show", str(journal))
    assert shown.returncode == 0
    text = shown.stdout.decode()
    for expected in ("== epoch 1", "> prompt:", "    hello", "? permission asked: Read files in", "-> allow_once"):
        assert expected in text
    assert "reply:\n    You said: hello\n" in text and "< stop reason: end_turn" in text

    with open(journal, "ab") as file:
        file.write(b'{"type":"line","epoch":1,"dir":"in","ts":"2026-')  # a crash mid-write
    shown = cli.run("show", str(journal))
    assert shown.returncode == 0 and shown.stdout.decode() == text
    assert "last line is torn" in shown.stderr.decode()

    assert cli.run("prompt", "-y", "--journal", str(journal), "again").returncode == 0  # appends epoch 2
    shown = cli.run("show", "--format", "json", str(journal))
    records = json_events(shown.stdout)
    assert [record["epoch"] for record in records if record["type"] == "epoch"] == [1, 2]
    sent = [record for record in records if record.get("dir") == "out" and record.get("method") == "session/prompt"]
    prompts = [record["message"]["params"]["prompt"][0]["text"] for record in sent]
    assert prompts == ["hello", "again"]
    assert "unreadable (torn) lines ignored" in shown.stderr.decode()


@pytest.mark.smoke
def test_replay_command_stands_in_for_the_recorded_agent(cli: Cli) -> None:
    journal = cli.tmp / "run.jsonl"
    first = cli.run("prompt", "-y", "--journal", str(journal), "hello")
    assert first.returncode == 0
    agent = shlex.join([*CLI, "replay", "--strict", str(journal)])
    again = cli.run("prompt", "-y", "--no-journal", "--agent", agent, "hello")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout == cli.expected_reply().encode()


# --------------------------------------------------------------------------------------------------------------
# The other subcommands.


def test_agents_lists_known_names_and_the_config_file_adds_and_overrides(cli: Cli) -> None:
    from tinyacp.cli.agents._resolve import BUILTIN_AGENTS

    done = cli.run("agents", "--format", "json")
    listing = json.loads(done.stdout)
    names = {agent["name"]: agent for agent in listing["agents"]}
    assert {"demo", "claude", "codex", "gemini", "opencode"} <= set(names)
    assert {"copilot", "cursor", "qwen", "kimi", "fast-agent", "goose", "kiro"} <= set(names)
    # The maintained adapters, pinned: a new version changes modes, auth methods and option ids.
    assert names["claude"]["command"] == [
        "npx",
        "--prefer-offline",
        "-y",
        "@agentclientprotocol/claude-agent-acp@0.101.0",
    ]
    assert "Node.js 22" in names["claude"]["needs"] and "Node.js 22 or newer" in names["claude"]["install"]
    assert names["codex"]["command"] == ["npx", "--prefer-offline", "-y", "@agentclientprotocol/codex-acp@2.6.0"]
    assert (names["codex"]["key_method"], names["codex"]["key_env"]) == ("api-key", ["OPENAI_API_KEY"])
    assert names["gemini"]["command"] == ["npx", "--prefer-offline", "-y", "@google/gemini-cli@0.61.0", "--acp"]
    assert names["opencode"]["command"] == ["npx", "--prefer-offline", "-y", "opencode-ai@1.18.33", "acp"]
    assert names["copilot"]["command"] == ["npx", "--prefer-offline", "-y", "@github/copilot@1.0.102", "--acp"]
    assert names["kimi"]["command"] == ["uvx", "kimi-cli@1.51.0", "acp"]
    assert names["kiro"]["command"] == ["kiro-cli", "acp"]
    assert all(row["install"] and row["login"] and row["needs"] for row in listing["agents"] if row["name"] != "demo")
    assert listing["default"] == "demo"
    assert "needs Node.js 22 or newer" in cli.run("agents").stdout.decode()

    config = cli.tmp / "config" / "tinyacp"
    config.mkdir(parents=True)
    mine = shlex.join([sys.executable, "-m", "tinyacp.demo", "--chunks", "1"])
    (config / "config.toml").write_text(
        f'default_agent = "mine"\n[agents.mine]\ncommand = {json.dumps(mine)}\ndescription = "my demo"\n'
        '[agents.gemini]\ncommand = ["my-gemini", "--acp"]\n'
    )
    listing = json.loads(cli.run("agents", "--format", "json").stdout)
    names = {agent["name"]: agent for agent in listing["agents"]}
    assert names["mine"]["description"] == "my demo" and names["mine"]["installed"] is True
    assert names["gemini"]["command"] == ["my-gemini", "--acp"]
    assert names["gemini"]["launcher"] == "path" and names["gemini"]["version"] is None  # the pin was npx's
    assert names["gemini"]["login"] == BUILTIN_AGENTS["gemini"].login  # kept from the built-in entry
    text = cli.run("agents").stdout.decode()
    assert "* mine" in text
    done = cli.run("prompt", "-y", "hello")  # the config's default agent: one chunk
    assert done.returncode == 0 and done.stdout.decode() == cli.expected_reply()
    assert "starting mine" in done.stderr.decode()


@pytest.mark.smoke
def test_probe_prints_what_the_agent_offers(cli: Cli) -> None:
    done = cli.run("probe")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "tinyacp-demo" in text and "protocol version:     1" in text and "embedded files: yes" in text
    assert "\nconfig options:\n  mode = default" in text
    assert [line for line in text.splitlines() if line != line.rstrip()] == []  # no header left dangling
    report = json.loads(cli.run("probe", "--format", "json").stdout)
    assert report["agent"]["name"] == "tinyacp-demo"
    assert report["protocol_version"] == 1
    assert report["prompt_capabilities"] == {"image": False, "audio": False, "embedded_context": True}
    assert [method["id"] for method in report["auth_methods"]] == ["demo-login", "demo-api-key"]
    assert set(report["session_capabilities"]) >= {"list", "resume", "close", "delete"}
    assert report["initialize"]["agentInfo"]["title"] == "tinyacp demo agent"


def test_demo_agent_subcommand_is_the_demo_agent_with_its_flags(cli: Cli) -> None:
    agent = shlex.join([*CLI, "demo-agent", "--chunks", "1"])
    done = cli.run("prompt", "-y", "--agent", agent, "--format", "json", "hello")
    assert done.returncode == 0, done.stderr
    assert json_events(done.stdout)[-1]["counts"]["chunks"] == 1
    assert b"--all-kinds" in cli.run("demo-agent", "--help").stdout


def test_files_are_embedded_and_images_linked_when_the_agent_cannot_take_them(cli: Cli) -> None:
    (cli.work / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    journal = cli.tmp / "run.jsonl"
    done = cli.run("prompt", "-y", "--journal", str(journal), "--file", "a.txt", "--image", "pic.png", "look")
    assert done.returncode == 0, done.stderr
    assert "pic.png is sent as a link" in done.stderr.decode()
    records = tinyacp.JsonlJournal.read(journal)
    (line,) = [record for record in records if record.get("dir") == "out" and record.get("method") == "session/prompt"]
    blocks = json.loads(line["line"])["params"]["prompt"]
    assert blocks[0] == {"type": "text", "text": "look"}
    assert blocks[1]["type"] == "resource" and blocks[1]["resource"]["text"] == "hello\n"
    assert blocks[2]["type"] == "resource_link" and blocks[2]["uri"].endswith("/pic.png")


def test_import_tinyacp_does_not_import_the_cli() -> None:
    code = (
        "import sys, tinyacp; tinyacp.JsonlJournal; "
        "bad = [m for m in ('tinyacp.cli', 'tinyacp.cli.run._prompt', 'tinyacp.cli.shared._display', 'argparse') "
        "if m in sys.modules]; "
        "print(bad)"
    )
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=TIMEOUT, check=True)
    assert done.stdout.strip() == b"[]"


# What a fast start leaves out: the client's asyncio side, the journal, the display, the config reader, the batch
# runner and the subcommands' own modules are imported when a subcommand runs, never to show the help.
_NOT_FOR_HELP = (
    "asyncio",
    "msgspec",
    "subprocess",
    "tomllib",
    "tinyacp._client",
    "tinyacp._messages",
    "tinyacp._async_client",
    "tinyacp._journal",
    "tinyacp.batch",
    "tinyacp.cli.shared._display",
    "tinyacp.cli.shared._index",
    "tinyacp.view",
    "shutil",  # argparse asks it the terminal's width; the parser asks the OS itself (cli/shared/_usage.py)
)
_SUBCOMMAND_FOLDERS = ("agents", "batch", "journals", "run", "sessions")
"""The command's folders that hold a subcommand: for the help, each is read for its command line (the folder and its
``_args``) and for nothing else."""


@pytest.mark.smoke
@pytest.mark.parametrize(
    "argv", [["--help"], ["batch", "--help"], ["prompt", "--help"], ["replay", "--help"], ["view", "--help"]]
)
def test_help_starts_without_the_modules_that_run_commands(argv: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tinyacp", *argv],
        capture_output=True,
        env=env,
        timeout=TIMEOUT,
        check=True,
    )
    assert done.stdout.startswith(b"usage: tinyacp")
    imported = {line.rpartition(b"|")[2].strip().decode() for line in done.stderr.splitlines()}
    assert "tinyacp.cli" in imported  # -X importtime reported the imports
    assert sorted(imported.intersection(_NOT_FOR_HELP)) == []
    assert all((SRC / "tinyacp" / "cli" / folder / "__init__.py").is_file() for folder in _SUBCOMMAND_FOLDERS)
    folders = {f"tinyacp.cli.{folder}" for folder in _SUBCOMMAND_FOLDERS}
    command_lines = {f"{folder}._args" for folder in folders}
    loaded = {name for name in imported if name.rpartition(".")[0] in folders or name in folders}
    assert sorted(loaded) == sorted(folders | command_lines)


@pytest.mark.smoke
def test_the_top_help_starts_without_typing_or_pathlib() -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    code = "import sys; from tinyacp.cli import main; sys.exit(main(['--help']))"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, env=env, timeout=TIMEOUT, check=True
    )
    imported = {line.rpartition(b"|")[2].strip().decode() for line in done.stderr.splitlines()}
    assert "tinyacp.cli" in imported
    # pathlib (with urllib.parse) is for a subcommand's options: a path they take, --config's default shown.
    assert sorted(imported.intersection({"typing", "pathlib", "tinyacp.cli.shared._dirs"})) == []


@pytest.mark.parametrize("columns", [None, "", "abc", "0", "-3", "57", "200"])
def test_the_parsers_width_is_the_one_shutil_gives(monkeypatch: pytest.MonkeyPatch, columns: str | None) -> None:
    import shutil

    from tinyacp.cli.shared._usage import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


# --------------------------------------------------------------------------------------------------------------
# The pieces, in process.


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text\n\ttab", "plain text\n\ttab"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("a\rb", "a\nb"),
        ("a\r\nb", "a\nb"),
        ("bell\x07 back\x08 nul\x00", "bell\ufffd back\ufffd nul\ufffd"),
        ("c1 \u009b31m csi", "c1 \ufffd31m csi"),
        ("lone \x1b", "lone \ufffd"),
        ("\u202eevil", "\ufffdevil"),
        ("surrogate \ud800", "surrogate ?"),
    ],
)
def test_sanitize_removes_escape_sequences_and_replaces_controls(raw: str, shown: str) -> None:
    from tinyacp.cli.shared._display import sanitize

    assert sanitize(raw) == shown


def test_platform_dirs_follow_xdg_and_macos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyacp.cli.shared import _dirs

    home = {"HOME": str(tmp_path)}
    monkeypatch.setattr(sys, "platform", "linux")
    assert _dirs.config_dir(home) == tmp_path / ".config" / "tinyacp"
    assert _dirs.state_dir(home) == tmp_path / ".local" / "state" / "tinyacp"
    assert _dirs.state_dir({**home, "XDG_STATE_HOME": "relative/is/ignored"}) == _dirs.state_dir(home)
    monkeypatch.setattr(sys, "platform", "darwin")
    support = tmp_path / "Library" / "Application Support" / "tinyacp"
    assert _dirs.config_dir(home) == support
    assert _dirs.journal_dir(home) == support / "journals"
    assert _dirs.config_dir({**home, "XDG_CONFIG_HOME": str(tmp_path / "c")}) == tmp_path / "c" / "tinyacp"


# --------------------------------------------------------------------------------------------------------------
# Agents by name, and errors that say what happened.


def test_a_mistyped_agent_name_gets_a_suggestion_and_exits_2(cli: Cli) -> None:
    done = cli.run("prompt", "--agent", "cluade", "hi")
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "unknown agent 'cluade'; did you mean 'claude'?" in err and "--agent-command" in err
    assert cli.run("probe", "--agent", "gemeni").returncode == 2
    assert b"did you mean" not in cli.run("prompt", "--agent", "zzzzqqq", "hi").stderr


def test_agent_command_runs_a_command_line_and_agent_with_a_space_still_does(cli: Cli) -> None:
    command = shlex.join([sys.executable, "-m", "tinyacp.demo", "--chunks", "1"])
    for flag in ("--agent-command", "--agent"):
        done = cli.run("prompt", "-y", flag, command, "--format", "json", "hello")
        assert done.returncode == 0, done.stderr
        assert json_events(done.stdout)[-1]["counts"]["chunks"] == 1


def test_an_empty_prompt_on_stdin_is_refused_before_the_agent_starts(cli: Cli) -> None:
    done = cli.run("prompt", "--agent-command", "no-such-program-at-all", "-", input=b"  \n")
    assert done.returncode == 2
    assert "the prompt is empty" in done.stderr.decode()


def test_an_agent_error_shows_its_data_and_the_tail_of_its_stderr(cli: Cli) -> None:
    data = {"details": "Query closed before response received", "trace": [f"frame {n}" for n in range(40)]}
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "stderr", "text": "starting\nClaude Code process exited with code 1\x1b[31m\n"},
            {"op": "reply_error", "code": -32603, "message": "Internal error", "data": data},
        ]
    )
    done = cli.run("prompt", "--agent", agent, "--format", "json", "hi")
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "session/prompt failed: Internal error (code -32603)" in err
    assert "Query closed before response received" in err  # the data, cut to a few lines
    assert "frame 39" not in err and "more lines" in err
    assert "agent stderr (last lines):" in err and "Claude Code process exited with code 1" in err
    assert "\x1b" not in err
    error = json_events(done.stdout)[-1]["error"]
    assert error["type"] == "RequestError" and error["data"] == data


def test_a_program_that_does_not_speak_acp_is_named_at_its_first_line(cli: Cli) -> None:
    agent = cli.scripted([{"op": "raw", "line": "Welcome to Gemini CLI! Type /help"}, {"op": "hang"}])
    started = time.monotonic()
    done = cli.run("prompt", "--agent", agent, "hi")
    assert done.returncode == 1
    assert time.monotonic() - started < TIMEOUT / 2  # at the first line, not at a deadline
    err = done.stderr.decode()
    assert "does not speak ACP on stdout: still no answer to initialize 2 s after a line that is not JSON-RPC" in err
    assert 'its only line on stdout: "Welcome to Gemini CLI! Type /help"' in err
    done = cli.run("probe", "--agent", agent)
    assert done.returncode == 1 and "does not speak ACP" in done.stderr.decode()


def test_initialize_has_a_startup_deadline_that_names_a_silent_program(cli: Cli) -> None:
    agent = cli.scripted([{"op": "stderr", "text": "listening on port 8080\n"}, {"op": "hang"}])
    done = cli.run("prompt", "--agent", agent, "--startup-timeout", "1", "hi")
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "this program does not speak ACP on stdout: no answer to initialize in 1 s" in err
    assert "it wrote nothing on stdout" in err and "listening on port 8080" in err
    done = cli.run("prompt", "--agent", agent, "--startup-timeout", "5", "--timeout", "1", "hi")
    assert done.returncode == 5  # the run's own deadline came first


def test_fail_on_reject_exits_9_when_a_permission_was_rejected(cli: Cli) -> None:
    done = cli.run("prompt", "--fail-on-reject", "--format", "json", "hello")
    assert done.returncode == 9
    result = json_events(done.stdout)[-1]
    assert result["outcome"] == "rejected" and result["stop_reason"] == "end_turn"
    assert cli.run("prompt", "--fail-on-reject", "-y", "hello").returncode == 0
    assert cli.run("prompt", "hello").returncode == 0  # without the flag a rejection is no failure


def test_the_done_line_shows_usage_and_cost_when_the_agent_reports_them(cli: Cli) -> None:
    usage = {
        "sessionUpdate": "usage_update",
        "used": 5000,
        "size": 200000,
        "cost": {"amount": 0.0123, "currency": "USD"},
    }
    tokens = {"inputTokens": 1200, "outputTokens": 300, "totalTokens": 1500}
    agent = cli.scripted(
        [
            *handshake(),
            {"op": "update", "update": chunk("ok")},
            {"op": "update", "update": usage},
            {"op": "reply", "result": {"stopReason": "end_turn", "usage": tokens}},
        ]
    )
    done = cli.run("prompt", "--agent", agent, "hi")
    assert done.returncode == 0, done.stderr
    assert "tokens 1,200 in, 300 out · context 2% · cost $0.0123" in done.stderr.decode()
    result = json_events(cli.run("prompt", "--agent", agent, "--format", "json", "hi").stdout)[-1]
    cost = {"amount": 0.0123, "currency": "USD"}
    assert result["cost"] == cost
    assert result["usage"] == {  # spelt as in results.jsonl: tokens from the answer, the rest from usage_update
        "input_tokens": 1200,
        "output_tokens": 300,
        "total_tokens": 1500,
        "context_used": 5000,
        "context_size": 200000,
        "cost": cost,
    }


def test_json_events_on_a_terminal_get_no_status_line_beside_them(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "-y", "--no-journal", "--agent", "demo --delay 0.3", "--format", "json", "hi")
    assert terminal.finish() == 0
    events = 0
    for line in terminal.output.split(b"\n"):
        start = line.find(b'{"type"')
        if start < 0:
            continue
        # What a terminal shows left of the event: the text after the last carriage return, less the erasing.
        shown = re.sub(rb"\x1b\[[0-9;]*[A-Za-z]", b"", line[:start].rsplit(b"\r", 1)[-1])
        assert shown == b"", line  # the status line was erased before the event was written
        json.loads(line[start:].rstrip(b"\r"))  # and nothing after it
        events += 1
    assert events >= 5
    assert b"\x1b[J" not in terminal.output  # no live region was drawn: JSON is for a program, not a person


# --------------------------------------------------------------------------------------------------------------
# The documentation of the command.

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from tinyacp.cli import build_parser

    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_a_run_adds_the_options_of_its_own_subcommand_only() -> None:
    from tinyacp.cli import build_parser

    argv = ["show", "j.jsonl", "--format", "json"]
    parser = build_parser(argv)
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    complete = _subparsers()
    options = {name: len(sub._actions) for name, sub in action.choices.items()}
    assert options["show"] == len(complete["show"]._actions)
    assert all(options[name] < len(complete[name]._actions) for name in set(complete) - {"show", "demo-agent"})
    args = parser.parse_args(argv)
    assert args.journal == Path("j.jsonl") and args.format == "json"
    assert build_parser(["--help"]).format_help() == build_parser().format_help()


def test_docs_cli_shows_every_flag_of_every_command() -> None:
    text = DOC.read_text()
    missing = [
        f"{name} {option}"
        for name, sub in _subparsers().items()
        for action in sub._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help" and not any(c + option in text for c in "` [")
    ]
    assert not missing


def test_docs_cli_tables_every_exit_status_and_every_built_in_agent() -> None:
    from tinyacp.cli.agents._resolve import BUILTIN_AGENTS
    from tinyacp.cli.shared._exit import Exit

    text = DOC.read_text()
    for code in Exit:
        assert f"\n| {int(code)} | " in text, code
    for spec in BUILTIN_AGENTS.values():
        assert f"| `{spec.name}` | `{spec.display_command()}` |" in text, spec.name


# --------------------------------------------------------------------------------------------------------------
# Sessions: MCP servers, the index of sessions, chat.


def _sent(journal: Path, method: str) -> list[dict[str, Any]]:
    return [
        json.loads(record["line"])
        for record in tinyacp.JsonlJournal.read(journal)
        if record.get("dir") == "out" and record.get("method") == method
    ]


def test_mcp_config_passes_the_servers_of_a_claude_desktop_file(cli: Cli) -> None:
    servers = {"files": {"command": "npx", "args": ["-y", "server-files", "."], "env": {"LOG": "1"}}}
    (cli.tmp / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    journal = cli.tmp / "run.jsonl"
    done = cli.run("prompt", "-y", "--mcp-config", str(cli.tmp / "mcp.json"), "--journal", str(journal), "hi")
    assert done.returncode == 0, done.stderr
    (new,) = _sent(journal, "session/new")
    assert new["params"]["mcpServers"] == [
        {"name": "files", "command": "npx", "args": ["-y", "server-files", "."], "env": [{"name": "LOG", "value": "1"}]}
    ]


def test_an_mcp_transport_the_agent_does_not_offer_is_refused_before_the_session(cli: Cli) -> None:
    remote = {"docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}}}
    (cli.tmp / "mcp.json").write_text(json.dumps({"mcpServers": remote}))
    journal = cli.tmp / "run.jsonl"
    done = cli.run("prompt", "-y", "--mcp-config", str(cli.tmp / "mcp.json"), "--journal", str(journal), "hi")
    assert done.returncode == 2
    assert "MCP server 'docs' is reached over http, which the agent does not offer (it offers: stdio)" in (
        done.stderr.decode()
    )
    assert _sent(journal, "session/new") == [] and _sent(journal, "session/prompt") == []


@pytest.mark.parametrize(
    "content",
    ["not json", '{"servers": {}}', '{"mcpServers": {"x": {"args": []}}}', '{"mcpServers": {"x": {"command": 1}}}'],
)
def test_a_bad_mcp_config_is_a_usage_error(cli: Cli, content: str) -> None:
    (cli.tmp / "mcp.json").write_text(content)
    done = cli.run("prompt", "-y", "--mcp-config", str(cli.tmp / "mcp.json"), "hi")
    assert done.returncode == 2
    assert "--mcp-config" in done.stderr.decode() and b"Traceback" not in done.stderr


def test_sessions_lists_the_runs_of_this_machine_most_recent_first(cli: Cli) -> None:
    assert cli.run("prompt", "-y", "first question").returncode == 0
    other = cli.tmp / "other"
    other.mkdir()
    assert cli.run("prompt", "-y", "--cwd", str(other), "second question").returncode == 0
    listing = json.loads(cli.run("sessions", "--format", "json").stdout)["sessions"]
    assert [entry["title"] for entry in listing] == ["second question", "first question"]
    assert all(entry["agent"] == "demo" and Path(entry["journal"]).exists() for entry in listing)
    here = json.loads(cli.run("sessions", "--cwd", ".", "--format", "json").stdout)["sessions"]
    assert [entry["cwd"] for entry in here] == [str(cli.work)]
    other_agent = json.loads(cli.run("sessions", "--agent-command", "no-such-agent-x", "--format", "json").stdout)
    assert other_agent["sessions"] == [] and "no-such-agent-x" in other_agent["agent_error"]
    text = cli.run("sessions").stdout.decode()
    assert "second question" in text and "journal:" in text


def test_the_session_index_skips_torn_lines_and_stays_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyacp.cli.shared import _index

    monkeypatch.setattr(_index, "_COMPACT_AT", 256 * 1024)  # 3000 entries pass it several times
    index = _index.SessionIndex(tmp_path / "sessions.jsonl")
    index.record("demo", tmp_path, "s-1", None, "hello")
    with open(index.path, "ab") as file:
        file.write(b'{"agent": "demo", "cwd": \n')  # torn
    index.record("demo", tmp_path, "s-2", tmp_path / "j.jsonl", "again")
    latest = index.latest("demo", tmp_path)
    assert latest is not None and (latest.session_id, latest.journal) == ("s-2", str(tmp_path / "j.jsonl"))
    assert index.latest("claude", tmp_path) is None
    for n in range(3000):
        index.record("demo", tmp_path, f"many-{n}", None, "x" * 80)
    assert index.path.stat().st_size <= 2 * _index._COMPACT_AT
    assert stat.S_IMODE(index.path.stat().st_mode) == 0o600
    entries = index.entries("demo", tmp_path)
    assert entries[0].session_id == "many-2999"
    assert _index._KEEP <= len(entries) <= 2 * _index._COMPACT_AT // len(b'{"agent": "demo", "session_id": "many-0"}')
    numbers = [int(entry.session_id.removeprefix("many-")) for entry in entries]
    assert numbers == list(range(2999, 2999 - len(numbers), -1))  # the newest, none lost


def test_chat_needs_a_terminal(cli: Cli) -> None:
    done = cli.run("chat")
    assert done.returncode == 2
    assert "tinyacp chat needs a terminal" in done.stderr.decode()


def _interrupt_at_the_input_line(terminal: Terminal, count: int) -> None:
    """Ctrl-C at the input line until the prompt is drawn again. Python's readline misses a signal that lands
    between drawing the prompt and waiting for a key (it sees it at the next key or signal), so one more
    Ctrl-C is sent if the first goes unseen."""
    for _ in range(5):
        terminal.proc.send_signal(signal.SIGINT)
        try:
            terminal.wait_for(b"you> ", timeout=2, count=count)
            return
        except AssertionError:
            continue
    raise AssertionError(f"Ctrl-C at the input line never gave a new prompt; got {terminal.output!r}")


@pytest.mark.smoke
def test_chat_is_many_turns_in_one_session_and_ctrl_c_cancels_a_turn_not_the_chat(cli: Cli) -> None:
    journal = cli.tmp / "chat.jsonl"
    terminal = Terminal(cli, "chat", "--agent", "demo --delay 0.3", "--journal", str(journal))
    terminal.wait_for(b"you> ")
    terminal.send(b"hello\n")
    terminal.wait_for(b"allow? [y] once")
    terminal.send(b"y\n")
    terminal.wait_for(b"done: end_turn")
    terminal.wait_for(b"you> ", count=2)
    terminal.send(b"second\n")
    terminal.wait_for(b"allow? [y] once", count=2)
    terminal.proc.send_signal(signal.SIGINT)  # while asked: the turn is cancelled, the chat goes on
    terminal.wait_for(b"done: cancelled")
    terminal.wait_for(b"you> ", count=3)
    _interrupt_at_the_input_line(terminal, count=4)  # the line is cleared, the agent stays
    terminal.send(b"/help\n")
    terminal.wait_for(b"/sessions")
    terminal.send(b"third\n")
    terminal.wait_for(b"allow? [y] once", count=3)
    terminal.send(b"n\n")
    terminal.wait_for(b"I was not allowed")
    terminal.wait_for(b"you> ", count=6)
    terminal.send(b"\x04")  # Ctrl-D ends the chat
    assert terminal.finish() == 0
    assert len(_sent(journal, "session/new")) == 1
    prompts = _sent(journal, "session/prompt")
    assert [p["params"]["prompt"][0]["text"] for p in prompts] == ["hello", "second", "third"]
    assert len({p["params"]["sessionId"] for p in prompts}) == 1
    assert "second" in (cli.tmp / "state" / "tinyacp" / "chat_history").read_text()
    assert b"Traceback" not in terminal.output


# --------------------------------------------------------------------------------------------------------------
# Login, conversations that continue, agent settings (scripted agents).


def _turn(text: str = "ok", session: str = "s1") -> list[dict[str, Any]]:
    return [
        {"op": "expect", "method": "session/prompt"},
        {"op": "update", "session": session, "update": chunk(text)},
        end_turn(),
    ]


def test_continue_loads_the_last_session_when_the_agent_offers_only_load(cli: Cli) -> None:
    first: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer(loadSession=True)},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": "sess-A"}},
        *_turn("first", "sess-A"),
    ]
    name_scripted_agent(cli, first)
    done = cli.run("prompt", "--agent", "scripted", "remember 42")
    assert done.returncode == 0, done.stderr
    second: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer(loadSession=True)},
        {"op": "expect", "method": "session/load"},
        {
            "op": "update",
            "session": "sess-A",
            "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "remember 42"}},
        },
        {"op": "update", "session": "sess-A", "update": chunk("first")},
        {"op": "reply", "result": {}},
        *_turn("second", "sess-A"),
    ]
    name_scripted_agent(cli, second)
    (cli.tmp / "agent.log").unlink()  # a second agent process: what it receives
    done = cli.run("prompt", "--agent", "scripted", "--continue", "what did I say?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"second"  # the replayed history is shown on stderr, not taken for the reply
    assert "continuing session sess-A: loaded (2 updates replayed)" in done.stderr.decode()
    methods = [message.get("method") for message in lines_received(cli)]
    assert "session/new" not in methods and "session/resume" not in methods
    (load,) = [message for message in lines_received(cli) if message.get("method") == "session/load"]
    assert load["params"]["sessionId"] == "sess-A" and load["params"]["cwd"] == str(cli.work)
    (prompt,) = [message for message in lines_received(cli) if message.get("method") == "session/prompt"]
    assert prompt["params"]["sessionId"] == "sess-A"


def test_session_id_resumes_when_the_agent_offers_resume(cli: Cli) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer(loadSession=True, sessionCapabilities={"resume": {}})},
        {"op": "expect", "method": "session/resume"},
        {"op": "reply", "result": {}},
        *_turn(session="old-7"),
    ]
    name_scripted_agent(cli, steps)
    done = cli.run("prompt", "--agent", "scripted", "--session", "old-7", "go on")
    assert done.returncode == 0, done.stderr
    assert "continuing session old-7: resumed" in done.stderr.decode()
    (resume,) = [m for m in lines_received(cli) if m.get("method") == "session/resume"]
    assert resume["params"]["sessionId"] == "old-7"
    latest = json.loads(cli.run("sessions", "--agent", "scripted", "--format", "json").stdout)["sessions"][0]
    assert latest["session_id"] == "old-7"  # the continued session is now the most recent


def test_continuing_never_starts_a_new_session_in_its_place(cli: Cli) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer()},
        {"op": "wait_eof"},
    ]
    name_scripted_agent(cli, steps)
    done = cli.run("prompt", "--agent", "scripted", "--continue", "hi")
    assert done.returncode == 2
    assert "no earlier session of scripted in" in done.stderr.decode()
    done = cli.run("prompt", "--agent", "scripted", "--session", "old-7", "hi")
    assert done.returncode == 2
    assert "can neither resume nor load a session" in done.stderr.decode()
    assert "session/new" not in [m.get("method") for m in lines_received(cli)]


AUTH_METHODS: list[dict[str, Any]] = [
    {"id": "chatgpt", "name": "ChatGPT", "description": "log in with a ChatGPT subscription"},
    {"id": "api-key", "name": "API key"},
    {"id": "env-key", "name": "Key from the environment", "type": "env_var", "varName": "SCRIPTED_ENV_KEY"},
]


def _needs_login(then: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer(authMethods=AUTH_METHODS)},
        {"op": "expect", "method": "session/new"},
        {"op": "reply_error", "code": -32000, "message": "Authentication required"},
        *then,
    ]


LOGGED_IN: list[dict[str, Any]] = [
    {"op": "expect", "method": "authenticate"},
    {"op": "reply", "result": {}},
    {"op": "expect", "method": "session/new"},
    {"op": "reply", "result": {"sessionId": "s1"}},
    *_turn(),
]


def test_not_logged_in_lists_the_methods_and_what_each_needs_and_exits_8(cli: Cli) -> None:
    name_scripted_agent(
        cli, _needs_login([{"op": "wait_eof"}]), 'key_method = "api-key"\nkey_env = ["SCRIPTED_API_KEY"]\n'
    )
    done = cli.run("prompt", "--agent", "scripted", "--format", "json", "hi")
    assert done.returncode == 8, done.stderr
    err = done.stderr.decode()
    assert "log in with --auth METHOD" in err
    assert "chatgpt (ChatGPT): log in with a ChatGPT subscription" in err
    assert (
        "api-key (API key): set SCRIPTED_API_KEY" in err
        and "env-key (Key from the environment): set SCRIPTED_ENV_KEY" in err
    )
    assert json_events(done.stdout)[-1]["outcome"] == "not_logged_in"
    assert "authenticate" not in [m.get("method") for m in lines_received(cli)]


@pytest.mark.parametrize(
    ("variable", "method"), [("SCRIPTED_ENV_KEY", "env-key"), ("SCRIPTED_API_KEY", "api-key")], ids=["env_var", "named"]
)
def test_a_key_in_the_environment_logs_in_when_the_agent_asks(cli: Cli, variable: str, method: str) -> None:
    name_scripted_agent(cli, _needs_login(LOGGED_IN), 'key_method = "api-key"\nkey_env = ["SCRIPTED_API_KEY"]\n')
    done = cli.run("prompt", "--agent", "scripted", "hi", env=dict(cli.env, **{variable: "sk-test"}))
    assert done.returncode == 0, done.stderr
    assert f"logging in with {method}: {variable} is set" in done.stderr.decode()
    (auth,) = [m for m in lines_received(cli) if m.get("method") == "authenticate"]
    assert auth["params"]["methodId"] == method
    assert b"sk-test" not in (cli.tmp / "agent.log").read_bytes()


def test_auth_logs_in_before_the_session_and_an_unknown_method_is_refused(cli: Cli) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init_answer(authMethods=AUTH_METHODS)},
        *LOGGED_IN,
    ]
    name_scripted_agent(cli, steps)
    done = cli.run("prompt", "--agent", "scripted", "--auth", "chatgpt", "hi")
    assert done.returncode == 0, done.stderr
    assert [m.get("method") for m in lines_received(cli)][:3] == ["initialize", "authenticate", "session/new"]
    done = cli.run("prompt", "--agent", "scripted", "--auth", "password", "hi")
    assert done.returncode == 2
    assert "the agent offers no auth method 'password' (it offers: chatgpt, api-key, env-key)" in done.stderr.decode()


SET_MODE_THEN_OPTION: list[dict[str, Any]] = [
    {"op": "expect", "method": "session/set_mode"},
    {"op": "reply", "result": {}},
    {"op": "expect", "method": "session/set_config_option"},
    {"op": "reply", "result": {"configOptions": SESSION_WITH_SETTINGS["configOptions"]}},
]


def test_mode_model_and_options_are_set_before_the_prompt(cli: Cli) -> None:
    options = SESSION_WITH_SETTINGS["configOptions"]
    steps = steps_with_settings(
        [
            *SET_MODE_THEN_OPTION,
            {"op": "expect", "method": "session/set_config_option"},
            {"op": "reply", "result": {"configOptions": options}},
            *_turn(),
        ]
    )
    name_scripted_agent(cli, steps, 'options = { effort = "high" }\n')  # from the config file
    done = cli.run("prompt", "--agent", "scripted", "--mode", "plan", "--model", "large", "hi")
    assert done.returncode == 0, done.stderr
    sent = [m for m in lines_received(cli) if m.get("method", "").startswith("session/")]
    assert [m["method"] for m in sent] == [
        "session/new", "session/set_mode", "session/set_config_option", "session/set_config_option", "session/prompt"
    ]  # fmt: skip
    assert sent[1]["params"]["modeId"] == "plan"
    assert (sent[2]["params"]["configId"], sent[2]["params"]["value"]) == ("model", "large")
    assert (sent[3]["params"]["configId"], sent[3]["params"]["value"]) == ("effort", "high")
    assert "mode: plan" in done.stderr.decode() and "model: large" in done.stderr.decode()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--mode", "yolo"], "the agent offers no mode 'yolo' (it offers: default, plan)"),
        (["--model", "huge"], "the agent offers no model 'huge' (it offers: small, large)"),
        (["--set", "effort=max"], "config option 'effort' cannot be 'max' (it takes: low, high)"),
        (["--set", "speed=fast"], "the agent has no config option 'speed' (it offers: model, effort)"),
        (["--set", "speed"], "--set 'speed': expected KEY=VALUE"),
        (["--system-prompt", "Be brief."], "sessionCapabilities.systemPrompt"),
    ],
)
def test_a_setting_the_agent_does_not_offer_exits_2_before_the_prompt(cli: Cli, flags: list[str], said: str) -> None:
    name_scripted_agent(cli, steps_with_settings([{"op": "wait_eof"}]))
    done = cli.run("prompt", "--agent", "scripted", *flags, "hi")
    assert done.returncode == 2, done.stderr
    assert said in done.stderr.decode()
    if (cli.tmp / "agent.log").exists():
        assert "session/prompt" not in [m.get("method") for m in lines_received(cli)]


def test_system_prompt_goes_with_the_new_session_when_the_agent_takes_one(cli: Cli) -> None:
    name_scripted_agent(
        cli, steps_with_settings(_turn(), {"sessionCapabilities": {"systemPrompt": {"mode": {"override": {}}}}})
    )
    done = cli.run(
        "prompt", "--agent", "scripted", "--system-prompt", "Be brief.", "--system-prompt-mode", "override", "hi"
    )
    assert done.returncode == 0, done.stderr
    (new,) = [m for m in lines_received(cli) if m.get("method") == "session/new"]
    assert new["params"]["systemPrompt"] == {"mode": "override", "content": [{"type": "text", "text": "Be brief."}]}


@pytest.mark.parametrize(
    ("flags", "sent"),
    [
        ([], {"mode": "override", "content": [{"type": "text", "text": "From the config."}]}),
        (
            ["--system-prompt-mode", "append"],
            {"mode": "append", "content": [{"type": "text", "text": "From the config."}]},
        ),
        (["--system-prompt", "Be brief."], {"mode": "override", "content": [{"type": "text", "text": "Be brief."}]}),
    ],
)
def test_each_system_prompt_flag_wins_over_the_agents_entry_and_the_entry_gives_the_rest(
    cli: Cli, flags: list[str], sent: dict[str, object]
) -> None:
    name_scripted_agent(
        cli,
        steps_with_settings(_turn(), {"sessionCapabilities": {"systemPrompt": {"mode": {"override": {}}}}}),
        'system_prompt = "From the config."\nsystem_prompt_mode = "override"\n',
    )
    done = cli.run("prompt", "--agent", "scripted", *flags, "hi")
    assert done.returncode == 0, done.stderr
    (new,) = [m for m in lines_received(cli) if m.get("method") == "session/new"]
    assert new["params"]["systemPrompt"] == sent


def test_chat_switches_mode_and_options_and_closes_the_session_at_ctrl_d(cli: Cli) -> None:
    steps = steps_with_settings(
        [
            *SET_MODE_THEN_OPTION,
            {"op": "expect", "method": "session/close"},
            {"op": "reply", "result": {}},
        ],
        {"sessionCapabilities": {"close": {}}},
    )
    name_scripted_agent(cli, steps)
    terminal = Terminal(cli, "chat", "--agent", "scripted", "--no-journal")
    terminal.wait_for(b"you> ")
    terminal.send(b"/mode nope\n")
    terminal.wait_for(b"the agent offers no mode 'nope' (it offers: default, plan)")
    terminal.send(b"/mode plan\n")
    terminal.wait_for(b"mode: plan")
    terminal.send(b"/set effort high\n")
    terminal.wait_for(b"effort: high")
    terminal.send(b"/set effort\n")
    terminal.wait_for(b"usage: /set KEY VALUE")
    terminal.wait_for(b"you> ", count=5)
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert b"session s1 closed" in terminal.output
    methods = [m.get("method") for m in lines_received(cli)]
    assert methods == ["initialize", "session/new", "session/set_mode", "session/set_config_option", "session/close"]


def test_probe_shows_modes_options_auth_needs_and_commands(cli: Cli) -> None:
    session = dict(SESSION_WITH_SETTINGS)
    steps: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {
            "op": "reply",
            "result": init_answer(authMethods=AUTH_METHODS, sessionCapabilities={"resume": {}, "close": {}}),
        },
        {"op": "expect", "method": "session/new"},
        {
            "op": "update",
            "update": {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [{"name": "review", "description": "review the diff"}],
            },
        },
        {"op": "reply", "result": session},
        {"op": "wait_eof"},
    ]
    name_scripted_agent(cli, steps, 'key_method = "api-key"\nkey_env = ["SCRIPTED_API_KEY"]\n')
    done = cli.run("probe", "--agent", "scripted")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "session capabilities: resume, close" in text
    assert "api-key (API key): set SCRIPTED_API_KEY" in text
    assert "modes:                default, plan (current: default)" in text
    assert "model = small   (small, large)" in text and "effort = low   (low, high)" in text
    assert "commands:             /review" in text
    report = json.loads(cli.run("probe", "--agent", "scripted", "--format", "json").stdout)
    assert report["session"]["modes"] == {"current": "default", "available": ["default", "plan"]}
    assert report["session"]["config_options"][1] == {
        "id": "effort", "name": "Effort", "type": "select", "value": "low", "values": ["low", "high"]
    }  # fmt: skip
    assert report["session"]["commands"] == [{"name": "review", "description": "review the diff"}]


def test_probe_of_an_agent_that_needs_a_login_says_so_and_exits_8(cli: Cli) -> None:
    name_scripted_agent(cli, _needs_login([{"op": "wait_eof"}]))
    done = cli.run("probe", "--agent", "scripted")
    assert done.returncode == 8
    assert "session:              needs a login: Authentication required" in done.stdout.decode()
    assert "env-key (Key from the environment): set SCRIPTED_ENV_KEY" in done.stdout.decode()


def test_sessions_with_an_agent_shows_its_own_list_beside_the_runs_of_this_machine(cli: Cli) -> None:
    name_scripted_agent(cli, [*handshake("s1"), {"op": "update", "update": chunk("ok")}, end_turn()])
    assert cli.run("prompt", "--agent", "scripted", "first").returncode == 0
    page_one = {"sessions": [{"sessionId": "s1", "cwd": str(cli.work), "title": "First"}], "nextCursor": "c2"}
    page_two = {"sessions": [{"sessionId": "elsewhere-9", "cwd": str(cli.work), "updatedAt": "2026-11-30T10:00:00Z"}]}
    name_scripted_agent(
        cli,
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": init_answer(sessionCapabilities={"list": {}})},
            {"op": "expect", "method": "session/list"},
            {"op": "reply", "result": page_one},
            {"op": "expect", "method": "session/list"},
            {"op": "reply", "result": page_two},
            {"op": "wait_eof"},
        ],
    )
    done = cli.run("sessions", "--agent", "scripted", "--cwd", ".")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "scripted's own list (session/list):" in text
    assert "s1  First" in text and "(ran here)" in text and "elsewhere-9" in text
    listed = [m for m in lines_received(cli) if m.get("method") == "session/list"]
    assert listed[1]["params"]["cursor"] == "c2" and listed[0]["params"]["cwd"] == str(cli.work)
    name_scripted_agent(
        cli, [{"op": "expect", "method": "initialize"}, {"op": "reply", "result": init_answer()}, {"op": "wait_eof"}]
    )
    document = json.loads(cli.run("sessions", "--agent", "scripted", "--format", "json").stdout)
    assert document["agent_sessions"] is None and document["agent_error"] == "the agent does not offer session/list"


# --------------------------------------------------------------------------------------------------------------
# The same against the demo agent (two agent processes share its state directory).


@pytest.mark.smoke
def test_continue_across_two_runs_of_the_demo_agent(cli: Cli) -> None:
    journal = cli.tmp / "second.jsonl"
    first = cli.run("prompt", "-y", "--format", "json", "remember 42")
    assert first.returncode == 0, first.stderr
    session_id = json_events(first.stdout)[0]["session_id"]
    second = cli.run("prompt", "-y", "--continue", "--journal", str(journal), "--format", "json", "and now?")
    assert second.returncode == 0, second.stderr
    assert f"continuing session {session_id}: resumed" in second.stderr.decode()
    assert json_events(second.stdout)[0]["session_id"] == session_id
    assert _sent(journal, "session/new") == []
    (resume,) = _sent(journal, "session/resume")
    assert resume["params"]["sessionId"] == session_id
    listing = json.loads(cli.run("sessions", "--agent", "demo", "--cwd", ".", "--format", "json").stdout)
    assert session_id in [item["session_id"] for item in listing["agent_sessions"]]
    assert listing["sessions"][0]["session_id"] == session_id


def test_the_demo_agent_needs_a_login_then_takes_its_key_from_the_environment(cli: Cli) -> None:
    done = cli.run("prompt", "-y", "--agent", "demo --require-auth", "hi")
    assert done.returncode == 8
    err = done.stderr.decode()
    assert (
        "demo-login (Demo login): Always succeeds." in err
        and "demo-api-key (Demo API key): set TINYACP_DEMO_API_KEY" in err
    )
    done = cli.run("prompt", "-y", "--agent", "demo --require-auth", "hi", env=dict(cli.env, TINYACP_DEMO_API_KEY="k1"))
    assert done.returncode == 0, done.stderr
    assert "logging in with demo-api-key: TINYACP_DEMO_API_KEY is set" in done.stderr.decode()
    done = cli.run("prompt", "-y", "--agent", "demo --require-auth", "--auth", "demo-login", "hi")
    assert done.returncode == 0, done.stderr
    assert "logging in with demo-login (--auth)" in done.stderr.decode()


def test_the_demo_agents_mode_and_model_are_set_before_the_prompt(cli: Cli) -> None:
    done = cli.run("prompt", "--mode", "auto", "--model", "demo-large", "--format", "json", "hello")
    assert done.returncode == 0, done.stderr
    events = json_events(done.stdout)
    assert not [event for event in events if event["type"] == "permission"]  # auto mode reads without asking
    assert events[-1]["cost"] is not None and events[-1]["usage"]
    done = cli.run("prompt", "--mode", "yolo", "hello")
    assert done.returncode == 2
    assert "the agent offers no mode 'yolo' (it offers: default, auto)" in done.stderr.decode()
    done = cli.run("prompt", "--set", "model=demo-huge", "hello")
    assert done.returncode == 2
    assert "config option 'model' cannot be 'demo-huge' (it takes: demo-small, demo-large)" in done.stderr.decode()
