"""``--sandbox`` on the command line: ``prompt``, ``batch`` and ``agents --check`` run the agent in bubblewrap as the
flags, the agent's config entry and the agent table say, and say so (the live line, the journal's first record,
the batch's records, the check's rows). The probing agent is ``agents/sandbox_agent.py``.

Like ``test_sandbox.py``, these need bwrap: skipped without it, failed under ``TINYACP_REQUIRE_BWRAP=1``.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import INIT_RESULT, end_turn
from helpers.cli import Cli
from helpers.sandbox import SANDBOX_AGENT, require_bwrap
from tinyacp.cli.agents._resolve import BUILTIN_AGENTS
from tinyacp.cli.shared._sandbox import expand_dir, state_dirs

AGENT = shlex.join(SANDBOX_AGENT)


@pytest.fixture(scope="module")
def bwrap() -> str:
    return require_bwrap()


def probes(*steps: dict[str, Any]) -> str:
    return json.dumps(list(steps))


def results(stdout: bytes) -> list[dict[str, Any]]:
    """The probing agent's results, from the reply on stdout."""
    found: list[dict[str, Any]] = json.loads(stdout.decode().strip())
    return found


def first_record(journal: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(journal.read_text().splitlines()[0])
    return record


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def test_prompt_sandbox_confines_the_agent_and_the_live_line_and_journal_say_how(
    bwrap: str, cli: Cli, tmp_path: Path
) -> None:
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    journal = tmp_path / "run.jsonl"
    text = probes(
        {"op": "write", "path": str(cli.work / "inside.txt")},
        {"op": "write", "path": str(sibling / "outside.txt")},
    )
    done = cli.run("prompt", "--agent-command", AGENT, "--sandbox", "--journal", str(journal), text)
    assert done.returncode == 0, done.stderr.decode()
    # /tmp is the agent's own: the sibling folder under it is not even there.
    assert results(done.stdout) == [{"ok": True}, {"ok": False, "error": "ENOENT"}]
    assert (cli.work / "inside.txt").exists()
    assert not (sibling / "outside.txt").exists()
    stderr = done.stderr.decode()
    assert f"in a sandbox (bubblewrap): writable {cli.work}; network shared" in stderr
    record = first_record(journal)
    assert record["type"] == "epoch"
    sandbox = record["sandbox"]
    assert sandbox["kind"] == "bubblewrap" and sandbox["network"] is True
    assert sandbox["writable"] == [str(cli.work)]
    options = sandbox["bwrap"]
    assert options[:2] == ["--unshare-user", "--uid"]
    assert ["--bind", str(cli.work), str(cli.work)] == options[options.index("--bind") : options.index("--bind") + 3]
    shown = cli.run("show", str(journal))
    assert f"· in a sandbox (bubblewrap): writable {cli.work}; network shared" in shown.stdout.decode()


def test_the_json_session_event_says_how_the_run_is_sandboxed(bwrap: str, cli: Cli) -> None:
    done = cli.run("prompt", "--agent-command", AGENT, "--sandbox", "--format", "json", "--no-journal", "[]")
    assert done.returncode == 0, done.stderr.decode()
    session = json.loads(done.stdout.splitlines()[0])
    assert session["type"] == "session"
    assert session["sandbox"]["kind"] == "bubblewrap" and "--unshare-user" in session["sandbox"]["bwrap"]
    plain = cli.run("prompt", "--agent-command", AGENT, "--format", "json", "--no-journal", "[]")
    assert json.loads(plain.stdout.splitlines()[0])["sandbox"] is None


def test_sandbox_network_off_and_writable_imply_the_sandbox(
    bwrap: str, cli: Cli, tmp_path: Path, listener: int
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    text = probes(
        {"op": "connect", "host": "127.0.0.1", "port": listener},
        {"op": "write", "path": str(extra / "x.txt")},
        {"op": "write", "path": "/etc/tinyacp-not-writable"},
    )
    done = cli.run("prompt", "--agent-command", AGENT, "--sandbox-network", "off", "--writable", str(extra), text)
    assert done.returncode == 0, done.stderr.decode()
    assert results(done.stdout) == [
        {"ok": False, "error": "ECONNREFUSED"},
        {"ok": True},
        {"ok": False, "error": "EROFS"},
    ]
    assert f"writable {cli.work}, {extra}; network off (loopback only)" in done.stderr.decode()


def write_config(cli: Cli, text: str) -> None:
    config = Path(cli.env["XDG_CONFIG_HOME"]) / "tinyacp"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(text)


def test_an_agents_config_entry_sandboxes_it_with_its_state_dirs_and_no_sandbox_wins(
    bwrap: str, cli: Cli, tmp_path: Path
) -> None:
    state = tmp_path / "probe-state"  # made by the command, as an agent's state directory is
    write_config(
        cli,
        f"[agents.probe]\ncommand = {json.dumps(SANDBOX_AGENT)}\n"
        '[agents.probe.sandbox]\nenabled = true\nwritable = ["$PROBE_STATE|~/never-used"]\n',
    )
    env = {**cli.env, "PROBE_STATE": str(state)}
    outside = Path.home() / f".tinyacp-test-{os.getpid()}-{cli.marker}"
    text = probes({"op": "write", "path": str(state / "s.txt")}, {"op": "write", "path": str(outside)})
    sandboxed = cli.run("prompt", "--agent", "probe", text, env=env)
    assert sandboxed.returncode == 0, sandboxed.stderr.decode()
    assert results(sandboxed.stdout) == [{"ok": True}, {"ok": False, "error": "EROFS"}]
    assert f"writable {cli.work}, {state}" in sandboxed.stderr.decode()
    assert not outside.exists()
    free = cli.run("prompt", "--agent", "probe", "--no-sandbox", text, env=env)
    try:
        assert free.returncode == 0, free.stderr.decode()
        assert results(free.stdout) == [{"ok": True}, {"ok": True}]
        assert "in a sandbox" not in free.stderr.decode()
    finally:
        outside.unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('[agents.probe.sandbox]\nnetwrok = "off"\n', "did you mean 'network'"),
        ('[agents.probe.sandbox]\nnetwork = "maybe"\n', "agents.probe.sandbox.network"),
        ('[agents.probe.sandbox]\nwritable = "~/.probe"\n', "agents.probe.sandbox.writable"),
    ],
)
def test_a_bad_sandbox_key_in_the_config_is_a_usage_error_naming_it(cli: Cli, table: str, words: str) -> None:
    write_config(cli, f"[agents.probe]\ncommand = {json.dumps(SANDBOX_AGENT)}\n{table}")
    done = cli.run("prompt", "--agent", "probe", "--sandbox", "[]")
    assert done.returncode == 2
    assert words in done.stderr.decode()


def test_without_bwrap_sandbox_is_a_usage_error_and_nothing_starts(cli: Cli, tmp_path: Path) -> None:
    env = {**cli.env, "PATH": str(tmp_path / "no-bin")}
    journal = tmp_path / "run.jsonl"
    done = cli.run("prompt", "--agent-command", AGENT, "--sandbox", "--journal", str(journal), "[]", env=env)
    assert done.returncode == 2
    assert "--sandbox: no bwrap on the PATH: install bubblewrap" in done.stderr.decode()
    assert not journal.exists()
    checked = cli.run("agents", "--check", "demo", "--sandbox", env=env)
    assert checked.returncode == 2
    assert "install bubblewrap" in checked.stderr.decode()


def test_a_writable_that_is_not_a_directory_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("prompt", "--agent-command", AGENT, "--writable", str(tmp_path / "nowhere"), "[]")
    assert done.returncode == 2
    assert "--writable" in done.stderr.decode() and "not a directory" in done.stderr.decode()


def test_batch_sandbox_runs_each_turn_in_bubblewrap_and_records_how(bwrap: str, cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    text = probes({"op": "write", "path": str(cli.work / "in.txt")}, {"op": "write", "path": "/etc/tinyacp-x"})
    items.write_text(json.dumps({"id": "one", "prompt": text}) + "\n")
    out = tmp_path / "out"
    done = cli.run("batch", str(items), "--out", str(out), "--agent", AGENT, "--sandbox", "--sandbox-network", "off")
    assert done.returncode == 0, done.stderr.decode()
    record = json.loads((out / "results.jsonl").read_text())
    assert json.loads(record["text"]) == [{"ok": True}, {"ok": False, "error": "EROFS"}]
    assert "--unshare-net" in record["sandbox"] and "--unshare-user" in record["sandbox"]


def test_agents_check_sandbox_starts_each_agent_in_bubblewrap(bwrap: str, cli: Cli) -> None:
    done = cli.run("agents", "--check", "demo", "--sandbox", "--format", "json")
    assert done.returncode == 0, done.stderr.decode()
    (row,) = json.loads(done.stdout)
    assert row["status"] == "ok"
    assert row["sandbox"][:2] == ["--unshare-user", "--uid"]
    text = cli.run("agents", "--check", "demo", "--sandbox")
    assert "checked in the sandbox (bubblewrap)" in text.stdout.decode()
    plain = cli.run("agents", "--check", "demo", "--format", "json")
    assert json.loads(plain.stdout)[0]["sandbox"] is None


def test_sandbox_is_an_option_of_check_only() -> None:
    from tinyacp.cli import main

    assert main(["agents", "--sandbox"]) == 2


def test_a_state_dir_word_takes_its_first_alternative_whose_variables_are_set() -> None:
    env = {"HOME": "/home/u", "CODEX_HOME": "/srv/codex", "EMPTY": ""}
    assert expand_dir("$CODEX_HOME|~/.codex", env) == "/srv/codex"
    assert expand_dir("$CLAUDE_CONFIG_DIR|~/.claude", env) == "/home/u/.claude"
    assert expand_dir("${CODEX_HOME}/sub", env) == "/srv/codex/sub"
    assert expand_dir("$EMPTY/x|$UNSET/y", env) is None
    assert expand_dir("~", env) == "/home/u"
    assert state_dirs(["$UNSET", "~/.npm"], env) == ["/home/u/.npm"]


def test_every_entry_of_the_table_names_state_dirs_that_expand_to_absolute_paths() -> None:
    env = {"HOME": "/home/u"}
    for name, spec in BUILTIN_AGENTS.items():
        words = spec.sandbox.writable or []
        dirs = state_dirs(words, env)
        assert len(dirs) == len(words), name  # each word has an alternative that needs nothing set
        assert all(os.path.isabs(path) and path.startswith("/home/u/") for path in dirs), (name, dirs)
        if spec.launcher == "npx":
            assert "/home/u/.npm" in dirs, name
        if spec.launcher == "uvx":
            assert "/home/u/.cache/uv" in dirs, name
    assert "/home/u/.claude" in state_dirs(BUILTIN_AGENTS["claude"].sandbox.writable or [], env)
    assert state_dirs(BUILTIN_AGENTS["codex"].sandbox.writable or [], {**env, "CODEX_HOME": "/c"})[0] == "/c"


SERVED = """
import errno, socket, sys
def write(path):
    return open(path, "w")
def connect():
    return socket.create_connection(("127.0.0.1", int(sys.argv[-1])), 5)
for act in [*(lambda path=path: write(path) for path in sys.argv[1:-1]), connect]:
    try:
        act().close()
        print("ok")
    except OSError as e:
        print(errno.errorcode[e.errno])
"""
"""A served command: writes each path given, connects to the port given last; says how each went."""


@pytest.mark.parametrize(("network", "connected"), [((), "ECONNREFUSED"), (("--sandbox-network", "on"), "ok")])
def test_with_serve_terminal_the_served_commands_run_in_the_sandbox_too_without_network_unless_on(  # noqa: PLR0917
    bwrap: str,
    cli: Cli,
    listener: int,
    network: tuple[str, ...],
    connected: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    state = tmp_path_factory.mktemp("agent-state")  # the agent's state directory: writable to it, not to commands
    paths = [cli.work / "inside.txt", cli.tmp / "writable.txt", Path("/etc/tinyacp-x"), state / "settings.json"]
    call = {"command": sys.executable, "args": ["-c", SERVED, *map(str, paths), str(listener)]}

    def request(request_id: int, method: str, **params: Any) -> dict[str, Any]:
        return {"op": "request", "id": request_id, "method": method, "params": {"sessionId": "s1", **params}}

    steps: list[dict[str, Any]] = [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": INIT_RESULT},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": "s1"}},
        {"op": "expect", "method": "session/prompt"},
        request(1, "terminal/create", **call),
        request(2, "terminal/wait_for_exit", terminalId="term-1"),
        request(3, "terminal/output", terminalId="term-1"),
        request(4, "terminal/release", terminalId="term-1"),
        end_turn(),
    ]
    command = shlex.split(cli.scripted(steps))
    write_config(
        cli,
        f"[agents.scripted]\ncommand = {json.dumps(command)}\n"
        f"[agents.scripted.sandbox]\nwritable = [{json.dumps(str(state))}]\n",
    )
    # The scripted agent reads its script and writes its log beside the work folder: --writable makes them visible.
    run = ("prompt", "--agent", "scripted", "--writable", str(cli.tmp), *network, "--serve", "terminal", "--yes")
    done = cli.run(*run, "go")
    assert done.returncode == 0, done.stderr.decode()
    said = done.stderr.decode()
    assert f"writable {cli.work}, {state}, {cli.tmp}" in said  # the agent's sandbox, then its commands'
    network_word = "shared" if connected == "ok" else "off (loopback only)"
    commands = f"served commands in a sandbox (bubblewrap) too: writable the session's folders, {cli.tmp}; network"
    assert f"{commands} {network_word}" in said, said
    log = [json.loads(line) for line in (cli.tmp / "agent.log").read_text().splitlines()]
    answers = {message["id"]: message for message in log if "id" in message and "method" not in message}
    inside, writable, etc, in_state, connect = answers[3]["result"]["output"].splitlines()
    assert (inside, writable, etc) == ("ok", "ok", "EROFS")
    assert in_state in ("EROFS", "ENOENT")  # read-only, or hidden under the commands' private /tmp
    assert connect == connected
    assert paths[0].exists() and paths[1].exists()
    assert not paths[2].exists() and not paths[3].exists()
