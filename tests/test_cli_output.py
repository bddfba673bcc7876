"""Output that fits pipes: no live line unless a person watches stdout and stderr, colour by ``NO_COLOR`` and
``FORCE_COLOR``, short usage errors, and with ``--format json`` a ``result`` event even after a usage error."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import TESTS

CLI = [sys.executable, "-m", "tinyacp.cli"]
TIMEOUT = 60.0
SGR = re.compile(rb"\x1b\[[0-9;]*m")
LIVE = b"\x1b[J"  # how the live region is erased before each redraw
BATCH_LIVE = b"\r\x1b[K"  # the batch's progress line


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A scratch home for the command, with no colour preference of the caller's."""
    env = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    env.update(
        PYTHONPATH=str(TESTS.parent / "src"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        TERM="xterm-256color",
    )
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("hello\n")
    return env


def on_terminal(args: list[str], env: dict[str, str], cwd: Path, *, stdout_tty: bool) -> tuple[int, bytes, bytes]:
    """Run the command with stderr (and stdout, if asked) on a pseudo-terminal; its status, the terminal's bytes
    and, when stdout is a pipe, what it wrote there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    stdout: Any = slave if stdout_tty else subprocess.PIPE
    proc = subprocess.Popen([*CLI, *args], stdin=subprocess.DEVNULL, stdout=stdout, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    seen, piped = b"", b""
    readers = [master] + ([] if proc.stdout is None else [proc.stdout.fileno()])
    deadline = time.monotonic() + TIMEOUT
    try:
        while readers and time.monotonic() < deadline:
            ready, _, _ = select.select(readers, [], [], 0.5)
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: every process holding the pty has exited
                    data = b""
                if not data:
                    readers.remove(fd)
                elif fd == master:
                    seen += data
                else:
                    piped += data
        return proc.wait(timeout=TIMEOUT), seen, piped
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()


PROMPT = ["prompt", "-y", "--no-journal", "--agent", "demo --delay 0.3", "hello"]


@pytest.mark.slow
def test_the_live_line_is_drawn_only_when_stdout_is_a_terminal_too(env: dict[str, str], tmp_path: Path) -> None:
    code, both, _ = on_terminal(PROMPT, env, tmp_path / "work", stdout_tty=True)
    assert code == 0
    assert LIVE in both  # a person watches: the status line animates

    code, seen, piped = on_terminal(PROMPT, env, tmp_path / "work", stdout_tty=False)
    assert code == 0
    assert LIVE not in seen and b"\r" not in seen.replace(b"\r\n", b"\n")  # `… > answer.md`: plain lines
    assert b"done: end_turn" in seen
    assert piped.decode().startswith("You said: hello\n")


@pytest.mark.slow
def test_a_batch_draws_its_progress_line_only_when_stdout_is_a_terminal_too(
    env: dict[str, str], tmp_path: Path
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": n, "prompt": "x"}) + "\n" for n in range(2)))
    common = ["batch", str(items), "-y", "--agent", "demo --delay 0.4", "--cwd", str(tmp_path / "work")]
    code, both, _ = on_terminal([*common, "--out", str(tmp_path / "o1")], env, tmp_path, stdout_tty=True)
    assert code == 0 and BATCH_LIVE in both

    code, seen, piped = on_terminal([*common, "--out", str(tmp_path / "o2")], env, tmp_path, stdout_tty=False)
    assert code == 0 and BATCH_LIVE not in seen and b"2 ok, 0 failed" in piped
    code, seen, piped = on_terminal(
        [*common, "--out", str(tmp_path / "o3"), "--format", "json"], env, tmp_path, stdout_tty=True
    )
    assert code == 0 and BATCH_LIVE not in seen


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variables", "coloured"),
    [({}, True), ({"NO_COLOR": "1"}, False), ({"FORCE_COLOR": "0"}, False), ({"NO_COLOR": ""}, True)],
)
def test_colour_on_a_terminal_follows_no_color_and_force_color(
    env: dict[str, str], tmp_path: Path, variables: dict[str, str], coloured: bool
) -> None:
    code, seen, _ = on_terminal(PROMPT, {**env, **variables}, tmp_path / "work", stdout_tty=True)
    assert code == 0
    assert bool(SGR.search(seen)) is coloured


def test_force_color_colours_the_display_in_a_pipe(env: dict[str, str], tmp_path: Path) -> None:
    plain = subprocess.run(
        [*CLI, *PROMPT], env=env, cwd=tmp_path / "work", capture_output=True, timeout=TIMEOUT, check=False
    )
    forced = subprocess.run(
        [*CLI, *PROMPT],
        env={**env, "FORCE_COLOR": "1", "NO_COLOR": "1"},  # FORCE_COLOR wins, as in the tools that read both
        cwd=tmp_path / "work",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert plain.returncode == forced.returncode == 0
    assert not SGR.search(plain.stderr) and SGR.search(forced.stderr)
    assert forced.stdout == plain.stdout  # the reply itself is never coloured


def test_wants_color_reads_the_environment_then_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyacp.cli.shared._display import wants_color

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert wants_color(Tty()) and not wants_color(io.StringIO())
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_color(Tty())
    monkeypatch.setenv("FORCE_COLOR", "true")
    assert wants_color(io.StringIO())
    monkeypatch.setenv("FORCE_COLOR", "false")
    monkeypatch.setenv("TERM", "xterm")
    assert not wants_color(Tty())


@pytest.mark.parametrize(
    ("args", "prog", "usage"),
    [
        (["prompt"], "tinyacp prompt", "tinyacp prompt [options] TEXT [TEXT ...]"),
        (["prompt", "--format", "xml", "hi"], "tinyacp prompt", "tinyacp prompt [options] TEXT [TEXT ...]"),
        (["batch", "items.jsonl"], "tinyacp batch", "tinyacp batch [options] --out DIR FILE.jsonl"),
        (["nosuch"], "tinyacp", "tinyacp [options] COMMAND ..."),
        # An unknown option is the subcommand's error, with its usage and its --help.
        (["prompt", "--bogus", "hi"], "tinyacp prompt", "tinyacp prompt [options] TEXT [TEXT ...]"),
        (
            ["batch", "i.jsonl", "--bogus", "--out", "o"],
            "tinyacp batch",
            "tinyacp batch [options] --out DIR FILE.jsonl",
        ),
        (["show", "j.jsonl", "--bogus"], "tinyacp show", "tinyacp show [options] JOURNAL"),
        (["replay", "--bogus", "j.jsonl"], "tinyacp replay", "tinyacp replay [options] JOURNAL"),
        (["sessions", "--bogus"], "tinyacp sessions", "tinyacp sessions [options]"),
        (["chat", "--bogus"], "tinyacp chat", "tinyacp chat [options]"),
        (["--bogus", "agents"], "tinyacp", "tinyacp [options] COMMAND ..."),
    ],
)
def test_a_usage_error_is_the_error_a_one_line_usage_and_where_the_help_is(
    env: dict[str, str], tmp_path: Path, args: list[str], prog: str, usage: str
) -> None:
    done = subprocess.run(
        [*CLI, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 2
    error, shown, see = done.stderr.splitlines()
    assert error.startswith(f"{prog}: error: ")
    assert shown == f"usage: {usage}"
    assert see == f"see: {prog} --help"
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--agent", "cluade", "hi"], "did you mean 'claude'?"),
        ([""], "the prompt is empty"),
        (["--cwd", "/nope", "hi"], "--cwd /nope: not a directory"),
        (["--timeout", "soon", "hi"], "not a number of seconds"),
        (["--format=json", "--journal", "/nope/run.jsonl", "hi"], "cannot write the journal"),
        (["--bogus", "hi"], "unrecognized arguments: --bogus"),
    ],
)
def test_with_format_json_a_usage_error_still_ends_stdout_with_the_result_event(
    env: dict[str, str], tmp_path: Path, args: list[str], said: str
) -> None:
    command = [*CLI, "prompt", *args] if "--format=json" in args else [*CLI, "prompt", "--format", "json", *args]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 2
    assert said in done.stderr
    *_, last = done.stdout.splitlines()
    result = json.loads(last)
    assert result["type"] == "result"
    assert (result["outcome"], result["exit_code"], result["stop_reason"]) == ("usage_error", 2, None)
    assert result["error"]["type"] == "UsageError" and said in result["error"]["message"]
