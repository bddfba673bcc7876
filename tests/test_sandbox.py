"""The agent inside bubblewrap, for real: a scripted agent (``agents/sandbox_agent.py``) tries to write, read,
connect and get out, and says how each try went; both clients.

These tests need ``bwrap`` (Debian's ``bubblewrap``) and user namespaces. Without them they are skipped, except
where ``TINYACP_REQUIRE_BWRAP=1`` (CI sets it, and installs bwrap): there a missing bwrap is a failure. They run
as root where the suite does (CI machines often do): the agent must stay confined all the same.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import AGENTS, INIT_RESULT, ClientLike, Scripted, end_turn, wait_for
from helpers.sandbox import SANDBOX_AGENT, require_bwrap
from tinyacp import _sandbox

AGENT = SANDBOX_AGENT
TURN = 90.0
"""A turn's deadline: a probe may run a program (30 s at most); the machine may be loaded."""


@pytest.fixture(scope="module")
def bwrap() -> str:
    """bwrap's path; skipped without it, failed without it under ``TINYACP_REQUIRE_BWRAP=1``."""
    return require_bwrap()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The agent's cwd, with a sibling folder beside it."""
    (tmp_path / "work").mkdir()
    (tmp_path / "sibling").mkdir()
    return tmp_path / "work"


Probe = dict[str, Any]


def run(client: ClientLike, cwd: Path, probes: list[Probe]) -> list[dict[str, Any]]:
    """One turn of the sandbox agent: its results, one per probe."""
    client.initialize()
    session = client.new_session(str(cwd))
    result = client.prompt(session.id, json.dumps(probes), timeout=TURN)
    results: list[dict[str, Any]] = json.loads(result.text)
    assert len(results) == len(probes)
    return results


def plain(work: Path) -> tinyacp.Options:
    """The sandbox agent's options with the default sandbox."""
    return tinyacp.Options(command=AGENT, cwd=str(work), observer=tinyacp.BaseObserver(), sandbox=tinyacp.Bubblewrap())


def sandboxed(make_client: Callable[..., ClientLike], cwd: Path, **sandbox: Any) -> ClientLike:
    return make_client(command=AGENT, cwd=str(cwd), sandbox=tinyacp.Bubblewrap(**sandbox))


def test_the_agent_writes_in_its_cwd_and_writable_and_nowhere_else(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path, tmp_path: Path
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    sibling = tmp_path / "sibling"
    (work / "escape").symlink_to(sibling)
    (work / "escape-file").symlink_to(sibling / "through-a-file-link")
    name = f"tinyacp-sandbox-{uuid.uuid4().hex}"
    home = Path(os.path.expanduser("~"))
    outside = [home / name, Path("/etc") / name, sibling / name, sibling / f"{name}-link"]
    probes = [
        {"op": "write", "path": str(work / "inside.txt")},
        {"op": "write", "path": str(extra / "extra.txt")},
        {"op": "write", "path": str(home / name)},
        {"op": "write", "path": f"/etc/{name}"},
        {"op": "write", "path": str(sibling / name)},
        {"op": "write", "path": str(work / "escape" / f"{name}-link")},
        {"op": "write", "path": str(work / "escape-file")},
    ]
    results = run(sandboxed(make_client, work, writable=[extra]), work, probes)
    assert results[0] == {"ok": True} and results[1] == {"ok": True}
    assert (work / "inside.txt").read_text() == "written from inside the sandbox\n"
    assert (extra / "extra.txt").exists()
    for probe, result in zip(probes[2:], results[2:], strict=True):
        assert result["ok"] is False, probe
        assert result["error"] in ("EROFS", "EACCES", "ENOENT"), (probe, result)
    for path in outside:
        assert not path.exists(), path
    assert not (sibling / "through-a-file-link").exists()


def test_without_readable_the_agent_sees_everything_and_with_it_only_what_was_given(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("shared notes\n")
    probes = [{"op": "read", "path": str(secret)}, {"op": "read", "path": str(shared / "notes.txt")}]
    # private_tmp=False: tmp_path lies under /tmp, which would be hidden anyway.
    seen = run(sandboxed(make_client, work, private_tmp=False), work, probes)
    assert seen == [{"ok": True, "text": "the secret\n"}, {"ok": True, "text": "shared notes\n"}]
    readable = [sys.prefix, sys.base_prefix, str(AGENTS), str(shared)]
    confined = run(sandboxed(make_client, work, private_tmp=False, readable=readable), work, probes)
    assert confined[0] == {"ok": False, "error": "ENOENT"}
    assert confined[1] == {"ok": True, "text": "shared notes\n"}


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 outside the sandbox; its port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def test_network_false_cuts_the_agent_off_and_the_default_shares_it(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path, listener: int
) -> None:
    probes = [{"op": "connect", "host": "127.0.0.1", "port": listener}]
    assert run(sandboxed(make_client, work), work, probes) == [{"ok": True}]
    assert run(sandboxed(make_client, work, network=False), work, probes) == [{"ok": False, "error": "ECONNREFUSED"}]


def descendants(pid: int) -> set[int]:
    """Every live process under ``pid``, found by walking /proc's parent links."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(b")") + 2 :].split()
            if fields[0] not in (b"Z", b"X"):
                parents[int(name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rindex(b")") + 2 : state.rindex(b")") + 3] not in (b"Z", b"X")


def test_the_process_tree_dies_with_the_client_even_what_left_the_session(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path
) -> None:
    client = sandboxed(make_client, work)
    results = run(client, work, [{"op": "spawn"}])
    assert results[0]["ok"] is True
    tree = descendants(client.pid)
    assert any(Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x0060\x00" for pid in tree), tree
    assert len(tree) >= 3  # the sandbox's init, the agent, the sleeper that called setsid
    client.close()
    wait_for(lambda: not any(alive(pid) for pid in tree), timeout=30, what="the sandbox's processes gone")


def test_as_root_or_not_the_agent_cannot_remount_change_uid_or_unshare_its_way_out(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path
) -> None:
    name = f"tinyacp-escape-{uuid.uuid4().hex}"
    target = f"/etc/{name}"
    probes: list[Probe] = [
        {"op": "whoami"},
        {"op": "run", "argv": ["mount", "-o", "remount,rw,bind", "/"]},
        {"op": "run", "argv": ["mount", "-o", "remount,rw", "/etc"]},
        {"op": "setuid", "uid": 0},
        {"op": "run", "argv": ["unshare", "-Urm", "sh", "-c", f"mount -o remount,rw,bind / && touch {target}"]},
        {"op": "run", "argv": ["unshare", "-Urm", "sh", "-c", f"mount -o remount,rw /etc && touch {target}"]},
        {"op": "run", "argv": ["unshare", "-Ur", "touch", target]},
        {"op": "write", "path": target},
    ]
    results = run(sandboxed(make_client, work), work, probes)
    whoami = results[0]
    assert whoami["uid"] != 0 and whoami["gid"] != 0
    assert int(whoami["cap_eff"], 16) == 0  # not one capability
    for probe, result in zip(probes[1:], results[1:], strict=True):
        assert result["ok"] is False, (probe, result)
    assert results[3]["error"] in ("EPERM", "EINVAL")  # EINVAL: uid 0 is not even mapped in the namespace
    assert not Path(target).exists()


def test_a_session_outside_the_roots_is_refused_and_never_reaches_the_agent(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path, tmp_path: Path
) -> None:
    client = sandboxed(make_client, work)
    client.initialize()
    with pytest.raises(tinyacp.OutsideSandbox, match="outside the sandbox's writable roots"):
        client.new_session(str(tmp_path / "sibling"))
    # The client stays usable, and the same call inside the roots goes through.
    assert client.new_session(str(work)).id == "s1"


def test_an_agent_made_in_a_thread_that_ended_keeps_running(bwrap: str, work: Path) -> None:
    """bwrap's --die-with-parent follows the thread that started it: the client must not depend on the caller's."""
    made: list[tinyacp.Client] = []
    options = plain(work)
    thread = threading.Thread(target=lambda: made.append(tinyacp.Client(options)))
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    with made[0] as client:
        assert client.initialize().protocol_version == 1
    assert client.returncode is not None


def test_a_missing_bwrap_is_sandbox_unavailable_with_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, work: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    options = plain(work)
    with pytest.raises(tinyacp.SandboxUnavailable, match="apt-get install bubblewrap"):
        tinyacp.Client(options)
    with pytest.raises(tinyacp.SandboxUnavailable, match="apt-get install bubblewrap"):
        tinyacp.AsyncClient(options)


def test_a_bwrap_that_cannot_make_namespaces_is_sandbox_unavailable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, work: Path
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    options = plain(work)
    with pytest.raises(tinyacp.SandboxUnavailable, match=r"No permissions to create new namespace.*user namespaces"):
        tinyacp.Client(options)


def test_not_linux_is_sandbox_unavailable(monkeypatch: pytest.MonkeyPatch, work: Path) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    options = plain(work)
    with pytest.raises(tinyacp.SandboxUnavailable, match="needs Linux"):
        tinyacp.Client(options)


def test_a_missing_writable_directory_or_program_is_refused_before_anything_starts(
    bwrap: str, work: Path, tmp_path: Path
) -> None:
    missing = tinyacp.Bubblewrap(writable=[tmp_path / "nowhere"])
    options = tinyacp.Options(command=AGENT, cwd=str(work), observer=tinyacp.BaseObserver(), sandbox=missing)
    with pytest.raises(tinyacp.SandboxUnavailable, match="nowhere' does not exist"):
        tinyacp.Client(options)
    options = tinyacp.Options(
        command=["no-such-agent-here"], cwd=str(work), observer=tinyacp.BaseObserver(), sandbox=tinyacp.Bubblewrap()
    )
    with pytest.raises(tinyacp.SpawnError, match="no-such-agent-here"):
        tinyacp.Client(options)


def test_the_journal_says_the_epoch_was_sandboxed_and_how(tmp_path: Path) -> None:
    how = {"kind": "bubblewrap", "bwrap": ["--unshare-user", "--unshare-net"], "writable": ["/w"], "network": False}
    with tinyacp.JsonlJournal(tmp_path / "run.jsonl") as journal:
        journal.begin_epoch()
        journal.begin_epoch(sandbox=how)
    first, second = (json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines())
    assert "sandbox" not in first
    assert second["type"] == "epoch" and second["epoch"] == 2 and second["sandbox"] == how


def test_a_batch_runs_its_turns_in_the_sandbox_and_records_the_exact_bwrap_options(
    bwrap: str, work: Path, tmp_path: Path
) -> None:
    from tinyacp.batch import run_batch

    state = tmp_path / "agent-state"
    state.mkdir()

    @dataclasses.dataclass(frozen=True)
    class Entry:
        command: tuple[str, ...] = tuple(AGENT)
        env: Mapping[str, str] = dataclasses.field(default_factory=dict)
        sandbox_writable: tuple[str, ...] = (str(state),)

    probes = json.dumps([{"op": "write", "path": str(state / "s.txt")}, {"op": "write", "path": "/etc/x"}])
    summary = run_batch(
        [{"id": "one", "prompt": probes}],
        tmp_path / "out",
        agent="probe",
        agents={"probe": Entry()},
        cwd=str(work),
        sandbox=tinyacp.Bubblewrap(network=False),
    )
    assert summary.all_ok
    record = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert json.loads(record["text"]) == [{"ok": True}, {"ok": False, "error": "EROFS"}]
    options = record["sandbox"]
    assert options[:2] == ["--unshare-user", "--uid"] and "--unshare-net" in options
    assert ["--bind", str(state), str(state)] == options[options.index(str(state)) - 1 : options.index(str(state)) + 2]


def test_a_batch_without_bwrap_is_refused_before_its_first_turn(
    monkeypatch: pytest.MonkeyPatch, work: Path, tmp_path: Path
) -> None:
    from tinyacp.batch import run_batch

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(tinyacp.SandboxUnavailable, match="bubblewrap"):
        run_batch([{"id": "one", "prompt": "[]"}], tmp_path / "out", agent=AGENT, sandbox=tinyacp.Bubblewrap())
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_batch_whose_served_commands_need_bwrap_is_refused_before_its_first_turn_without_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tinyacp.batch import run_batch

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    serve = tinyacp.Serve(terminal=True, sandbox=tinyacp.Bubblewrap())
    with pytest.raises(tinyacp.SandboxUnavailable, match="bubblewrap"):
        run_batch([{"id": "one", "prompt": "[]"}], tmp_path / "out", agent=AGENT, serve=serve)
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_symlinked_root_is_bound_at_its_real_path_and_a_session_is_taken_under_either_name(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    cwd, bound, allowed = _sandbox.prepare_roots(tinyacp.Bubblewrap(), link)
    assert cwd == str(link)
    assert bound == (str(real),)
    assert set(allowed) == {str(link), str(real)}
    _sandbox.check_within(str(link / "sub"), [str(real / "x")], allowed)
    with pytest.raises(tinyacp.OutsideSandbox):
        _sandbox.check_within(str(tmp_path), (), allowed)


def test_bubblewrap_pickles_for_a_batch_on_other_nodes() -> None:
    import pickle

    sandbox = tinyacp.Bubblewrap(writable=["/srv/out"], network=False, extra_args=["--setenv", "A", "1"])
    assert pickle.loads(pickle.dumps(sandbox)) == sandbox


def test_a_supervised_agent_runs_in_the_sandbox_too(
    bwrap: str, make_client: Callable[..., ClientLike], work: Path
) -> None:
    client = make_client(command=AGENT, cwd=str(work), sandbox=tinyacp.Bubblewrap(), supervise=True)
    results = run(client, work, [{"op": "write", "path": "/etc/tinyacp-x"}, {"op": "whoami"}])
    assert results[0] == {"ok": False, "error": "EROFS"}
    assert results[1]["uid"] != 0 and int(results[1]["cap_eff"], 16) == 0


SERVED_PROBE = """
import errno, json, os, socket, sys
def attempt(act):
    try:
        act()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def write(path):
    with open(path, "w") as file:
        file.write("from a served command")
def connect():
    socket.create_connection(("127.0.0.1", int(sys.argv[-1])), timeout=5).close()
print(json.dumps([*(attempt(lambda path=path: write(path)) for path in sys.argv[1:-1]), attempt(connect), os.getuid()]))
"""


def served_request(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    """A step of the scripted agent: a request of session s1, whose answer it waits for."""
    return {"op": "request", "id": request_id, "method": method, "params": {"sessionId": "s1", **params}}


def served_turn(*middle: dict[str, Any], prompts: int = 1) -> list[dict[str, Any]]:
    """The scripted agent's steps: a session s1, then ``middle`` in its first turn (and more empty turns)."""
    later = [step for _ in range(prompts - 1) for step in ({"op": "expect", "method": "session/prompt"}, end_turn())]
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": INIT_RESULT},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": "s1"}},
        {"op": "expect", "method": "session/prompt"},
        *middle,
        end_turn(),
        *later,
    ]


def answers_of(agent: Scripted) -> dict[int, dict[str, Any]]:
    """The client's answers to the scripted agent's requests, by id."""
    return {message["id"]: message for message in agent.received() if "id" in message and "method" not in message}


def serving(
    make_client: Callable[..., ClientLike], agent: Scripted, sandbox: tinyacp.Bubblewrap, roots: Sequence[Path] = ()
) -> ClientLike:
    """A client serving terminals in ``sandbox`` (with more ``roots``), every command allowed."""
    serve = tinyacp.Serve(terminal=True, roots=roots, sandbox=sandbox)
    policy = tinyacp.PermissionPolicy(kinds=["execute"])
    return make_client(command=agent.argv, serve=serve, policy=policy, kill_grace=1.0)


def our_children() -> set[int]:
    """The test process's child processes, zombies included."""
    mine = os.getpid()
    children = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == mine:
                children.add(int(name))
    return children


@pytest.mark.parametrize(
    ("network", "private_tmp", "connected"),
    [(None, True, "ECONNREFUSED"), (False, False, "ECONNREFUSED"), (True, False, "ok")],
    ids=["network-default", "network-off", "network-on"],
)
def test_a_served_terminal_command_is_confined_the_same_way_and_gets_no_network_by_default(  # noqa: PLR0917
    bwrap: str,
    make_client: Callable[..., ClientLike],
    scripted: Callable[..., Scripted],
    work: Path,
    listener: int,
    network: bool | None,
    private_tmp: bool,
    connected: str,
) -> None:
    name = f"tinyacp-served-{uuid.uuid4().hex}"
    outside = [f"/etc/{name}", str(Path.home() / name), str(work.parent / "sibling" / name)]
    served_root = work.parent / "served-root"  # Serve.roots: one of the session's roots too
    served_root.mkdir()
    paths = [str(work / "inside.txt"), str(served_root / "inside.txt"), *outside]
    agent = scripted(
        served_turn(
            served_request(
                1, "terminal/create", command=sys.executable, args=["-c", SERVED_PROBE, *paths, str(listener)]
            ),
            served_request(2, "terminal/wait_for_exit", terminalId="term-1"),
            served_request(3, "terminal/output", terminalId="term-1"),
            served_request(4, "terminal/release", terminalId="term-1"),
        )
    )
    before = our_children()
    sandbox = tinyacp.Bubblewrap(network=network, private_tmp=private_tmp)
    client = serving(make_client, agent, sandbox, roots=[served_root])
    client.initialize()
    client.new_session(str(work))
    client.prompt("s1", "go", timeout=TURN)
    client.close()
    answers = answers_of(agent)
    assert answers[2]["result"] == {"exitCode": 0, "signal": None}, answers
    inside, in_root, etc, home, sibling, connect, uid = json.loads(answers[3]["result"]["output"])
    assert inside == "ok" and (work / "inside.txt").read_text() == "from a served command"
    assert in_root == "ok" and (served_root / "inside.txt").read_text() == "from a served command"
    assert (etc, home) == ("EROFS", "EROFS")
    # The sibling lies under /tmp (pytest's tmp_path): hidden by a private /tmp, read-only without one.
    assert sibling == ("ENOENT" if private_tmp else "EROFS")
    assert connect == connected  # network=None: a served command gets no network (unlike the agent)
    assert uid != 0
    for path in outside:
        assert not Path(path).exists(), path
    wait_for(lambda: not our_children() - before, timeout=20, what="every child process gone and reaped")


ESCAPING = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "escapee", sys.argv[1]], start_new_session=True)
time.sleep(600)
"""
"""A command that leaves its session (and group) with a child of its own, then waits: argv[1] names them."""


def escapees(token: str) -> list[int]:
    """The live processes (on the host, whatever namespace they are in) started by :data:`ESCAPING` as ``token``."""
    needle = b"\0escapee\0" + token.encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if needle in cmdline and state[state.rindex(b")") + 2 : state.rindex(b")") + 3] not in (b"Z", b"X"):
                found.append(int(name))
    return found


def running(token: str) -> bool:
    return len(escapees(token)) == 1


def gone(token: str) -> bool:
    return not escapees(token)


def test_kill_release_and_close_stop_a_sandboxed_command_and_everything_it_started(
    bwrap: str, make_client: Callable[..., ClientLike], scripted: Callable[..., Scripted], work: Path
) -> None:
    tokens = [uuid.uuid4().hex for _ in range(3)]

    def create(request_id: int, token: str) -> dict[str, Any]:
        return served_request(request_id, "terminal/create", command=sys.executable, args=["-c", ESCAPING, token])

    waited = {"sessionId": "s1", "terminalId": "term-1"}
    agent = scripted(
        [
            *served_turn(create(1, tokens[0]), create(2, tokens[1]), create(3, tokens[2])),
            {"op": "expect", "method": "session/prompt"},
            {
                "op": "send",
                "message": {"jsonrpc": "2.0", "id": 4, "method": "terminal/wait_for_exit", "params": waited},
            },
            served_request(5, "terminal/kill", terminalId="term-1"),
            {"op": "await", "id": 4},
            served_request(6, "terminal/release", terminalId="term-2"),
            served_request(7, "terminal/output", terminalId="term-1"),
            end_turn(),
        ]
    )
    before = our_children()
    client = serving(make_client, agent, tinyacp.Bubblewrap())
    client.initialize()
    client.new_session(str(work))
    client.prompt("s1", "start three", timeout=TURN)
    for token in tokens:
        wait_for(functools.partial(running, token), timeout=30, what=f"the escapee of {token} up")
    client.prompt("s1", "kill one, release one", timeout=TURN)
    for token in tokens[:2]:
        wait_for(functools.partial(gone, token), timeout=20, what=f"the escapee of {token} gone")
    assert len(escapees(tokens[2])) == 1  # the third one runs until the client goes
    answers = answers_of(agent)
    assert answers[7]["result"]["exitStatus"]["signal"] in ("SIGTERM", "SIGKILL"), answers
    assert "result" in answers[5] and "result" in answers[6], answers
    client.close()
    wait_for(functools.partial(gone, tokens[2]), timeout=20, what="the third escapee gone with the client")
    wait_for(lambda: not our_children() - before, timeout=20, what="every child process gone and reaped")


def test_a_served_command_is_not_started_outside_the_sandbox_when_bwrap_goes_away(
    bwrap: str,
    make_client: Callable[..., ClientLike],
    scripted: Callable[..., Scripted],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = work / "ran"
    code = f"open({str(marker)!r}, 'w').close()"
    agent = scripted(served_turn(served_request(1, "terminal/create", command=sys.executable, args=["-c", code])))
    client = serving(make_client, agent, tinyacp.Bubblewrap())
    client.initialize()
    client.new_session(str(work))
    monkeypatch.setenv("PATH", str(work / "empty"))  # bwrap is no longer found: the command must not start at all
    client.prompt("s1", "go", timeout=TURN)
    client.close()
    answer = answers_of(agent)[1]
    assert answer["error"]["message"].startswith("cannot start the command: no bwrap"), answer
    assert not marker.exists()


@pytest.mark.parametrize(
    ("cause", "said"),
    [
        ("missing", "apt-get install bubblewrap"),
        ("broken", r"No permissions to create new namespace.*user namespaces"),
        ("not-linux", "needs Linux"),
    ],
)
@pytest.mark.parametrize("kind", [tinyacp.Client, tinyacp.AsyncClient], ids=["sync", "async"])
def test_serve_with_a_sandbox_is_refused_when_the_client_is_made_where_bwrap_cannot_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cause: str, said: str, kind: type[Any]
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    if cause == "broken":
        (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
        (fake / "bwrap").chmod(0o755)
    if cause == "not-linux":
        monkeypatch.setattr(sys, "platform", "darwin")
    else:
        monkeypatch.setenv("PATH", str(fake))
    started = tmp_path / "started"
    options = tinyacp.Options(
        command=[sys.executable, "-c", f"open({str(started)!r}, 'w').close()"],
        observer=tinyacp.BaseObserver(),
        serve=tinyacp.Serve(terminal=True, sandbox=tinyacp.Bubblewrap()),
    )
    with pytest.raises(tinyacp.SandboxUnavailable, match=said):
        kind(options)
    assert not started.exists()  # nothing started: not the agent, and so no command either


def test_serve_takes_only_a_bubblewrap_as_its_sandbox_and_pickles_with_it() -> None:
    import pickle

    with pytest.raises(TypeError, match="Bubblewrap"):
        tinyacp.Serve(terminal=True, sandbox={"writable": []})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tinyacp.Serve(True, False, True, [], None, (), 8, 1 << 20, 1 << 22, None, tinyacp.Bubblewrap())  # type: ignore[call-arg]
    serve = tinyacp.Serve(
        terminal=True, roots=["/srv"], sandbox=tinyacp.Bubblewrap(writable=["/srv/out"], network=True)
    )
    assert serve.sandbox == tinyacp.Bubblewrap(writable=["/srv/out"], network=True)
    assert tinyacp.Serve(terminal=True).sandbox is None
    again = pickle.loads(pickle.dumps(serve))
    assert again == serve and again.sandbox == serve.sandbox


def test_a_program_under_tmp_stays_visible_read_only_over_the_private_tmp(tmp_path: Path) -> None:
    venv = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        (venv / "bin").mkdir()
        python = venv / "bin" / "python"
        python.write_text("")
        script = venv / "agent.py"
        script.write_text("")
        top = str(venv)
        assert _sandbox.program_dirs([str(python), str(script), "--flag", "word"], str(tmp_path)) == (top,)
        assert _sandbox.program_dirs(["/bin/sh", "-c", "echo hi"], str(tmp_path)) == ()
        args = _sandbox.bwrap_args(tinyacp.Bubblewrap(), cwd=str(tmp_path), network=True, program_dirs=(top,))
        tmpfs = args.index("/tmp", args.index("--tmpfs"))
        assert args[tmpfs + 1 : tmpfs + 4] == ["--ro-bind", top, top]  # on top of the private /tmp, read-only
        hidden = _sandbox.bwrap_args(
            tinyacp.Bubblewrap(private_tmp=False), cwd=str(tmp_path), network=True, program_dirs=(top,)
        )
        assert top not in hidden  # no private /tmp: nothing to bind back
    finally:
        shutil.rmtree(venv)
