"""What a person at a terminal meets in the first minutes: ``/mode`` lists the modes, a mode set is reported once,
a wrong answer to the permission question says why, ``prompt -`` says it reads stdin, and a chat ended by Ctrl-D
ends well even when the agent never answers the close of its session."""

from __future__ import annotations

from helpers.cli import Cli, Terminal, lines_received, name_scripted_agent, steps_with_settings


def test_mode_without_an_id_lists_the_modes_and_a_mode_set_is_said_once(cli: Cli) -> None:
    terminal = Terminal(cli, "chat", "--agent", "demo", "--no-journal")
    terminal.wait_for(b"you> ")
    terminal.send(b"/mode\n")
    terminal.wait_for(b"modes of this session (/mode ID switches; * is the current one):")
    terminal.wait_for(b"you> ", count=2)
    listed = terminal.output.split(b"modes of this session", 1)[1].split(b"you> ", 1)[0]
    assert listed.count(b"\n  * ") == 1  # the current one, marked
    assert b"auto" in listed
    terminal.send(b"/mode auto\n")
    terminal.wait_for(b"mode: auto")
    terminal.wait_for(b"you> ", count=3)
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert terminal.output.count(b"mode: auto") == 1  # the agent's update and the answer to set_mode: one line


def test_a_chat_whose_agent_never_answers_session_close_still_ends_with_status_0(cli: Cli) -> None:
    steps = steps_with_settings(
        [{"op": "expect", "method": "session/close"}, {"op": "hang"}], {"sessionCapabilities": {"close": {}}}
    )
    name_scripted_agent(cli, steps)
    terminal = Terminal(cli, "chat", "--agent", "scripted", "--no-journal", "--cancel-grace", "0.5")
    terminal.wait_for(b"you> ")
    terminal.send(b"\x04")
    assert terminal.finish() == 0  # the person ended the chat; the agent is stopped (the fixture checks it is gone)
    assert b"session s1: no answer to session/close in 0.5 s; the agent is stopped" in terminal.output
    assert b"error" not in terminal.output
    assert [m.get("method") for m in lines_received(cli)] == ["initialize", "session/new", "session/close"]


def test_a_mode_set_with_the_mode_option_is_said_once(cli: Cli) -> None:
    done = cli.run("prompt", "-y", "--no-journal", "--mode", "auto", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(b"mode: auto") == 1


def test_a_wrong_answer_to_the_permission_question_says_why_before_asking_again(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "--no-journal", "hello")
    terminal.wait_for(b"allow? [y] once")
    terminal.send(b"maybe\n")
    terminal.wait_for(b"'maybe' is not an answer: y allows once, a allows")
    terminal.wait_for(b"allow? [y] once", count=2)
    terminal.send(b"y\n")
    assert terminal.finish() == 0
    assert b"(1 allowed, 0 rejected)" in terminal.output


def test_prompt_dash_on_a_terminal_says_it_reads_stdin_and_in_a_pipe_says_nothing(cli: Cli) -> None:
    terminal = Terminal(cli, "prompt", "-y", "--no-journal", "-")
    terminal.wait_for(b"reading the prompt from stdin (end it with Ctrl-D)")
    terminal.send(b"hello\n\x04")
    assert terminal.finish() == 0
    assert b"You said: hello" in terminal.output

    piped = cli.run("prompt", "-y", "--no-journal", "-", input=b"hello\n")
    assert piped.returncode == 0
    assert b"reading the prompt" not in piped.stderr
