"""An agent that fails to start is named for what happened: the line it printed and how it ended; the network a
``npx``/``uvx`` start lacked, and how to install the agent so that it starts offline; a Python uv cannot find.

The programs are scripts this module writes; ``npx`` and ``uvx`` are fakes first on ``PATH`` that print what the
real ones print without a network (exit status included), so that no test needs one.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from helpers.cli import TIMEOUT, Cli, json_events
from helpers.start_failures import (
    KIMI_LINE,
    NPM_EAI_AGAIN,
    NPM_ENOTFOUND,
    UV_DNS,
    UV_OLD_PYTHON,
    UV_PYTHON_DNS,
    UVX_COWSAY_FAILURES,
    UVX_COWSAY_IDS,
    runner_first_on_path,
    script,
)
from tinyacp import AgentExited, AgentTimeout
from tinyacp._launch_failures import Launch, launch_failure, launch_of
from tinyacp._records import AgentMessage, MessageKind
from tinyacp._startup_watch import STARTUP_GRACE, NotAcp, StartupWatch
from tinyacp.cli.agents._explain import explain
from tinyacp.cli.agents._resolve import BUILTIN_AGENTS, AgentSpec
from tinyacp.cli.shared._exit import Exit


def fake_runner(cli: Cli, name: str, stderr: str, status: int) -> dict[str, str]:
    """``name`` (npx, uvx) first on PATH: it prints ``stderr`` and exits with ``status``; the env to run with."""
    return runner_first_on_path(cli.tmp / "bin", name, stderr, status, cli.env)


def config(cli: Cli, name: str, command: list[str]) -> Path:
    path = cli.tmp / "config.toml"
    path.write_text(f"[agents.{name}]\ncommand = {json.dumps(command)}\n")
    return path


def message_and_hint(done: subprocess.CompletedProcess[bytes]) -> tuple[str, list[str]]:
    """The error line (without ``tinyacp: error:``) and the lines after it, up to the agent's stderr."""
    lines = done.stderr.decode().splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("tinyacp: error: "))
    hint = []
    for line in lines[start + 1 :]:
        if line.startswith(("agent stderr", "journal:")):
            break
        hint.append(line)
    assert "Traceback" not in done.stderr.decode()
    return lines[start].removeprefix("tinyacp: error: "), hint


# --------------------------------------------------------------------------------------------------------------
# A program that prints a line that is not JSON-RPC: the line is in the message, with how the program ended.


@pytest.mark.parametrize("command", ["prompt", "probe"])
@pytest.mark.parametrize(("status", "words"), [(0, "exit code 0"), (3, "exit code 3")])
def test_a_program_that_prints_one_line_and_exits_is_named_with_its_line_and_status(
    cli: Cli, command: str, status: int, words: str
) -> None:
    kimi = script(cli.tmp / "old-kimi", f"echo '{KIMI_LINE}'\nexit {status}\n")
    done = cli.run(command, "--agent-command", str(kimi), *(["hi"] if command == "prompt" else []))
    assert done.returncode == Exit.AGENT_ERROR
    message, hint = message_and_hint(done)
    assert message == f'old-kimi exited before answering initialize ({words}); its only line on stdout: "{KIMI_LINE}"'
    assert hint == ["check the command: many agents need a flag or subcommand for ACP (gemini --acp, opencode acp)"]


def test_a_program_that_prints_two_lines_shows_both_and_how_many(cli: Cli) -> None:
    kimi = script(cli.tmp / "old-kimi", "echo 'kimi-cli is no longer maintained.'\necho 'Please migrate.'\nexit 1\n")
    done = cli.run("prompt", "--agent-command", str(kimi), "hi")
    message, hint = message_and_hint(done)
    assert done.returncode == 1
    assert message == (
        "old-kimi exited before answering initialize (exit code 1); the first of its 2 lines on stdout: "
        '"kimi-cli is no longer maintained."'
    )
    assert hint[0] == 'then: "Please migrate."'


def test_many_lines_are_shown_bounded_and_counted(cli: Cli) -> None:
    kimi = script(cli.tmp / "old-kimi", 'i=0\nwhile [ $i -lt 50 ]; do echo "line $i"; i=$((i+1)); done\nexit 0\n')
    done = cli.run("probe", "--agent-command", str(kimi))
    message, hint = message_and_hint(done)
    assert message.endswith('the first of its 50 lines on stdout: "line 0"')
    assert hint[:3] == ['then: "line 1"', 'then: "line 2"', "(and 47 more lines)"]


def test_a_line_is_sanitized_and_cut_in_the_message(cli: Cli) -> None:
    kimi = script(cli.tmp / "old-kimi", "printf '\\033[31mred\\033[0m %0500d\\n' 0\nexit 0\n")
    done = cli.run("prompt", "--agent-command", str(kimi), "hi")
    message, _ = message_and_hint(done)
    assert "\x1b" not in done.stderr.decode()
    assert 'its only line on stdout: "' in message and "…" in message and len(message) < 400


@pytest.mark.parametrize("command", ["prompt", "probe"])
def test_a_program_that_prints_a_line_and_keeps_running_is_stopped_after_a_grace(cli: Cli, command: str) -> None:
    kimi = script(cli.tmp / "old-kimi", f"echo '{KIMI_LINE}'\nexec sleep 60\n")
    started = time.monotonic()
    done = cli.run(command, "--agent-command", str(kimi), *(["hi"] if command == "prompt" else []))
    assert time.monotonic() - started < STARTUP_GRACE + TIMEOUT / 2  # not at the startup deadline (120 s)
    assert done.returncode == Exit.AGENT_ERROR
    message, _ = message_and_hint(done)
    assert message == (
        f"old-kimi does not speak ACP on stdout: still no answer to initialize {STARTUP_GRACE:g} s after a line "
        f'that is not JSON-RPC (stopped); its only line on stdout: "{KIMI_LINE}"'
    )


def test_a_startup_deadline_before_the_grace_names_the_deadline_and_the_line(cli: Cli) -> None:
    kimi = script(cli.tmp / "old-kimi", f"echo '{KIMI_LINE}'\nexec sleep 60\n")
    done = cli.run("probe", "--agent-command", str(kimi), "--timeout", "0.3")
    message, _ = message_and_hint(done)
    assert done.returncode == Exit.AGENT_ERROR
    said = f'its only line on stdout: "{KIMI_LINE}"'
    assert message == f"old-kimi does not speak ACP on stdout: no answer to initialize in 0.3 s; {said}"


def test_the_json_result_carries_the_line_in_its_error_message(cli: Cli) -> None:
    kimi = script(cli.tmp / "old-kimi", f"echo '{KIMI_LINE}'\nexit 0\n")
    done = cli.run("prompt", "--format", "json", "--agent-command", str(kimi), "hi")
    result = json_events(done.stdout)[-1]
    assert result["outcome"] == "agent_error" and result["exit_code"] == 1
    assert result["error"]["type"] == "AgentExited" and KIMI_LINE in result["error"]["message"]
    assert result["error"]["hint"] == [
        "check the command: many agents need a flag or subcommand for ACP (gemini --acp, opencode acp)"
    ]


def test_a_banner_before_json_rpc_is_refused_at_the_first_message(cli: Cli) -> None:
    answer = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}
    kimi = script(cli.tmp / "old-kimi", f"echo 'Welcome!'\necho '{json.dumps(answer)}'\nexec sleep 60\n")
    started = time.monotonic()
    done = cli.run("prompt", "--agent-command", str(kimi), "hi")
    assert time.monotonic() - started < TIMEOUT / 2
    message, _ = message_and_hint(done)
    assert (
        message
        == 'old-kimi does not speak ACP on stdout: its first line is not JSON-RPC; its only line on stdout: "Welcome!"'
    )


def test_a_built_in_entry_names_the_release_it_was_checked_with_and_how_to_install_it() -> None:
    kimi = AgentSpec("kimi", ("kimi", "acp"), install="uv tool install kimi-cli==1.51.0", version="1.51.0")
    watch = _watched(KIMI_LINE)
    why = explain(AgentExited("the agent exited", returncode=0), kimi, None, watch=watch)
    assert why.code == Exit.AGENT_ERROR
    assert (
        why.message == f'kimi exited before answering initialize (exit code 0); its only line on stdout: "{KIMI_LINE}"'
    )
    assert why.hint == [
        "tinyacp was checked with kimi 1.51.0: a newer release may be the cause; to install that one: "
        "uv tool install kimi-cli==1.51.0"
    ]
    pinned = AgentSpec(
        "kimi", ("uvx", "kimi-cli@1.51.0", "acp"), install="install uv", version="1.51.0", launcher="uvx",
        package="kimi-cli@1.51.0",
    )  # fmt: skip
    why = explain(AgentExited("the agent exited", returncode=0), pinned, None, watch=watch)
    assert why.hint == ["tinyacp starts kimi-cli@1.51.0, the release it was checked with"]
    unversioned = AgentSpec("kimi", ("kimi", "acp"), install="uv tool install kimi-cli")
    why = explain(AgentExited("the agent exited", returncode=0), unversioned, None, watch=watch)
    assert why.hint == ["is kimi installed and recent enough? uv tool install kimi-cli"]


def test_a_config_entry_over_a_built_in_one_names_the_release_the_built_in_one_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pinned = AgentSpec(
        "kimi", ("uvx", "kimi-cli@1.51.0", "acp"), version="1.51.0", launcher="uvx", package="kimi-cli@1.51.0"
    )
    monkeypatch.setitem(BUILTIN_AGENTS, "kimi", pinned)
    own = AgentSpec("kimi", ("kimi", "acp"), source="config.toml")
    exited = AgentExited("the agent exited", returncode=0)
    why = explain(exited, own, None, watch=_watched(KIMI_LINE))
    assert why.hint == [
        "check the command: many agents need a flag or subcommand for ACP (gemini --acp, opencode acp)",
        "tinyacp's built-in kimi entry runs kimi-cli@1.51.0: another release may be the cause",
    ]
    with_args = AgentSpec("kimi", ("uvx", "kimi-cli@1.51.0", "acp", "--debug"), source="config.toml")
    assert len(explain(exited, with_args, None, watch=_watched(KIMI_LINE)).hint) == 1  # it runs that release
    # Under a name of its own, the same package at another release: the built-in entry is found by its package.
    newest = AgentSpec(
        "kimi-latest",
        ("uvx", "kimi-cli@1.52.0", "acp"),
        source="config.toml",
        launcher="uvx",
        package="kimi-cli@1.52.0",
    )
    hint = explain(exited, newest, None, watch=_watched(KIMI_LINE)).hint
    assert hint[-1] == "tinyacp's built-in kimi entry runs kimi-cli@1.51.0: another release may be the cause"


def _watched(*lines: str) -> StartupWatch:
    """A watch that saw these lines that are not JSON-RPC (armed, so that it kept them all)."""
    watch = StartupWatch()
    watch.arm(lambda: None)
    for line in lines:
        watch.seen(line.encode(), _invalid(line))
    watch.disarm()
    return watch


def test_an_unarmed_watch_refuses_the_first_line_at_once() -> None:
    watch = StartupWatch()
    with pytest.raises(NotAcp):
        watch.seen(b"hello", _invalid("hello"))


def _invalid(line: str) -> AgentMessage:
    return AgentMessage(1, line.encode(), MessageKind.INVALID, None, None, "not JSON")


# --------------------------------------------------------------------------------------------------------------
# npx and uvx without the network, without a Python: the cause, and how to install the agent to start offline.


@pytest.mark.parametrize("command", ["prompt", "probe"])
def test_an_npx_start_without_the_network_says_so_and_how_to_start_offline(cli: Cli, command: str) -> None:
    env = fake_runner(cli, "npx", NPM_ENOTFOUND, 1)
    path = config(cli, "odd", ["npx", "-y", "is-odd@3.0.1"])
    args = [command, "--config", str(path), "--agent", "odd", *(["hi"] if command == "prompt" else [])]
    done = cli.run(*args, env=env)
    assert done.returncode == Exit.NOT_INSTALLED
    message, hint = message_and_hint(done)
    assert message == "npx could not fetch is-odd@3.0.1: no network (getaddrinfo ENOTFOUND registry.npmjs.org)"
    assert hint == [
        "to start it offline: npm install -g is-odd@3.0.1, then make its program the agent's command in the config "
        "file (`tinyacp agents` names the file)"
    ]
    assert "npm error network This is a problem" in done.stderr.decode()  # the tail follows


def test_npm_network_error_codes_are_all_recognised() -> None:
    launch = Launch("npx", "pkg@1.0.0")
    spec = AgentSpec("pkg", ("npx", "-y", "pkg@1.0.0"))
    failure = launch_failure(launch, NPM_EAI_AGAIN.encode(), spec)
    assert failure is not None
    assert failure.message == "npx could not fetch pkg@1.0.0: no network (getaddrinfo EAI_AGAIN registry.npmjs.org)"
    for code in ("ECONNREFUSED", "ETIMEDOUT", "ECONNRESET"):
        tail = f"npm error code {code}\nnpm error errno {code}\n".encode()
        failure = launch_failure(launch, tail, spec)
        assert failure is not None and "no network" in failure.message, code
    tail = b"npm error network request to https://registry.npmjs.org/pkg failed\n"
    assert launch_failure(launch, tail, spec) is not None
    assert launch_failure(launch, b"npm error code E403\n", spec) is None  # another failure: the tail says it


def test_npm_set_to_work_offline_with_an_empty_cache_is_said_so() -> None:
    tail = (
        b"npm error code ENOTCACHED\n"
        b"npm error request to https://registry.npmjs.org/is-odd failed: cache mode is 'only-if-cached' but no cached "
        b"response is available.\n"
    )
    spec = AgentSpec("odd", ("npx", "-y", "is-odd@3.0.1"))
    failure = launch_failure(Launch("npx", "is-odd@3.0.1"), tail, spec)
    assert failure is not None
    assert failure.message == (
        "npx could not fetch is-odd@3.0.1: npm is set to work offline (npm_config_offline, --offline) and its cache "
        "does not have it"
    )
    assert failure.hint[0].startswith("to start it offline: npm install -g is-odd@3.0.1")


def test_an_npm_package_missing_from_the_registry_is_said_so() -> None:
    spec = AgentSpec("pkg", ("npx", "-y", "no-such-pkg@1.0.0"))
    tail = b"npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/no-such-pkg - Not found\n"
    failure = launch_failure(Launch("npx", "no-such-pkg@1.0.0"), tail, spec)
    assert failure is not None
    assert failure.message.startswith("npx could not fetch no-such-pkg@1.0.0: the registry does not have it")


@pytest.mark.parametrize(
    ("stderr", "expected", "first_hint"),
    UVX_COWSAY_FAILURES,
    ids=UVX_COWSAY_IDS,
)
def test_a_uvx_start_that_fails_says_why(cli: Cli, stderr: str, expected: str, first_hint: str) -> None:
    env = fake_runner(cli, "uvx", stderr, 2)
    done = cli.run("prompt", "--agent-command", "uvx cowsay==6.0", "hi", env=env)
    assert done.returncode == Exit.NOT_INSTALLED
    message, hint = message_and_hint(done)
    assert message == expected
    assert hint[0] == first_hint
    done = cli.run("probe", "--format", "json", "--agent-command", "uvx cowsay==6.0", env=env)
    assert done.returncode == Exit.NOT_INSTALLED and message_and_hint(done)[0] == expected
    failed = json.loads(done.stdout)  # a script reads stdout: it gets a document saying why there is no report
    assert (failed["outcome"], failed["exit_code"]) == ("not_installed", Exit.NOT_INSTALLED)
    assert failed["error"]["message"] == expected and failed["error"]["hint"][0] == first_hint
    assert failed["command"] == ["uvx", "cowsay==6.0"]


def test_the_json_result_of_a_start_without_the_network_is_not_installed(cli: Cli) -> None:
    env = fake_runner(cli, "npx", NPM_ENOTFOUND, 1)
    done = cli.run("prompt", "--format", "json", "--agent-command", "npx -y is-odd@3.0.1", "hi", env=env)
    result = json_events(done.stdout)[-1]
    assert result["outcome"] == "not_installed" and result["exit_code"] == Exit.NOT_INSTALLED
    assert result["error"]["message"].startswith("npx could not fetch is-odd@3.0.1: no network")
    assert result["error"]["hint"] == [
        "to start it offline: npm install -g is-odd@3.0.1, then make its program the agent's command in the config "
        "file (`tinyacp agents` names the file)"
    ]


def test_a_python_too_old_for_the_package_names_the_version_to_install() -> None:
    spec = AgentSpec("bagels", ("uvx", "bagels"))
    failure = launch_failure(Launch("uvx", "bagels"), UV_OLD_PYTHON.encode(), spec)
    assert failure is not None
    assert failure.message == "uvx found no Python that bagels can use (it needs Python>=3.13, uv found 3.11.1)"
    assert failure.hint[0].startswith("install one with `uv python install 3.13`")


def test_a_python_uv_cannot_download_is_told_apart_from_the_package() -> None:
    tail = UV_PYTHON_DNS
    failure = launch_failure(Launch("uvx", "fast-agent-mcp==0.4.0"), tail.encode(), AgentSpec("f", ("uvx", "f")))
    assert failure is not None
    assert failure.message == (
        "uvx could not download a Python for fast-agent-mcp==0.4.0: no network (failed to lookup address "
        "information: Name or service not known)"
    )


def test_an_entry_says_how_it_starts_offline_in_its_own_words() -> None:
    spec = AgentSpec(
        "fast-agent",
        ("uvx", "fast-agent-acp"),
        launcher="uvx",
        package="fast-agent-mcp==0.4.0",
        offline="uv tool install fast-agent-mcp==0.4.0, then run fast-agent-acp",
    )
    exited = AgentExited("the agent exited", returncode=2, stderr_tail=UV_DNS.encode())
    why = explain(exited, spec, None)
    assert why.code == Exit.NOT_INSTALLED
    assert why.message.startswith("uvx could not fetch fast-agent-mcp==0.4.0: no network")
    assert why.hint == ["to start it offline: uv tool install fast-agent-mcp==0.4.0, then run fast-agent-acp"]


def test_a_slow_first_start_through_a_runner_hints_at_the_download(cli: Cli) -> None:
    bin_dir = cli.tmp / "bin"
    script(bin_dir / "uvx", "exec sleep 60\n")
    env = {**cli.env, "PATH": f"{bin_dir}{os.pathsep}{cli.env['PATH']}"}
    args = ["--startup-timeout", "0.5", "--agent-command", "uvx --from fast-agent-mcp@0.4.0 fast-agent-acp", "hi"]
    done = cli.run("prompt", *args, env=env)
    assert done.returncode == Exit.AGENT_ERROR
    message, hint = message_and_hint(done)
    assert message == "no answer to initialize in 0.5 s: uvx may still have been downloading fast-agent-mcp@0.4.0"
    assert hint[0].startswith("the first start downloads it") and "raise --startup-timeout" in hint[0]
    assert hint[1].startswith("to start it offline: uv tool install fast-agent-mcp@0.4.0")
    done = cli.run("probe", *args[2:-1], "--timeout", "0.5", env=env)
    assert message_and_hint(done)[1][0].endswith("raise --timeout")  # probe's own deadline option


def test_a_runner_error_outside_a_runner_start_is_not_taken_for_one() -> None:
    spec = AgentSpec("my-agent", ("my-agent",))
    exited = AgentExited("the agent exited", returncode=1, stderr_tail=NPM_ENOTFOUND.encode())
    why = explain(exited, spec, None)
    assert why.code == Exit.AGENT_ERROR and "could not fetch" not in why.message


def test_a_timeout_after_the_start_is_no_start_failure() -> None:
    spec = AgentSpec("odd", ("npx", "-y", "is-odd@3.0.1"))
    why = explain(AgentTimeout("session/prompt timed out"), spec, None)
    assert why.code == Exit.TIMEOUT


@pytest.mark.parametrize(
    ("command", "launch"),
    [
        (("npx", "-y", "@qwen-code/qwen-code@0.24.4", "--acp"), Launch("npx", "@qwen-code/qwen-code@0.24.4")),
        (("/usr/local/bin/npx", "pkg"), Launch("npx", "pkg")),
        (("uvx", "--python", "3.12", "fast-agent-acp"), Launch("uvx", "fast-agent-acp")),
        (("uvx", "--from", "fast-agent-mcp==0.4.0", "fast-agent-acp"), Launch("uvx", "fast-agent-mcp==0.4.0")),
        (("npx", "--yes", "--package", "@scope/pkg@1.0.0", "run-it"), Launch("npx", "@scope/pkg@1.0.0")),
        (("bunx", "pkg@1"), Launch("bunx", "pkg@1")),
        (("pnpx", "pkg@1"), Launch("pnpx", "pkg@1")),
        (("pnpm", "dlx", "pkg@1"), Launch("pnpm dlx", "pkg@1")),
        (("npx",), Launch("npx", "")),
        (("pnpm", "install"), None),
        (("kimi", "acp"), None),
    ],
)
def test_the_runner_and_package_are_read_from_the_command(command: tuple[str, ...], launch: Launch | None) -> None:
    assert launch_of(AgentSpec("x", command)) == launch


def test_an_entry_s_launcher_and_package_win_over_its_command() -> None:
    spec = AgentSpec("fast-agent", ("fast-agent-acp",), launcher="uvx", package="fast-agent-mcp==0.4.0")
    assert launch_of(spec) == Launch("uvx", "fast-agent-mcp==0.4.0")
