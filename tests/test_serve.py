"""Files and terminals served to the agent (``Options(serve=...)``), through both clients, with a scripted agent
that sends every request of the seven with good and hostile parameters: what was refused did not happen, what
was allowed did, every decision was recorded before the act, nothing survives the client, every line we wrote
validates against the v1 schema."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import INIT_RESULT, Recorder, Scripted, end_turn, wait_for
from helpers import agent_request as request
from helpers import turn_steps as steps
from helpers.schema import check_client_line

PARTS = {
    "fs/read_text_file": "ReadTextFileResponse",
    "fs/write_text_file": "WriteTextFileResponse",
    "terminal/create": "CreateTerminalResponse",
    "terminal/output": "TerminalOutputResponse",
    "terminal/wait_for_exit": "WaitForTerminalExitResponse",
    "terminal/kill": "KillTerminalResponse",
    "terminal/release": "ReleaseTerminalResponse",
}


def _children() -> list[int]:
    """Our child processes, zombies included (an agent, a terminal's command or its supervisor)."""
    mine = os.getpid()
    children = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    data = stat.read()
            except OSError:
                continue
            if int(data[data.rindex(b")") + 2 :].split()[1]) == mine:
                children.append(int(name))
    return children


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    """Whatever a test started (the agent, every terminal) is gone and reaped once its clients are closed."""
    before = set(_children())
    yield
    wait_for(lambda: not set(_children()) - before, timeout=20, what="every child process gone and reaped")


class ServeRecorder(Recorder):
    """Records the serve calls too; ``answer`` decides ``on_serve``; ``at_decision`` runs inside
    ``on_serve_decision`` (to see that nothing happened yet)."""

    def __init__(
        self,
        answer: Callable[[tinyacp.ServeRequest], bool | None] | None = None,
        at_decision: Callable[[tinyacp.ServeRequest], None] | None = None,
    ) -> None:
        super().__init__()
        self._answer = answer
        self._at_decision = at_decision

    def on_serve(self, request: tinyacp.ServeRequest) -> bool | None:
        self._add("serve", request)
        return self._answer(request) if self._answer else None

    def on_serve_decision(self, request: tinyacp.ServeRequest) -> None:
        self._add("serve_decision", request)
        if self._at_decision:
            self._at_decision(request)

    def decisions(self) -> list[tinyacp.ServeRequest]:
        return self.of("serve_decision")


def run_turn(  # noqa: PLR0917  the tests pass the turn's parts in order
    make_client: Callable[..., Any],
    agent: Scripted,
    cwd: Path,
    serve: tinyacp.Serve,
    observer: tinyacp.BaseObserver,
    policy: tinyacp.PermissionPolicy | None = None,
    timeout: float = 60,
) -> dict[int, dict[str, Any]]:
    """One turn of the scripted agent; the client's answers to its requests, by id."""
    client = make_client(
        tinyacp.Options(
            command=agent.argv,
            observer=observer,
            serve=serve,
            policy=policy or tinyacp.PermissionPolicy(),
            kill_grace=1.0,
        )
    )
    client.initialize()
    client.new_session(str(cwd))
    client.prompt("s1", "go", timeout=timeout)
    client.close()
    return {message["id"]: message for message in agent.received() if "method" not in message and "id" in message}


def run_commands(
    make_client: Callable[..., Any], agent: Scripted, cwd: Path, observer: tinyacp.BaseObserver
) -> dict[int, dict[str, Any]]:
    """One turn with terminals served and every command allowed by kind: the client's answers, by id."""
    serve, policy = tinyacp.Serve(terminal=True), tinyacp.PermissionPolicy(kinds=["execute"])
    return run_turn(make_client, agent, cwd, serve, observer, policy)


def check_answers(recorder: Recorder) -> None:
    """Every answer to a served request validates against the v1 schema (its result part, or Error)."""
    methods = {message.id: message.method for message in recorder.of("message") if message.method in PARTS}
    for sent in recorder.of("send"):
        if sent.method is None and sent.id in methods:
            message = json.loads(sent.raw)
            check_client_line(sent.raw, "Error" if "error" in message else PARTS[methods[sent.id]])


def refused(answer: dict[str, Any]) -> bool:
    return "error" in answer and "refused by the client's rules" in answer["error"]["message"]


# ------------------------------------------------------------------------------------------------------------------
# What is advertised.


@pytest.mark.parametrize(
    ("serve", "fs", "terminal"),
    [
        (tinyacp.Serve(), {"readTextFile": False, "writeTextFile": False}, False),
        (tinyacp.Serve(read=True), {"readTextFile": True, "writeTextFile": False}, False),
        (tinyacp.Serve(write=True, terminal=True), {"readTextFile": False, "writeTextFile": True}, True),
    ],
)
def test_initialize_advertises_exactly_what_is_served(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], serve: tinyacp.Serve, fs: Any, terminal: bool
) -> None:
    agent = scripted([{"op": "expect", "method": "initialize"}, {"op": "reply", "result": INIT_RESULT}])
    recorder = Recorder()
    client = make_client(tinyacp.Options(command=agent.argv, observer=recorder, serve=serve))
    client.initialize()
    (sent,) = [message for message in recorder.of("send") if message.method == "initialize"]
    capabilities = check_client_line(sent.raw, "InitializeRequest")["params"]["clientCapabilities"]
    assert capabilities["fs"] == fs
    assert capabilities["terminal"] is terminal


def test_nothing_is_served_by_default_an_unoffered_write_is_refused_and_recorded(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    target = tmp_path / "new.txt"
    agent = scripted(steps(request(1, "fs/write_text_file", path=str(target), content="x")))
    recorder = ServeRecorder()
    answers = run_turn(
        make_client, agent, tmp_path, tinyacp.Serve(), recorder, tinyacp.PermissionPolicy(allow_all=True)
    )
    assert answers[1]["error"]["code"] == -32601
    assert not target.exists()
    (line,) = [message for message in recorder.of("message") if message.method == "fs/write_text_file"]
    assert line.kind == tinyacp.MessageKind.REQUEST
    assert recorder.decisions() == []


# ------------------------------------------------------------------------------------------------------------------
# Reads and writes.


def test_a_read_allowed_by_kind_answers_the_lines_asked(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    agent = scripted(
        steps(
            request(1, "fs/read_text_file", path=str(tmp_path / "a.txt")),
            request(2, "fs/read_text_file", path=str(tmp_path / "a.txt"), line=2, limit=2),
            request(3, "fs/read_text_file", path=str(tmp_path / "missing.txt")),
        )
    )
    recorder = ServeRecorder()
    answers = run_turn(
        make_client, agent, tmp_path, tinyacp.Serve(read=True), recorder, tinyacp.PermissionPolicy(kinds=["read"])
    )
    assert answers[1]["result"] == {"content": "one\ntwo\nthree\nfour\n"}
    assert answers[2]["result"] == {"content": "two\nthree\n"}
    assert answers[3]["error"]["code"] == -32002
    assert [(d.allowed, d.decided_by) for d in recorder.decisions()] == [(True, "policy")] * 3
    decided = [m for m in recorder.of("send") if m.method is None and m.id in (1, 2)]
    assert {m.decided_by for m in decided} == {"policy"}
    check_answers(recorder)


@pytest.mark.parametrize(
    "hostile",
    [
        "outside",
        "dotdot",
        "relative",
        "symlink_dir",
        "symlink_file",
        "fifo",
        "device",
        "directory",
        "not_utf8",
        "too_big",
    ],
)
def test_a_hostile_read_is_refused_or_fails_and_nothing_leaks(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path, hostile: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    paths = {
        "outside": str(secret),
        "dotdot": str(root / ".." / "secret.txt"),
        "relative": "secret.txt",
        "symlink_dir": str(root / "link" / "secret.txt"),
        "symlink_file": str(root / "file-link"),
        "fifo": str(root / "fifo"),
        "device": "/dev/zero",
        "directory": str(root),
        "not_utf8": str(root / "latin1.txt"),
        "too_big": str(root / "big.txt"),
    }
    (root / "link").symlink_to(tmp_path)
    (root / "file-link").symlink_to(secret)
    os.mkfifo(root / "fifo")
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "big.txt").write_text("x" * 5000)
    agent = scripted(steps(request(1, "fs/read_text_file", path=paths[hostile])))
    recorder = ServeRecorder(answer=lambda request: True)
    answers = run_turn(make_client, agent, root, tinyacp.Serve(read=True, read_limit=4096), recorder, timeout=30)
    answer = answers[1]
    assert "error" in answer, answer
    assert "SECRET" not in json.dumps(answer)
    if hostile in ("outside", "dotdot", "symlink_dir", "symlink_file", "device"):
        assert refused(answer)
        (decision,) = recorder.decisions()
        assert (decision.allowed, decision.decided_by) == (False, "confinement")
        assert recorder.of("serve") == []  # confinement is not the observer's to override
    check_answers(recorder)


def test_a_write_is_decided_and_recorded_with_the_prior_state_before_the_file_changes(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("old text\n")
    target.chmod(0o640)
    fresh = tmp_path / "fresh.txt"
    seen: list[tuple[str, bool]] = []

    def at_decision(request: tinyacp.ServeRequest) -> None:
        assert request.path is not None
        path = Path(request.path)
        seen.append((path.read_text() if path.exists() else "<absent>", request.allowed))

    agent = scripted(
        steps(
            request(1, "fs/write_text_file", path=str(target), content="new text\n"),
            request(2, "fs/write_text_file", path=str(fresh), content="é\n"),
        )
    )
    recorder = ServeRecorder(at_decision=at_decision)
    journal = tinyacp.JsonlJournal(tmp_path / "run.jsonl")
    answers = run_turn(
        make_client,
        agent,
        tmp_path,
        tinyacp.Serve(write=True),
        _Both(recorder, journal),
        tinyacp.PermissionPolicy(kinds=["edit"]),
    )
    journal.close()
    assert answers[1]["result"] == {} and answers[2]["result"] == {}
    assert seen == [("old text\n", True), ("<absent>", True)]
    assert target.read_text() == "new text\n" and fresh.read_text() == "é\n"
    assert target.stat().st_mode & 0o777 == 0o640
    first, second = recorder.decisions()
    assert first.prior == tinyacp.FileState(True, 9, hashlib.sha256(b"old text\n").hexdigest())
    assert second.prior == tinyacp.FileState(False)
    records = tinyacp.JsonlJournal.read(tmp_path / "run.jsonl")
    kinds = [r.get("type") if r.get("type") != "line" else f"{r['dir']}:{r.get('method', r['kind'])}" for r in records]
    at = kinds.index("in:fs/write_text_file")
    assert kinds[at + 1] == "serve_decision" and kinds[at + 2] == "out:response"
    decision = records[at + 1]
    assert decision["prior"]["sha256"] == hashlib.sha256(b"old text\n").hexdigest()
    assert decision["decided_by"] == "policy" and decision["allowed"] is True
    assert records[at + 2]["decided_by"] == "policy"
    assert not [name for name in os.listdir(tmp_path) if "tinyacp-" in name]  # no temporary file left
    check_answers(recorder)


@pytest.mark.parametrize("hostile", ["default", "observer", "outside", "symlink", "dotdot", "fifo"])
def test_a_refused_write_does_not_happen(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path, hostile: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (root / "link.txt").symlink_to(outside)
    os.mkfifo(root / "fifo")
    paths = {
        "default": str(root / "new.txt"),
        "observer": str(root / "new.txt"),
        "outside": str(outside),
        "symlink": str(root / "link.txt"),
        "dotdot": str(root / ".." / "outside.txt"),
        "fifo": str(root / "fifo"),
    }
    agent = scripted(steps(request(1, "fs/write_text_file", path=paths[hostile], content="HACKED")))
    recorder = ServeRecorder(answer=(lambda request: False) if hostile == "observer" else None)
    policy = tinyacp.PermissionPolicy(kinds=["read"] if hostile == "default" else ["edit"])
    answers = run_turn(make_client, agent, root, tinyacp.Serve(write=True), recorder, policy, timeout=30)
    assert refused(answers[1]), answers[1]
    assert outside.read_text() == "keep"
    assert not (root / "new.txt").exists()
    assert (root / "link.txt").is_symlink()
    (decision,) = recorder.decisions()
    expected = {"default": "default-refuse", "observer": "observer"}.get(hostile, "confinement")
    assert (decision.allowed, decision.decided_by) == (False, expected)
    check_answers(recorder)


def test_a_permission_allowed_in_the_turn_covers_the_served_write_of_its_location(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    target = tmp_path / "a.txt"
    other = tmp_path / "b.txt"
    tool = {"toolCallId": "c1", "title": "Edit a.txt", "kind": "edit", "locations": [{"path": str(target)}]}
    options = [
        {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "No", "kind": "reject_once"},
    ]
    agent = scripted(
        steps(
            {"op": "update", "update": {"sessionUpdate": "tool_call", **tool}},
            request(1, "session/request_permission", toolCall={"toolCallId": "c1"}, options=options),
            request(2, "fs/write_text_file", path=str(target), content="yes"),
            request(3, "fs/write_text_file", path=str(other), content="no"),
        )
    )
    recorder = ServeRecorder()
    recorder._decide = lambda request: tinyacp.PermissionReply.allow()  # the person said yes to the tool call
    answers = run_turn(make_client, agent, tmp_path, tinyacp.Serve(write=True), recorder)
    assert answers[2]["result"] == {} and target.read_text() == "yes"
    assert refused(answers[3]) and not other.exists()
    first, second = recorder.decisions()
    assert (first.decided_by, second.decided_by) == ("permission", "default-refuse")
    assert first.tool_call is not None and first.tool_call.tool_call_id == "c1"


# ------------------------------------------------------------------------------------------------------------------
# Terminals.


def terminal_steps(*middle: dict[str, Any]) -> list[dict[str, Any]]:
    return steps(*middle)


def py(code: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-c", code]}


def test_a_command_runs_through_a_served_terminal_and_everything_answers_by_the_schema(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", **py("import os; print('hello', os.getcwd()); raise SystemExit(3)")),
            request(2, "terminal/wait_for_exit", terminalId="term-1"),
            request(3, "terminal/output", terminalId="term-1"),
            request(4, "terminal/kill", terminalId="term-1"),
            request(5, "terminal/release", terminalId="term-1"),
            request(6, "terminal/output", terminalId="term-1"),
            request(7, "terminal/release", terminalId="term-9"),
        )
    )
    recorder = ServeRecorder()
    answers = run_commands(make_client, agent, tmp_path, recorder)
    assert answers[1]["result"] == {"terminalId": "term-1"}
    assert answers[2]["result"] == {"exitCode": 3, "signal": None}
    assert answers[3]["result"] == {
        "output": f"hello {os.path.realpath(tmp_path)}\n",
        "truncated": False,
        "exitStatus": {"exitCode": 3, "signal": None},
    }
    assert answers[4]["result"] == {} and answers[5]["result"] == {}
    assert answers[6]["error"]["code"] == -32602 and answers[7]["error"]["code"] == -32602
    (decision,) = recorder.decisions()
    assert decision.line == f"{sys.executable} -c {_quoted(decision.args[1])}"
    check_answers(recorder)


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_a_refused_command_does_not_run(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    touch = py(f"open({str(marker)!r}, 'w').close()")
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", **touch),  # no rule allows it
            request(2, "terminal/create", command=f"touch {marker}"),  # a denied pattern, whole line (kimi)
            request(3, "terminal/create", command="/bin/sh", args=["-lc", f"touch {marker}"]),  # fast-agent's form
            request(4, "terminal/create", cwd=str(tmp_path.parent), **touch),  # a cwd outside the roots
        )
    )
    recorder = ServeRecorder(answer=lambda request: True if request.request_id in (2, 3, 4) else None)
    serve = tinyacp.Serve(terminal=True, deny_commands=["touch *"], commands=["echo *"])
    answers = run_turn(make_client, agent, tmp_path, serve, recorder, tinyacp.PermissionPolicy(kinds=["execute"]))
    assert all(refused(answers[i]) for i in (1, 2, 3, 4)), answers
    assert [d.decided_by for d in recorder.decisions()] == ["default-refuse", "policy", "policy", "confinement"]
    assert not marker.exists()
    check_answers(recorder)


def test_the_command_does_not_start_before_its_decision_is_recorded(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    at_decision: list[bool] = []
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", command=f"touch {marker}"),
            request(2, "terminal/wait_for_exit", terminalId="term-1"),
            request(3, "terminal/release", terminalId="term-1"),
        )
    )
    recorder = ServeRecorder(at_decision=lambda request: at_decision.append(marker.exists()))
    serve = tinyacp.Serve(terminal=True, commands=["touch *"])
    answers = run_turn(make_client, agent, tmp_path, serve, recorder)
    assert answers[2]["result"] == {"exitCode": 0, "signal": None}
    assert at_decision == [False] and marker.exists()  # a whole line ran with sh -c, as the rules allowed it
    order = [name for name, value in recorder.events if name in ("message", "serve", "serve_decision", "send")]
    assert order.index("serve") < order.index("serve_decision")


def test_kill_while_wait_for_exit_is_pending_stops_the_group_and_answers_the_wait(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    code = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(600)\n"
    )
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", **py(code)),
            {"op": "send", "message": _rpc(2, "terminal/wait_for_exit", terminalId="term-1")},
            {"op": "sleep", "seconds": 0.5},
            request(3, "terminal/kill", terminalId="term-1"),
            {"op": "await", "id": 2},
            request(4, "terminal/output", terminalId="term-1"),
            request(5, "terminal/release", terminalId="term-1"),
        )
    )
    recorder = ServeRecorder()
    answers = run_commands(make_client, agent, tmp_path, recorder)
    assert answers[2]["result"]["signal"] in ("SIGTERM", "SIGKILL"), answers[2]
    assert answers[4]["result"]["exitStatus"] == answers[2]["result"]
    for pid in map(int, pidfile.read_text().split()):
        wait_for(functools.partial(_gone, pid), timeout=10, what=f"pid {pid} gone")
    check_answers(recorder)


def _rpc(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"sessionId": "s1", **params}}


def _gone(pid: int) -> bool:
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except FileNotFoundError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] not in (b"Z", b"X")


@pytest.mark.parametrize("ending", ["close", "session_close"])
def test_no_command_survives_the_client_not_even_one_that_left_the_group(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path, ending: str
) -> None:
    pidfile = tmp_path / "pids"
    code = (
        "import os, subprocess, sys, time\n"
        "escaped = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(f'{{os.getpid()}} {{escaped.pid}}')\n"
        "time.sleep(600)\n"
    )
    closing = (
        [{"op": "expect", "method": "session/close"}, {"op": "reply", "result": {}}]
        if ending == "session_close"
        else []
    )
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": {**INIT_RESULT, "agentCapabilities": {"sessionCapabilities": {"close": {}}}}},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s1"}},
            {"op": "expect", "method": "session/prompt"},
            request(1, "terminal/create", **py(code)),
            end_turn(),
            *closing,
        ]
    )
    recorder = ServeRecorder()
    client = make_client(
        tinyacp.Options(
            command=agent.argv,
            observer=recorder,
            serve=tinyacp.Serve(terminal=True),
            policy=tinyacp.PermissionPolicy(kinds=["execute"]),
            kill_grace=1.0,
        )
    )
    client.initialize()
    client.new_session(str(tmp_path))
    client.prompt("s1", "go", timeout=60)
    wait_for(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2, timeout=20, what="the pids")
    pids = list(map(int, pidfile.read_text().split()))
    assert all(_alive(pid) for pid in pids)
    if ending == "session_close":
        client.close_session("s1")
    else:
        client.close()
    for pid in pids:
        wait_for(functools.partial(_gone, pid), timeout=20, what=f"pid {pid} gone")


def test_huge_output_is_kept_bounded_truncated_from_the_start_at_a_character_boundary(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    # 20 MB of three-byte characters, then a marker: the output kept is the last 1,000 bytes or fewer.
    code = "import sys; sys.stdout.write('€' * 7_000_000); sys.stdout.write('END'); sys.stdout.flush()"
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", outputByteLimit=1000, **py(code)),
            request(2, "terminal/wait_for_exit", terminalId="term-1"),
            request(3, "terminal/output", terminalId="term-1"),
            request(4, "terminal/release", terminalId="term-1"),
        )
    )
    recorder = ServeRecorder()
    answers = run_commands(make_client, agent, tmp_path, recorder)
    result = answers[3]["result"]
    assert result["truncated"] is True
    assert result["output"].endswith("END") and set(result["output"][:-3]) == {"€"}
    assert len(result["output"].encode()) <= 1000
    check_answers(recorder)


def test_a_flood_of_terminal_output_is_answered_with_memory_bounded(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    code = "import sys; sys.stdout.write('x' * 200_000); sys.stdout.flush()"
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", **py(code)),
            request(2, "terminal/wait_for_exit", terminalId="term-1"),
            {
                "op": "requests",
                "count": 2000,
                "first": 1000,
                "method": "terminal/output",
                "params": {"sessionId": "s1", "terminalId": "term-1"},
            },
            request(3, "terminal/release", terminalId="term-1"),
        )
    )
    recorder = _Counting()
    answers = run_commands(make_client, agent, tmp_path, recorder)
    outputs = [answers[i]["result"]["output"] for i in range(1000, 3000)]
    assert all(len(output) == 200_000 for output in outputs)
    assert recorder.sent == 2000 + 3


class _Counting(tinyacp.BaseObserver):
    """Counts our answers without keeping them (the flood is 400 MB of answers)."""

    def __init__(self) -> None:
        self.sent = 0

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        if message.method is None:
            self.sent += 1


def test_at_most_max_terminals_live_at_once_and_a_release_makes_room(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    sleeper = py("import time; time.sleep(600)")
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", **sleeper),
            request(2, "terminal/create", **sleeper),
            request(3, "terminal/create", **sleeper),
            request(4, "terminal/release", terminalId="term-1"),
            {"op": "sleep", "seconds": 1.5},
            request(5, "terminal/create", **sleeper),
        )
    )
    recorder = ServeRecorder()
    serve = tinyacp.Serve(terminal=True, max_terminals=2)
    answers = run_turn(make_client, agent, tmp_path, serve, recorder, tinyacp.PermissionPolicy(kinds=["execute"]))
    assert "result" in answers[1] and "result" in answers[2]
    assert refused(answers[3])
    assert answers[5]["result"] == {"terminalId": "term-3"}
    assert [d.decided_by for d in recorder.decisions()] == ["policy", "policy", "limit", "policy"]


def test_command_timeout_kills_a_command_that_never_exits(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", **py("import time; time.sleep(600)")),
            request(2, "terminal/wait_for_exit", terminalId="term-1"),
            request(3, "terminal/release", terminalId="term-1"),
        )
    )
    recorder = ServeRecorder()
    serve = tinyacp.Serve(terminal=True, command_timeout=0.5)
    started = time.monotonic()
    answers = run_turn(make_client, agent, tmp_path, serve, recorder, tinyacp.PermissionPolicy(kinds=["execute"]))
    assert answers[2]["result"]["signal"] in ("SIGTERM", "SIGKILL")
    assert time.monotonic() - started < 60


def test_the_command_gets_a_minimal_environment_and_the_agents_entries(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINYACP_TEST_TOKEN", "secret-token")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    agent = scripted(
        terminal_steps(
            request(1, "terminal/create", env=[{"name": "MINE", "value": "yes"}], **py(code)),
            request(2, "terminal/wait_for_exit", terminalId="term-1"),
            request(3, "terminal/output", terminalId="term-1"),
            request(4, "terminal/release", terminalId="term-1"),
        )
    )
    answers = run_commands(make_client, agent, tmp_path, ServeRecorder())
    env = json.loads(answers[3]["result"]["output"])
    assert env["MINE"] == "yes" and env["TERM"] == "dumb"
    assert "TINYACP_TEST_TOKEN" not in env
    assert set(env) <= {"MINE", "TERM", *tinyacp._terminals.BASE_ENV, "PWD", "SHLVL", "_", "LC_CTYPE"}


# ------------------------------------------------------------------------------------------------------------------
# Deny rules that cannot fail open (permissions).


def test_a_tool_name_is_carried_forward_so_deny_tools_holds_for_codex_style_requests(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    options = [
        {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "No", "kind": "reject_once"},
    ]
    agent = scripted(
        steps(
            {"op": "update", "update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run"}},
            {"op": "update", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "name": "Bash"}},
            request(1, "session/request_permission", toolCall={"toolCallId": "c1", "kind": "execute"}, options=options),
            request(2, "session/request_permission", toolCall={"toolCallId": "c2", "kind": "read"}, options=options),
            {
                "op": "update",
                "update": {"sessionUpdate": "tool_call", "toolCallId": "c3", "title": "Read", "name": "Read"},
            },
            request(3, "session/request_permission", toolCall={"toolCallId": "c3", "kind": "read"}, options=options),
        )
    )
    recorder = ServeRecorder()
    policy = tinyacp.PermissionPolicy(allow_all=True, deny_tools=["Bash"])
    answers = run_turn(make_client, agent, tmp_path, tinyacp.Serve(), recorder, policy)
    assert answers[1]["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}  # Bash, named earlier
    assert answers[2]["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}  # no name: not by allow_all
    assert answers[3]["result"]["outcome"] == {"outcome": "selected", "optionId": "ok"}  # Read, named
    first, second, _ = recorder.of("permission_decision")
    assert first.tool_call.name == "Bash" and first.decided_by == "policy"
    assert second.decided_by == "default-reject" and "no known name" in second.reason


class _Both(tinyacp.BaseObserver):
    """A recorder and a journal, each called for every record, the journal flushed."""

    def __init__(self, recorder: ServeRecorder, journal: tinyacp.JsonlJournal) -> None:
        self.recorder = recorder
        self.journal = journal

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("on_"):
            recorder, journal = object.__getattribute__(self, "recorder"), object.__getattribute__(self, "journal")

            def both(value: Any) -> Any:
                if hasattr(journal, name):
                    getattr(journal, name)(value)
                return getattr(recorder, name)(value)

            return both
        return object.__getattribute__(self, name)

    def flush(self) -> None:
        self.journal.flush()


def test_a_batch_serves_its_turns_by_the_same_rules(tmp_path: Path, scripted: Callable[..., Scripted]) -> None:
    from tinyacp.batch import run_batch

    work = tmp_path / "work"
    work.mkdir()
    agent = scripted(
        steps(
            request(1, "fs/write_text_file", path=str(work / "kept.txt"), content="served"),
            request(2, "terminal/create", command="touch", args=[str(work / "ran")]),
        )
    )
    summary = run_batch(
        [{"id": "one", "prompt": "go", "agent": agent.argv}],
        tmp_path / "out",
        cwd=work,
        policy=tinyacp.PermissionPolicy(kinds=["edit"]),
        serve=tinyacp.Serve(write=True, terminal=True),
        timeout=60,
    )
    assert summary.ok == 1, summary
    answers = {message["id"]: message for message in agent.received() if "method" not in message and "id" in message}
    assert (work / "kept.txt").read_text() == "served" and answers[1]["result"] == {}
    assert refused(answers[2]) and not (work / "ran").exists()
    (journal,) = (tmp_path / "out" / "journals").iterdir()
    decisions = [r for r in tinyacp.JsonlJournal.read(journal) if r["type"] == "serve_decision"]
    assert [(d["kind"], d["decided_by"]) for d in decisions] == [("edit", "policy"), ("execute", "default-refuse")]


# ------------------------------------------------------------------------------------------------------------------
# The demo agent uses the client's services when they are offered, and acts itself when they are not.

DEMO_WORDS = "with-read with-write with-terminal hello"


def _demo_turn(
    make_client: Callable[..., Any], tmp_path: Path, serve: tinyacp.Serve, observer: tinyacp.BaseObserver
) -> tinyacp.PromptResult:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    client = make_client(
        tinyacp.Options(
            command=[sys.executable, "-m", "tinyacp.demo"],
            observer=observer,
            serve=serve,
            policy=tinyacp.PermissionPolicy(allow_all=True),
        )
    )
    client.initialize()
    session = client.new_session(str(tmp_path))
    return client.prompt(session.id, DEMO_WORDS, timeout=60)  # type: ignore[no-any-return]


def test_the_demo_reads_writes_and_runs_through_the_client_when_offered(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    recorder = ServeRecorder()
    serve = tinyacp.Serve(read=True, write=True, terminal=True)
    result = _demo_turn(make_client, tmp_path, serve, recorder)
    assert "I read 1 file through the client." in result.text
    assert "I wrote demo-notes.md through the client." in result.text
    assert "I ran ls -l in the client's terminal: exit 0" in result.text
    assert "- a.txt: 8 bytes, 2 lines" in (tmp_path / "demo-notes.md").read_text()
    assert [(d.method, d.decided_by) for d in recorder.decisions()] == [
        ("fs/read_text_file", "policy"),  # the policy allowed the permissions: they grant nothing
        ("fs/write_text_file", "policy"),
        ("terminal/create", "policy"),
    ]
    methods = [m.method for m in recorder.of("message") if m.kind == tinyacp.MessageKind.SERVED]
    assert methods == [
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    check_answers(recorder)


def test_the_demo_acts_itself_when_nothing_is_offered(make_client: Callable[..., Any], tmp_path: Path) -> None:
    recorder = ServeRecorder()
    result = _demo_turn(make_client, tmp_path, tinyacp.Serve(), recorder)
    assert "I read the files myself" in result.text and "I wrote demo-notes.md myself" in result.text
    assert "I ran ls -l myself" in result.text
    assert (tmp_path / "demo-notes.md").exists()
    assert recorder.decisions() == []


def test_the_demo_says_what_the_client_refused_and_does_not_do_it(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    recorder = ServeRecorder(answer=lambda request: request.kind == "read")
    serve = tinyacp.Serve(read=True, write=True, terminal=True)
    result = _demo_turn(make_client, tmp_path, serve, recorder)
    assert "The client did not write demo-notes.md: refused by the client's rules" in result.text
    assert "The client did not run ls -l: refused by the client's rules" in result.text
    assert not (tmp_path / "demo-notes.md").exists()


def test_a_permission_the_policy_allowed_grants_nothing_so_commands_still_narrow_execute(
    make_client: Callable[..., Any], scripted: Callable[..., Scripted], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    tool = {"toolCallId": "c1", "title": "Run", "kind": "execute"}
    options = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
    agent = scripted(
        steps(
            request(1, "session/request_permission", toolCall=tool, options=options),
            request(2, "terminal/create", command=f"touch {marker}"),
        )
    )
    recorder = ServeRecorder()
    serve = tinyacp.Serve(terminal=True, commands=["pytest*"])
    answers = run_turn(make_client, agent, tmp_path, serve, recorder, tinyacp.PermissionPolicy(kinds=["execute"]))
    assert answers[1]["result"]["outcome"] == {"outcome": "selected", "optionId": "ok"}
    assert refused(answers[2]) and not marker.exists()
    (decision,) = recorder.decisions()
    assert (decision.granted, decision.decided_by) == (False, "default-refuse")
