"""A batch turn whose agent fails to start is named as the command names it: the line a program that is no ACP agent
printed, with how it ended (its record's error and the summary's line for it); why ``npx`` or ``uvx`` could not
fetch the agent, and how to install it so that it starts offline (the entry's own words when it has them). A
program that prints such a line and goes on is stopped after the command's grace, not at the turn's timeout.

The programs are scripts this module writes; ``npx`` and ``uvx`` are fakes first on ``PATH`` that print what the
real ones print without a network, so that no test needs one. Both the library (``run_turn``, ``run_batch``) and
the command (``tinyacp batch``) are tried.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import AGENTS, handshake, wait_for
from helpers.batch import processes_in, records
from helpers.cli import Cli
from helpers.start_failures import (
    KIMI_LINE,
    NPM_ENOTFOUND,
    UVX_COWSAY_FAILURES,
    UVX_COWSAY_IDS,
    runner_first_on_path,
    script,
)
from tinyacp._startup_watch import STARTUP_GRACE
from tinyacp.batch import TurnRecord, run_batch, run_turn
from tinyacp.cli.agents._resolve import AgentSpec

TURN_TIMEOUT = 90.0
"""The turns' own deadline where it must not be what ends them (far above the grace, below pytest's 120 s)."""
ODD_OFFLINE = "npm install -g is-odd@3.0.1, then give its program as the agent's command"
NPM_DEFAULT_HINT = (
    "to start it offline: npm install -g is-odd@3.0.1, then make its program the agent's command in the config file "
    "(`tinyacp agents` names the file)"
)


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """The agents' working directory; no process may be left in it after the test."""
    directory = tmp_path / "work"
    directory.mkdir()
    yield directory
    wait_for(lambda: not processes_in(directory), timeout=30, what="the agents to be gone")


def old_kimi(tmp_path: Path, then: str = "exit 3") -> Path:
    """A program that prints kimi-cli 1.52's line on stdout, then does ``then``."""
    return script(tmp_path / "bin" / "old-kimi", f"echo '{KIMI_LINE}'\n{then}\n")


def turn(tmp_path: Path, work: Path, agent: str, **options: Any) -> TurnRecord:
    options.setdefault("timeout", TURN_TIMEOUT)
    return run_turn({"id": "t", "prompt": "hi"}, tmp_path / "journals", agent=agent, cwd=work, **options)


def error_lines(record: TurnRecord) -> list[str]:
    assert not record.ok and record.error is not None
    return record.error.message.splitlines()


@dataclass(frozen=True)
class Entry:
    """An agents table's entry as a caller of the library may write one (duck-typed, no tinyacp class)."""

    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    offline: str = ""


# --------------------------------------------------------------------------------------------------------------
# A program that prints a line that is not JSON-RPC: the line, with how it ended.


@pytest.mark.parametrize("status", [0, 3])
def test_a_turn_whose_program_prints_a_line_and_exits_names_the_line_and_its_exit_status(
    tmp_path: Path, work: Path, status: int
) -> None:
    record = turn(tmp_path, work, str(old_kimi(tmp_path, f"exit {status}")))
    assert record.error is not None and record.error.type == "AgentExited"
    assert error_lines(record)[0] == (
        f'old-kimi exited before answering initialize (exit code {status}); its only line on stdout: "{KIMI_LINE}"'
    )
    assert record.stop_reason is None and record.epoch == 1


def test_a_turn_shows_the_first_lines_and_counts_the_rest(tmp_path: Path, work: Path) -> None:
    many = script(
        tmp_path / "bin" / "chatty", 'i=0\nwhile [ $i -lt 50 ]; do echo "line $i"; i=$((i+1)); done\nexit 1\n'
    )
    lines = error_lines(turn(tmp_path, work, str(many)))
    assert (
        lines[0]
        == 'chatty exited before answering initialize (exit code 1); the first of its 50 lines on stdout: "line 0"'
    )
    assert lines[1:4] == ['then: "line 1"', 'then: "line 2"', "(and 47 more lines)"]


def test_the_line_in_a_record_is_sanitized_and_bounded(tmp_path: Path, work: Path) -> None:
    noisy = script(tmp_path / "bin" / "noisy", "printf '\\033[31mred\\033[0m %05000d\\n' 0\nexit 0\n")
    record = turn(tmp_path, work, str(noisy))
    assert record.error is not None and "\x1b" not in record.error.message
    first = error_lines(record)[0]
    assert first.startswith('noisy exited before answering initialize (exit code 0); its only line on stdout: "red 0')
    assert first.endswith('…"') and len(first) < 400


def test_a_program_that_prints_a_line_and_keeps_running_is_stopped_after_the_grace_not_at_the_timeout(
    tmp_path: Path, work: Path
) -> None:
    started = time.monotonic()
    record = turn(tmp_path, work, str(old_kimi(tmp_path, "exec sleep 100")))
    assert time.monotonic() - started < STARTUP_GRACE + 30  # far from the turn's timeout (90 s)
    assert record.error is not None and record.error.type == "AgentExited"
    assert error_lines(record)[0] == (
        f"old-kimi does not speak ACP on stdout: still no answer to initialize {STARTUP_GRACE:g} s after a line that "
        f'is not JSON-RPC (stopped); its only line on stdout: "{KIMI_LINE}"'
    )


def test_a_turn_timeout_before_the_grace_names_the_timeout_and_the_line(tmp_path: Path, work: Path) -> None:
    record = turn(tmp_path, work, str(old_kimi(tmp_path, "exec sleep 100")), timeout=0.5)
    assert record.error is not None and record.error.type == "AgentTimeout"
    assert error_lines(record)[0] == (
        "old-kimi does not speak ACP on stdout: no answer to initialize in 0.5 s; its only line on stdout: "
        f'"{KIMI_LINE}"'
    )


def test_a_banner_before_json_rpc_is_kept_in_the_journal_and_the_turn_goes_on(tmp_path: Path, work: Path) -> None:
    banner = script(tmp_path / "bin" / "banner", f"echo 'Welcome!'\nexec '{sys.executable}' -m tinyacp.demo\n")
    started = time.monotonic()
    record = turn(tmp_path, work, str(banner), policy=tinyacp.PermissionPolicy(allow_all=True))
    assert record.ok and record.error is None and "You said: hi" in record.text
    journal = tinyacp.JsonlJournal.read(record.journal)
    assert [line["line"] for line in journal if line.get("kind") == "invalid"] == ["Welcome!"]
    assert time.monotonic() - started < TURN_TIMEOUT / 3


def test_the_batch_summary_names_the_line_and_the_exit_status(tmp_path: Path, work: Path) -> None:
    kimi = str(old_kimi(tmp_path))
    items = [{"id": "kimi", "prompt": "hi", "agent": kimi}, {"id": "fine", "prompt": "hi"}]
    summary = run_batch(items, tmp_path / "out", agent="demo", cwd=work, timeout=TURN_TIMEOUT)
    assert (summary.ok, summary.failed) == (1, 1)
    (failure,) = summary.failures
    assert failure.reason == (
        "AgentExited: old-kimi exited before answering initialize (exit code 3); its only line on stdout: "
        f'"{KIMI_LINE}"'
    )


# --------------------------------------------------------------------------------------------------------------
# npx and uvx that cannot fetch the agent: the cause, and how to install it so that it starts offline.


@pytest.fixture
def offline_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The directory of fake runners, first on this process's ``PATH`` (where a turn's agent is looked up)."""
    bin_dir = tmp_path / "runners"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    yield bin_dir


def gone(line: str, status: int) -> bool:
    """Whether ``line`` is the turn's own words for an agent that exited with ``status`` before answering. The
    runner exits at once, so the client meets either its closed stdin (writing initialize) or its closed stdout,
    and on a loaded machine may see that before the exit is reaped, when there is no status to name yet."""
    said = line.removesuffix(f" (exit code {status})")
    return said in ("the agent closed its output before answering", "the agent closed its input")


def fake(bin_dir: Path, name: str, stderr: str, status: int) -> None:
    runner_first_on_path(bin_dir, name, stderr, status, {})


def test_a_turn_through_npx_without_the_network_says_so_and_how_to_start_it_offline(
    tmp_path: Path, work: Path, offline_path: Path
) -> None:
    fake(offline_path, "npx", NPM_ENOTFOUND, 1)
    lines = error_lines(turn(tmp_path, work, "npx -y is-odd@3.0.1"))
    assert lines[:2] == [
        "npx could not fetch is-odd@3.0.1: no network (getaddrinfo ENOTFOUND registry.npmjs.org)",
        NPM_DEFAULT_HINT,
    ]
    assert gone(lines[2], 1)
    assert lines[3] == "--- agent stderr (tail) ---" and "npm error network This is a problem" in lines[-1]


@pytest.mark.parametrize(
    "entry",
    [
        AgentSpec("odd", ("npx", "-y", "is-odd@3.0.1"), launcher="npx", package="is-odd@3.0.1", offline=ODD_OFFLINE),
        Entry(("npx", "-y", "is-odd@3.0.1"), offline=ODD_OFFLINE),
    ],
    ids=["agent-spec", "duck-typed"],
)
def test_run_batch_names_a_start_without_the_network_with_the_entry_s_offline_words(
    tmp_path: Path, work: Path, offline_path: Path, entry: Any
) -> None:
    fake(offline_path, "npx", NPM_ENOTFOUND, 1)
    summary = run_batch([{"id": "odd", "prompt": "hi"}], tmp_path / "out", agent="odd", agents={"odd": entry}, cwd=work)
    (record,) = records(tmp_path / "out")
    assert record.agent == "odd" and record.error is not None and record.error.type == "AgentExited"
    assert error_lines(record)[:2] == [
        "npx could not fetch is-odd@3.0.1: no network (getaddrinfo ENOTFOUND registry.npmjs.org)",
        f"to start it offline: {ODD_OFFLINE}",
    ]
    (failure,) = summary.failures
    assert failure.reason == (
        "AgentExited: npx could not fetch is-odd@3.0.1: no network (getaddrinfo ENOTFOUND registry.npmjs.org)"
    )


@pytest.mark.parametrize(
    ("stderr", "first", "hint"),
    UVX_COWSAY_FAILURES,
    ids=UVX_COWSAY_IDS,
)
def test_a_turn_through_uvx_that_cannot_fetch_says_why(  # noqa: PLR0917  the fixtures, then the case
    tmp_path: Path, work: Path, offline_path: Path, stderr: str, first: str, hint: str
) -> None:
    fake(offline_path, "uvx", stderr, 2)
    lines = error_lines(turn(tmp_path, work, "uvx cowsay==6.0"))
    assert lines[:2] == [first, hint]
    assert any(gone(line, 2) for line in lines), lines


def test_a_slow_first_start_through_a_runner_names_the_download_and_the_turn_s_timeout(
    tmp_path: Path, work: Path, offline_path: Path
) -> None:
    script(offline_path / "npx", "exec sleep 100\n")
    record = turn(tmp_path, work, "npx -y is-odd@3.0.1", timeout=0.5)
    assert record.error is not None and record.error.type == "AgentTimeout"
    lines = error_lines(record)
    assert lines[0] == "no answer to initialize in 0.5 s: npx may still have been downloading is-odd@3.0.1"
    assert lines[1].startswith("the first start downloads it") and lines[1].endswith("raise the turn's timeout")
    assert lines[2] == NPM_DEFAULT_HINT


def test_a_failure_after_the_agent_answered_initialize_is_no_start_failure(
    tmp_path: Path, work: Path, offline_path: Path
) -> None:
    steps = [*handshake()[:2], {"op": "stderr", "text": NPM_ENOTFOUND}, {"op": "exit", "code": 1}]
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    script(offline_path / "npx", f"exec '{sys.executable}' '{AGENTS / 'scripted.py'}' '{tmp_path / 'steps.json'}'\n")
    record = turn(tmp_path, work, "npx -y is-odd@3.0.1")
    assert record.error is not None and record.error.type == "AgentExited"
    assert "could not fetch" not in record.error.message and "exit code 1" in record.error.message


def test_a_runner_error_from_a_program_that_is_no_runner_is_not_taken_for_one(tmp_path: Path, work: Path) -> None:
    liar = script(tmp_path / "bin" / "liar", f"cat >&2 <<'EOF'\n{NPM_ENOTFOUND}EOF\nexit 1\n")
    record = turn(tmp_path, work, str(liar))
    assert record.error is not None and "could not fetch" not in record.error.message


# --------------------------------------------------------------------------------------------------------------
# The command: `tinyacp batch`'s summary and its records say the same.


def batch_items(cli: Cli, items: list[dict[str, Any]]) -> Path:
    path = cli.tmp / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def failed_line(stdout: bytes, item: str) -> str:
    lines = stdout.decode().splitlines()
    return next(line for line in lines[lines.index("failed:") :] if line.startswith(f"  {item}: "))


def test_the_command_s_summary_names_the_line_and_its_exit_status(cli: Cli) -> None:
    kimi = old_kimi(cli.tmp)
    items = batch_items(cli, [{"id": "kimi", "prompt": "hi", "agent": str(kimi)}])
    done = cli.run("batch", str(items), "--out", str(cli.tmp / "out"), "--timeout", str(TURN_TIMEOUT))
    assert done.returncode == 1, done.stderr
    assert failed_line(done.stdout, "kimi") == (
        f"  kimi: AgentExited: old-kimi exited before answering initialize (exit code 3); its only line on stdout: "
        f'"{KIMI_LINE}"'
    )


def test_the_command_stops_a_program_that_keeps_running_after_its_line(cli: Cli) -> None:
    kimi = old_kimi(cli.tmp, "exec sleep 100")
    items = batch_items(cli, [{"id": "kimi", "prompt": "hi", "agent": str(kimi)}])
    started = time.monotonic()
    done = cli.run("batch", str(items), "--out", str(cli.tmp / "out"), "--format", "json")
    assert time.monotonic() - started < STARTUP_GRACE + 30  # no --timeout: the grace alone ends the turn
    assert done.returncode == 1
    (streamed,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert streamed["error"]["message"].startswith("old-kimi does not speak ACP on stdout: still no answer")


def test_the_command_names_an_npx_start_without_the_network_with_the_config_entry_s_offline_words(cli: Cli) -> None:
    env = runner_first_on_path(cli.tmp / "runners", "npx", NPM_ENOTFOUND, 1, cli.env)
    config = cli.tmp / "config.toml"
    config.write_text(f'[agents.odd]\ncommand = ["npx", "-y", "is-odd@3.0.1"]\noffline = "{ODD_OFFLINE}"\n')
    items = batch_items(cli, [{"id": "odd", "prompt": "hi"}])
    out = cli.tmp / "out"
    done = cli.run("batch", str(items), "--out", str(out), "--config", str(config), "--agent", "odd", env=env)
    assert done.returncode == 1, done.stderr
    assert failed_line(done.stdout, "odd") == (
        "  odd: AgentExited: npx could not fetch is-odd@3.0.1: no network (getaddrinfo ENOTFOUND registry.npmjs.org)"
    )
    (record,) = records(out)
    assert error_lines(record)[1] == f"to start it offline: {ODD_OFFLINE}"


def test_the_preflight_names_a_program_that_prints_a_line_and_does_not_wait_for_its_deadline(
    tmp_path: Path, work: Path
) -> None:
    kimi = old_kimi(tmp_path, "exec sleep 100")
    items = [{"id": "a", "prompt": "hi", "mode": "code"}]  # a mode: the agent is asked what it offers first
    started = time.monotonic()
    with pytest.raises(tinyacp.BatchItemError) as caught:
        run_batch(items, tmp_path / "out", agent=str(kimi), cwd=work, timeout=TURN_TIMEOUT)
    assert time.monotonic() - started < STARTUP_GRACE + 30
    assert str(caught.value) == (
        "agent 'old-kimi' could not be asked which modes, models and options it offers (item 'a' asks one): "
        "AgentExited: old-kimi does not speak ACP on stdout: still no answer to initialize "
        f'{STARTUP_GRACE:g} s after a line that is not JSON-RPC (stopped); its only line on stdout: "{KIMI_LINE}"'
    )


def test_the_preflight_names_an_npx_start_without_the_network(tmp_path: Path, work: Path, offline_path: Path) -> None:
    fake(offline_path, "npx", NPM_ENOTFOUND, 1)
    items = [{"id": "a", "prompt": "hi", "model": "m"}]
    with pytest.raises(tinyacp.BatchItemError) as caught:
        run_batch(items, tmp_path / "out", agent="npx -y is-odd@3.0.1", cwd=work, timeout=TURN_TIMEOUT)
    assert str(caught.value).splitlines() == [
        "agent 'npx' could not be asked which modes, models and options it offers (item 'a' asks one): AgentExited: "
        "npx could not fetch is-odd@3.0.1: no network (getaddrinfo ENOTFOUND registry.npmjs.org)",
        NPM_DEFAULT_HINT,
    ]
