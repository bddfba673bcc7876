"""The pure part of serving files and terminals: the rules, the params, the tool calls, and the core's order of
records, decisions, acts and answers, fed whole and one byte at a time (no process, no file)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tinyacp
from helpers.core import EPOCH, MAX_LINE, Driver, line
from tinyacp import ClientInfo, PermissionPolicy, PermissionToolCall, ReaderLimits, Serve, TransferLimits
from tinyacp._conversation import Conversation, Record, Write
from tinyacp._serve import (
    PENDING,
    Act,
    ExitStatus,
    Failure,
    FileState,
    ServeRequest,
    TerminalOutput,
    ToolCalls,
    command_line,
    decide_serve,
    parse_params,
    rules_say,
    shell_line,
)

pytestmark = pytest.mark.core


# ------------------------------------------------------------------------------------------------------------------
# The values and the rules.


def test_serve_checks_what_it_is_given() -> None:
    with pytest.raises(TypeError):
        Serve(read=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Serve(commands="git *")
    with pytest.raises(TypeError):
        Serve(roots="/tmp")
    for bad in ({"max_terminals": 0}, {"output_limit": 0}, {"read_limit": 2**31}, {"command_timeout": -1}):
        with pytest.raises(ValueError):
            Serve(**bad)  # type: ignore[arg-type]
    assert Serve(roots=["relative"]).roots[0].startswith("/")
    assert Serve().methods == frozenset()
    assert Serve(read=True, terminal=True).methods == {
        "fs/read_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
    with pytest.raises(TypeError):
        tinyacp.Options(command=["x"], serve=True)  # type: ignore[arg-type]


def test_the_command_line_is_shown_as_a_shell_shows_it_and_the_shell_line_is_found() -> None:
    assert command_line("ls -la | head", []) == "ls -la | head"  # kimi: the whole line as the command
    assert command_line("/bin/sh", ["-lc", "git status"]) == "/bin/sh -lc 'git status'"
    assert shell_line("/bin/sh", ("-lc", "git status")) == "git status"
    assert shell_line("bash", ("-c", "x")) == "x"
    assert shell_line("python", ("-c", "x")) is None
    assert shell_line("sh", ("--command", "x")) is None


def _execute(command: str, args: tuple[str, ...] = ()) -> ServeRequest:
    request = ServeRequest(EPOCH, b"", 1, "terminal/create", "s1", "execute", command=command, args=args)
    request.line = command_line(command, args)
    return request


@pytest.mark.parametrize(
    ("serve", "policy", "answer", "granted", "request_args", "expected"),
    [
        (Serve(), PermissionPolicy(), None, False, ("git status",), (False, "default-refuse")),
        (Serve(), PermissionPolicy(kinds=["execute"]), None, False, ("git status",), (True, "policy")),
        (
            Serve(commands=["git *"]),
            PermissionPolicy(kinds=["execute"]),
            None,
            False,
            ("rm -rf x",),
            (False, "default-refuse"),
        ),
        (Serve(commands=["git *"]), PermissionPolicy(), None, False, ("git status",), (True, "policy")),
        (
            Serve(commands=["git *"]),
            PermissionPolicy(),
            None,
            False,
            ("/bin/sh", ("-lc", "git status")),
            (True, "policy"),
        ),
        (
            Serve(deny_commands=["rm *"]),
            PermissionPolicy(allow_all=True),
            True,
            False,
            ("rm -rf /",),
            (False, "policy"),
        ),
        (Serve(deny_commands=["rm *"]), PermissionPolicy(), None, False, ("sh", ("-c", "rm -rf /")), (False, "policy")),
        (Serve(), PermissionPolicy(), False, True, ("ls",), (False, "observer")),
        (Serve(), PermissionPolicy(), True, False, ("ls",), (True, "observer")),
        (Serve(), PermissionPolicy(), None, True, ("ls",), (True, "permission")),
        (Serve(), PermissionPolicy(allow_all=True), None, False, ("ls",), (True, "policy")),
    ],
)
def test_who_decides_a_command(  # noqa: PLR0917  one parameter per column of the table
    serve: Serve,
    policy: PermissionPolicy,
    answer: bool | None,
    granted: bool,
    request_args: tuple[Any, ...],
    expected: tuple[bool, str],
) -> None:
    request = _execute(*request_args)
    decide_serve(request, answer, policy, serve, granted=granted)
    assert (request.allowed, request.decided_by) == expected
    assert request.reason


def test_a_file_is_decided_by_its_kind() -> None:
    read = ServeRequest(EPOCH, b"", 1, "fs/read_text_file", "s1", "read", path="/p")
    decide_serve(read, None, PermissionPolicy(kinds=["read"]), Serve(), granted=False)
    edit = ServeRequest(EPOCH, b"", 2, "fs/write_text_file", "s1", "edit", path="/p")
    decide_serve(edit, None, PermissionPolicy(kinds=["read"]), Serve(), granted=False)
    assert (read.allowed, edit.allowed, edit.decided_by) == (True, False, "default-refuse")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("fs/read_text_file", {"sessionId": "s1"}),
        ("fs/read_text_file", {"sessionId": "s1", "path": "/a", "line": 0}),
        ("fs/read_text_file", {"sessionId": "s1", "path": "/a", "limit": -1}),
        ("fs/read_text_file", {"sessionId": "s1", "path": 3}),
        ("fs/write_text_file", {"sessionId": "s1", "path": "/a"}),
        ("terminal/create", {"sessionId": "s1", "command": ""}),
        ("terminal/create", {"sessionId": "s1", "command": "ls", "args": ["a\u0000"]}),
        ("terminal/create", {"sessionId": "s1", "command": "ls", "env": [{"name": "A=B", "value": ""}]}),
        ("terminal/create", {"sessionId": "s1", "command": "ls", "outputByteLimit": -5}),
        ("terminal/output", {"sessionId": "s1"}),
    ],
)
def test_invalid_params_are_told_why(method: str, params: dict[str, Any]) -> None:
    assert isinstance(parse_params(method, json.dumps(params).encode()), str)


def test_tool_calls_are_bounded_carry_names_and_grants_end_with_the_turn() -> None:
    tools = ToolCalls()
    for index in range(2000):
        tools.seen("s1", tinyacp.ToolCall(f"c{index}", "t", name=f"N{index}"))
    assert tools.name_of("s1", "c0") is None and tools.name_of("s1", "c1999") == "N1999"
    tools.seen("s1", tinyacp.ToolCallUpdate("c1999", name="Bash"))
    assert tools.name_of("s1", "c1999") == "Bash"
    tools.grant("s1", PermissionToolCall("x", kind="edit", locations=[{"path": "/a/b"}]))
    tools.grant("s1", PermissionToolCall("y", kind="execute"))
    assert tools.granted("s1", "edit", "/a/./b") and not tools.granted("s1", "edit", "/a/c")
    assert not tools.granted("s2", "edit", "/a/b")
    assert tools.granted("s1", "execute", None) and not tools.granted("s1", "execute", None)  # used up
    tools.end_turn()
    assert not tools.granted("s1", "edit", "/a/b")


# ------------------------------------------------------------------------------------------------------------------
# The core's order: the line, confinement, on_serve, the decision, the act, the answer.


class ServeDriver(Driver):
    """Runs the core's acts against a scripted result per op, and logs each act."""

    def __init__(self, core: Conversation, piece: int | None, results: dict[str, Any], serve_answer: Any) -> None:
        super().__init__(core, piece)
        self.results = results
        self.serve_answer = serve_answer

    def _handle(self, raw: bytes) -> None:
        event = self.core.receive(raw)
        assert not isinstance(event, tinyacp.Update)
        answer: Any = None
        try:
            while True:
                effect = event.send(answer)
                answer = None
                if isinstance(effect, Record):
                    self.events.append((effect.callback, effect.value))
                    if effect.callback == "on_serve":
                        answer = self.serve_answer
                    elif effect.callback == "on_permission_request":
                        answer = self.answer(effect.value)  # type: ignore[arg-type]
                elif isinstance(effect, Act):
                    self.events.append((f"act:{effect.op}", effect))
                    answer = self.results.get(effect.op)
                    if effect.op == "check" and answer is None:
                        assert isinstance(effect.target, ServeRequest)
                        effect.target.resolved = effect.target.path or effect.target.cwd
                else:
                    assert isinstance(effect, Write)
                    self._write(effect.message)
        except StopIteration as stop:
            if stop.value is not None:
                self.finished(stop.value.value)


def _core(serve: Serve, policy: PermissionPolicy | None = None) -> Conversation:
    return Conversation(
        epoch=EPOCH,
        transfer_limits=TransferLimits(),
        reader_limits=ReaderLimits(MAX_LINE),
        policy=policy or PermissionPolicy(),
        client_info=ClientInfo("tinyacp-tests", "1"),
        has_observer=True,
        serve=serve,
    )


def _opened(driver: ServeDriver, cwd: str = "/srv") -> None:
    call = driver.core.new_session(cwd)
    driver.send(call.message)
    driver.feed(line({"jsonrpc": "2.0", "id": call.message.id, "result": {"sessionId": "s1"}}))


def _request(request_id: int | str, method: str, **params: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"sessionId": "s1", **params}})


def test_a_write_is_recorded_decided_and_recorded_again_before_it_is_done(piece: int | None) -> None:
    driver = ServeDriver(
        _core(Serve(write=True, roots=["/extra"]), PermissionPolicy(kinds=["edit"])),
        piece,
        {"write": FileState(True, 3, "ab")},
        None,
    )
    _opened(driver)
    driver.events.clear()
    driver.feed(_request("w1", "fs/write_text_file", path="/srv/a.txt", content="new"))
    assert driver.names() == [
        "on_message",
        "act:check",
        "on_serve",
        "on_serve_decision",
        "act:write",
        "on_send",
        "write",
    ]
    check = driver.of("act:check")[0]
    assert check.roots == ("/srv", "/extra")
    (decision,) = driver.of("on_serve_decision")
    assert (decision.allowed, decision.decided_by, decision.size) == (True, "policy", 3)
    assert driver.of("act:write")[0].content == "new"
    (sent,) = driver.of("on_send")
    assert sent.decided_by == "policy" and json.loads(sent.raw) == {"jsonrpc": "2.0", "id": "w1", "result": {}}


def test_a_refusal_by_confinement_asks_no_one_and_does_nothing(piece: int | None) -> None:
    refusal = Failure(-32001, "refused by the client's rules: '/etc/passwd' is outside", confinement=True)
    driver = ServeDriver(_core(Serve(read=True)), piece, {"check": refusal}, True)
    _opened(driver)
    driver.events.clear()
    driver.feed(_request(4, "fs/read_text_file", path="/etc/passwd"))
    assert driver.names() == ["on_message", "act:check", "on_serve_decision", "on_send", "write"]
    (decision,) = driver.of("on_serve_decision")
    assert (decision.allowed, decision.decided_by) == (False, "confinement")
    (answer,) = driver.writes()
    assert answer["error"]["code"] == -32001


def test_an_unknown_session_is_refused(piece: int | None) -> None:
    driver = ServeDriver(_core(Serve(read=True)), piece, {}, True)
    driver.feed(_request(4, "fs/read_text_file", path="/srv/a"))
    assert driver.names() == ["on_message", "on_serve_decision", "on_send", "write"]
    assert driver.writes()[0]["error"]["code"] == -32001


def test_a_wait_for_a_running_command_is_answered_when_it_ends(piece: int | None) -> None:
    driver = ServeDriver(_core(Serve(terminal=True)), piece, {"wait": PENDING}, None)
    _opened(driver)
    driver.events.clear()
    for request_id in range(20):
        driver.feed(_request(request_id, "terminal/wait_for_exit", terminalId="term-1"))
    errors = driver.writes()
    assert len(errors) == 4 and all("error" in answer for answer in errors)  # past 16 waiting
    answers = driver.core.terminal_exited("s1", "term-1", ExitStatus(signal="SIGKILL"))
    assert [json.loads(answer.raw)["result"] for answer in answers] == [{"exitCode": None, "signal": "SIGKILL"}] * 16
    assert driver.core.terminal_exited("s1", "term-1", ExitStatus(exit_code=0)) == []


def test_output_answers_carry_the_exit_status_only_once_known(piece: int | None) -> None:
    results = {"output": TerminalOutput("hi\n", False, None)}
    driver = ServeDriver(_core(Serve(terminal=True)), piece, results, None)
    _opened(driver)
    driver.events.clear()
    driver.feed(_request(1, "terminal/output", terminalId="term-1"))
    driver.results["output"] = TerminalOutput("hi\n", True, ExitStatus(exit_code=0))
    driver.feed(_request(2, "terminal/output", terminalId="term-1"))
    first, second = driver.writes()
    assert first["result"] == {"output": "hi\n", "truncated": False}
    assert second["result"] == {"output": "hi\n", "truncated": True, "exitStatus": {"exitCode": 0, "signal": None}}


def test_a_method_not_served_is_still_method_not_found(piece: int | None) -> None:
    driver = ServeDriver(_core(Serve(read=True)), piece, {}, True)
    _opened(driver)
    driver.events.clear()
    driver.feed(_request(1, "fs/write_text_file", path="/srv/a", content="x"))
    driver.feed(_request(2, "terminal/create", command="ls"))
    assert [answer["error"]["code"] for answer in driver.writes()] == [-32601, -32601]
    assert driver.of("on_serve_decision") == []


@pytest.mark.parametrize(
    ("serve", "policy", "granted", "said"),
    [
        (Serve(), PermissionPolicy(), False, None),
        (Serve(), PermissionPolicy(), True, True),
        (Serve(commands=["ls*"]), PermissionPolicy(), False, True),
        (Serve(deny_commands=["ls*"]), PermissionPolicy(allow_all=True), True, False),
        (Serve(), PermissionPolicy(kinds=["execute"]), False, True),
    ],
)
def test_what_the_rules_alone_say_leaves_no_rule_apart(
    serve: Serve, policy: PermissionPolicy, granted: bool, said: bool | None
) -> None:
    request = _execute("ls -la")
    request.granted = granted
    assert rules_say(request, policy, serve) is said
    assert request.decided_by == ""  # the request itself is not decided


def test_the_observer_is_told_a_permission_covers_the_action_and_the_grant_is_used_once(piece: int | None) -> None:
    driver = ServeDriver(_core(Serve(terminal=True)), piece, {"create": "term-1"}, None)
    _opened(driver)
    options = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
    tool = {"toolCallId": "c1", "kind": "execute"}
    call = driver.core.prompt("s1", "go")
    driver.send(call.message)
    driver.feed(_request(9, "session/request_permission", toolCall=tool, options=options))
    driver.decide = lambda request: tinyacp.PermissionReply.allow()
    driver.feed(_request(10, "session/request_permission", toolCall=tool, options=options))
    driver.feed(_request(1, "terminal/create", command="ls"))
    driver.feed(_request(2, "terminal/create", command="ls"))
    first, second = driver.of("on_serve")
    assert (first.granted, second.granted) == (True, False)
    assert [d.decided_by for d in driver.of("on_serve_decision")] == ["permission", "default-refuse"]
