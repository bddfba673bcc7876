"""The fault matrix: what tinyacp promises when the agent misbehaves or the caller's own code fails.

Each row of :data:`FAULTS` names one fault, the promised outcome in words, the agent's script and what the caller
does (with the checks of that outcome). :func:`test_fault_matrix` runs every row against the sync ``Client`` and
the ``AsyncClient`` (through ``make_client``) and checks, besides the row's own outcome:

- the record: every line the agent wrote up to the fault reached the observer exactly once, in order, byte for
  byte (the fault agent logs each write before making it), and the update seqs run 1, 2, 3, … without a gap;
  every line that reached the agent had been recorded with ``on_send`` first, and every answer we wrote is to a
  request recorded before it (permission answers after their recorded decision);
- the cleanup: no process of the agent's group is left and the agent was reaped (``make_client``), and this
  process has no more fds, threads or child processes than before the client was made.

RELIABILITY.md's fault table is rendered from :data:`FAULTS`, and ``tests/test_reliability_doc.py`` checks that
the two agree. The agents are ``tests/agents/fault_agent.py`` (``scripted.py``'s steps, plus a log of what it
wrote and a ``tool`` step) and ``tests/agents/fault_tool.py`` (a tool that ignores SIGTERM, holds the agent's
stdout or escapes its process group). After the matrix come the tests of ``Options(supervise=True)``.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import (
    AGENTS,
    INIT_RESULT,
    AsyncFacade,
    Background,
    ClientLike,
    MakeClient,
    chunk,
    end_turn,
    handshake,
    pid_alive,
    wait_for,
)
from tinyacp import (
    AgentExited,
    AgentTimeout,
    ClientBusy,
    ClientClosed,
    DecisionSource,
    MessageKind,
    ObserverError,
    PermissionPolicy,
    PermissionReply,
    ProtocolViolation,
    ReaderExhaustion,
    ReaderLimits,
    StopReason,
    TransferLimits,
)
from tinyacp._process import STDERR_TAIL_BYTES, _live_group_members

FAULT_AGENT = AGENTS / "fault_agent.py"
# Every blocking call gets a deadline, so a broken promise fails the test instead of hanging it.
TIMEOUT = 20.0
MiB = 1024 * 1024
GiB = 1024 * MiB
MILLION = 1_000_000
# Stubborn processes die by SIGKILL after the grace: keep it short, the rows prove the escalation, not its timing.
SHORT_GRACE = 0.2
SUPERVISED_GRACE = 1.0
"""The supervisor stops what escaped the group after half of ``kill_grace``, before the client's SIGKILL to the
group ends it too: on a loaded machine 0.1 s was sometimes not enough for it to be scheduled, and the escaped
process outlived the teardown. The rows give it half a second."""
PROMPT_ID = 2  # initialize is 0 and session/new 1


# ----------------------------------------------------------------------------------------------------------------
# The agent, the observer, and what one row gets to work with.


class FaultAgent:
    """The fault agent's command line, and its logs: what it received and what it wrote."""

    def __init__(self, tmp_path: Path, steps: list[dict[str, Any]], extra_args: tuple[str, ...] = ()) -> None:
        self.script = tmp_path / "agent.json"
        self.received_log = tmp_path / "received.log"
        self.sent_log = tmp_path / "sent.log"
        self.script.write_text(json.dumps(steps))
        self.argv = [
            sys.executable,
            str(FAULT_AGENT),
            str(self.script),
            str(self.received_log),
            str(self.sent_log),
            *extra_args,
        ]

    def received(self) -> list[bytes]:
        """Every line the agent read, without its newline, in order."""
        if not self.received_log.exists():
            return []
        return self.received_log.read_bytes().splitlines()

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.received()]

    def methods(self) -> list[str | None]:
        return [message.get("method") for message in self.messages()]

    def answer(self, request_id: int | str) -> dict[str, Any]:
        """Our response to the agent's request ``request_id`` (JSON 7 and "7" are different ids)."""
        (found,) = [
            m
            for m in self.messages()
            if "method" not in m and m.get("id") == request_id and type(m.get("id")) is type(request_id)
        ]
        return found

    def answered(self, request_id: int | str) -> bool:
        return any("method" not in m and m.get("id") == request_id for m in self.messages())

    def sent(self) -> list[tuple[bytes, int]]:
        """The complete lines the agent wrote, as runs of (line, how many times in a row), up to a ``big_line``."""
        runs: list[tuple[bytes, int]] = []
        pending = b""
        if not self.sent_log.exists():
            return runs
        for entry in map(json.loads, self.sent_log.read_bytes().splitlines()):
            if "data" in entry:
                *lines, pending = (pending + base64.b64decode(entry["data"])).split(b"\n")
                for line in lines:
                    add_run(runs, line, 1)
            elif "flood" in entry:
                assert pending == b"", "a flood starts on a line of its own"
                add_run(runs, base64.b64decode(entry["flood"]), entry["count"])
            else:  # a big line is a fault: nothing after it is expected in the record
                break
        return runs


def add_run(runs: list[tuple[bytes, int]], raw: bytes, count: int) -> None:
    if runs and runs[-1][0] == raw:
        runs[-1] = (raw, runs[-1][1] + count)
    else:
        runs.append((raw, count))


class UpdateRun:
    """One update, and how many byte-identical updates followed it (a flood is kept as one entry)."""

    def __init__(self, update: tinyacp.Update) -> None:
        self.first = update
        self.count = 1

    @property
    def raw(self) -> bytes:
        return self.first.raw


class Ledger(tinyacp.BaseObserver):
    """An observer that records every call in order, as a durable journal would, and can be told to fail.

    ``fail_in`` names a callback that raises :attr:`failure` (after recording, as a journal whose write went
    through but whose fsync failed); ``block_in`` one that waits for :attr:`release`. Updates are checked for
    gaps in their seqs as they come, and byte-identical updates in a row are kept as one :class:`UpdateRun`,
    so a million of them cost one entry.
    """

    def __init__(self, decide: Callable[[tinyacp.PermissionRequest], PermissionReply | None] | None = None) -> None:
        self.events: list[tuple[str, Any]] = []
        self.decide = decide
        self.fail_in: str | None = None
        self.failure = RuntimeError("the journal's disk is full")
        self.block_in: str | None = None
        self.entered = threading.Event()
        self.release = threading.Event()
        self.last_seq = 0
        self.seq_gaps: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def _then(self, name: str) -> None:
        if self.block_in == name:
            self.entered.set()
            assert self.release.wait(TIMEOUT), "nobody released the blocked observer"
        if self.fail_in == name:
            raise self.failure

    def _add(self, name: str, value: Any) -> None:
        with self.lock:
            self.events.append((name, value))

    def on_update(self, update: tinyacp.Update) -> None:
        if update.seq != self.last_seq + 1:
            self.seq_gaps.append((self.last_seq, update.seq))
        self.last_seq = update.seq
        with self.lock:
            last = self.events[-1] if self.events else None
            if last is not None and last[0] == "update" and last[1].raw == update.raw:
                last[1].count += 1
            else:
                self.events.append(("update", UpdateRun(update)))
        self._then("on_update")

    def on_permission_request(self, request: tinyacp.PermissionRequest) -> PermissionReply | None:
        self._add("permission_request", request)
        self._then("on_permission_request")
        return self.decide(request) if self.decide is not None else None

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        self._add("permission_decision", request)
        self._then("on_permission_decision")

    def on_message(self, message: tinyacp.AgentMessage) -> None:
        self._add("message", message)
        self._then("on_message")

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        self._add("send", message)
        self._then("on_send")

    def of(self, name: str) -> list[Any]:
        with self.lock:
            return [value for event, value in self.events if event == name]

    def updates(self) -> list[tinyacp.Update]:
        """Every update, one per run (the rows that look at updates one by one send no identical ones)."""
        return [run.first for run in self.of("update")]

    def messages(self, kind: MessageKind) -> list[tinyacp.AgentMessage]:
        return [m for m in self.of("message") if m.kind is kind]

    def agent_records(self) -> list[tuple[bytes, int]]:
        """What the observer got of the agent's lines, as runs of (line, count): one record per line."""
        runs: list[tuple[bytes, int]] = []
        for name, value in list(self.events):
            if name == "update":
                add_run(runs, value.raw, value.count)
            elif name in ("permission_request", "message"):
                add_run(runs, value.raw, 1)
        return runs


@dataclass
class Run:
    """What a row's caller works with: the client, its agent, the observer and a scratch directory."""

    client: ClientLike
    agent: FaultAgent
    ledger: Ledger
    tmp: Path
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def open(self) -> str:
        """initialize and session/new; the session's id."""
        self.client.initialize()
        return self.client.new_session(self.tmp).id

    def after_close(self, name: str, *args: Any) -> Any:
        """Call a method of a closed client (the async facade's loop may be closed: use a fresh one)."""
        client = self.client
        if isinstance(client, AsyncFacade):
            return asyncio.run(getattr(client.inner, name)(*args))
        return getattr(client, name)(*args)

    def assert_torn_down(self) -> None:
        """The client is closed, its agent's group is gone, and every call now raises ClientClosed."""
        assert self.client.closed
        assert self.client.returncode is not None
        assert not _live_group_members(self.client.pid)
        for name, args in (("initialize", ()), ("new_session", (self.tmp,)), ("prompt", ("s1", "again"))):
            with pytest.raises(ClientClosed):
                self.after_close(name, *args)

    def pids(self, name: str = "tools.pids") -> list[int]:
        path = self.tmp / name
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []


# ----------------------------------------------------------------------------------------------------------------
# Building the agent's script.


def compact(message: Any) -> str:
    return json.dumps(message, separators=(",", ":"))


def update(payload: dict[str, Any], session: str = "s1") -> dict[str, Any]:
    return {"op": "update", "update": payload, "session": session}


def raw(message: Any) -> dict[str, Any]:
    """Write ``message`` (text as is, anything else as compact JSON) as one line."""
    return {"op": "raw", "line": message if isinstance(message, str) else compact(message)}


def raw_bytes(data: bytes) -> dict[str, Any]:
    return {"op": "raw_b64", "data": base64.b64encode(data).decode()}


def update_line(payload: dict[str, Any], session: str = "s1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": payload}}


def answer_prompt(reason: str) -> dict[str, Any]:
    """Answer the first prompt whatever the agent expected since (a notification leaves it no id to answer)."""
    return raw({"jsonrpc": "2.0", "id": PROMPT_ID, "result": {"stopReason": reason}})


def option(option_id: str, kind: str) -> dict[str, str]:
    return {"optionId": option_id, "name": option_id.title(), "kind": kind}


ALL_OPTIONS = [
    option("always", "allow_always"),
    option("once", "allow_once"),
    option("never", "reject_always"),
    option("no", "reject_once"),
]


def ask(
    request_id: int | str, options: list[dict[str, str]], *, kind: str | None = "edit", title: str = "Edit notes.txt"
) -> dict[str, Any]:
    """A ``session/request_permission`` step; the agent waits for our answer."""
    tool_call: dict[str, Any] = {"toolCallId": f"call_{request_id}", "title": title}
    if kind is not None:
        tool_call["kind"] = kind
    params = {"sessionId": "s1", "toolCall": tool_call, "options": options}
    return {"op": "request", "method": "session/request_permission", "id": request_id, "params": params}


def tool(tmp: Path, *, ignore_term: bool = False, escape: bool = False, hold_stdout: bool = False) -> dict[str, Any]:
    return {
        "op": "tool",
        "ignore_term": ignore_term,
        "escape": escape,
        "hold_stdout": hold_stdout,
        "pidfile": str(tmp / "tools.pids"),
    }


def after_handshake(*steps: dict[str, Any]) -> Callable[[Path], list[dict[str, Any]]]:
    """A script: the handshake, then ``steps`` once the first prompt arrived."""
    return lambda tmp: [*handshake(), *steps]


# ----------------------------------------------------------------------------------------------------------------
# The rows: what the caller does, and the checks of each promised outcome.


def exit_before_initialize(run: Run) -> None:
    with pytest.raises(AgentExited, match="exit code 3") as caught:
        run.client.initialize()
    assert caught.value.returncode == 3
    run.assert_torn_down()


def exit_mid_prompt(run: Run) -> None:
    session = run.open()
    with pytest.raises(AgentExited, match="exit code 3") as caught:
        run.client.prompt(session, "go")
    assert caught.value.returncode == 3
    assert [u.text for u in run.ledger.updates()] == ["partial"]
    run.assert_torn_down()


def killed_by_signal(run: Run) -> None:
    session = run.open()
    with pytest.raises(AgentExited, match="SIGKILL") as caught:
        run.client.prompt(session, "go")
    assert caught.value.signal == signal.SIGKILL
    assert [u.text for u in run.ledger.updates()] == ["partial"]
    run.assert_torn_down()


def closes_stdout(run: Run) -> None:
    session = run.open()
    with pytest.raises(AgentExited, match="closed its output"):
        run.client.prompt(session, "go")
    assert run.client.returncode == -signal.SIGTERM  # it was still running: the teardown stopped it
    run.assert_torn_down()


def no_answer_to_initialize(run: Run) -> None:
    with pytest.raises(AgentTimeout):
        run.client.initialize(timeout=0.2)
    assert not run.client.closed  # only a prompt's deadline tears down; the caller decides what comes next
    run.client.close()
    assert run.client.returncode is not None
    run.assert_torn_down()


def late_answer(run: Run) -> None:
    with pytest.raises(AgentTimeout):
        run.client.initialize(timeout=0.2)
    session = run.client.new_session(run.tmp)
    assert session.id == "s1"
    (stray,) = run.ledger.messages(MessageKind.STRAY_RESPONSE)
    assert stray.id == 0
    responses = run.ledger.messages(MessageKind.RESPONSE)
    assert [(m.method, m.id) for m in responses] == [("session/new", 1)]


def no_answer_to_prompt(run: Run) -> None:
    session = run.open()
    with pytest.raises(AgentTimeout):
        run.client.prompt(session, "go", timeout=0.2)
    assert run.agent.methods().count("session/cancel") == 1
    run.assert_torn_down()


def ignores_sigterm(run: Run) -> None:
    session = run.open()
    assert run.client.prompt(session, "go").stop_reason is StopReason.END_TURN
    run.client.close()
    assert run.client.returncode == -signal.SIGKILL
    run.assert_torn_down()


def tools_ignore_sigterm(run: Run) -> None:
    run.client.initialize()
    pids = run.pids()
    assert len(pids) == 2
    assert all(pid_alive(pid) and os.getpgid(pid) == run.client.pid for pid in pids)
    run.client.close()
    assert [pid for pid in pids if pid_alive(pid)] == []
    run.assert_torn_down()


def tool_holds_stdout(run: Run) -> None:
    session = run.open()
    # The deadline is far off: the agent's exit, not a timeout, must end the call although its stdout stays open.
    with pytest.raises(AgentExited, match="exit code 3") as caught:
        run.client.prompt(session, "go", timeout=TIMEOUT)
    assert caught.value.returncode == 3
    (holder,) = run.pids()
    assert not pid_alive(holder)
    run.assert_torn_down()


def overlong_line(run: Run) -> None:
    session = run.open()
    with pytest.raises(ReaderExhaustion) as caught:
        run.client.prompt(session, "go")
    assert caught.value.max_line == 64 * 1024
    assert [u.text for u in run.ledger.updates()] == ["before"]
    run.assert_torn_down()


def gib_without_newline(run: Run) -> None:
    session = run.open()
    with pytest.raises(ReaderExhaustion) as caught:
        run.client.prompt(session, "go")
    assert caught.value.seen > tinyacp.DEFAULT_MAX_LINE
    run.assert_torn_down()


def skipped_lines(kind: MessageKind, count: int) -> Callable[[Run], None]:
    """The call goes on past ``count`` lines recorded as ``kind``, and the prompt's result is the real one."""

    def act(run: Run) -> None:
        session = run.open()
        result = run.client.prompt(session, "go")
        assert result.text == "ok"
        assert result.update_count == 1
        recorded = run.ledger.messages(kind)
        assert len(recorded) == count
        assert all(m.detail for m in recorded)
        assert [u.seq for u in run.ledger.updates()] == [1]
        assert not run.client.closed

    return act


BAD_UTF8 = [
    b"\xff\xfe\x00 not UTF-8 at all",
    compact(update_line(chunk("@@"))).encode().replace(b"@@", b"\xc3\x28"),  # invalid inside a JSON string
]
BATCH = "[" + compact(update_line(chunk("in a batch"))) + "]"
NOT_JSON_RPC = [
    compact({"method": "session/update", "params": {"sessionId": "s1", "update": chunk("no jsonrpc")}}),
    compact({"jsonrpc": "1.0", "method": "session/update", "params": {"sessionId": "s1", "update": chunk("1.0")}}),
    compact({"jsonrpc": 2.0, "id": PROMPT_ID, "result": {"stopReason": "end_turn"}}),
    compact({"id": PROMPT_ID, "result": {"stopReason": "end_turn"}}),
]


def stray_responses(run: Run) -> None:
    session = run.open()
    result = run.client.prompt(session, "go")
    assert result.text == "ok"
    assert [m.id for m in run.ledger.messages(MessageKind.STRAY_RESPONSE)] == [99, str(PROMPT_ID), 1]


def two_responses(run: Run) -> None:
    run.client.initialize()
    assert run.client.new_session(run.tmp).id == "s1"
    kinds = [(m.kind, m.method, m.id) for m in run.ledger.of("message")]
    assert kinds == [
        (MessageKind.RESPONSE, "initialize", 0),
        (MessageKind.STRAY_RESPONSE, None, 0),
        (MessageKind.RESPONSE, "session/new", 1),
    ]


def result_and_error(run: Run) -> None:
    session = run.open()
    with pytest.raises(ProtocolViolation, match="both a result and an error"):
        run.client.prompt(session, "first")
    assert not run.client.closed
    assert run.client.prompt(session, "second").text == "fine"


def unknown_session(run: Run) -> None:
    session = run.open()
    result = run.client.prompt(session, "go")
    assert (result.text, result.update_count, result.chunk_count) == ("mine", 1, 1)
    assert [(u.session_id, u.text) for u in run.ledger.updates()] == [("ghost", "elsewhere"), ("s1", "mine")]


def decisions(run: Run) -> list[tinyacp.PermissionRequest]:
    decided = run.ledger.of("permission_decision")
    assert decided == run.ledger.of("permission_request")  # each request recorded, then its decision
    return decided


def no_options(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    assert run.agent.answer(1)["result"] == {"outcome": {"outcome": "cancelled"}}
    assert run.agent.answer(2)["result"] == {"outcome": {"outcome": "cancelled"}}
    first, second = decisions(run)
    assert (first.decided_by, first.selected, first.allowed) == (DecisionSource.DEFAULT_REJECT, None, False)
    assert (second.decided_by, second.selected, second.allowed) == (DecisionSource.OBSERVER, None, False)
    assert "cancelled outcome" in first.reason and "cancelled outcome" in second.reason


def only_allow_options(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    assert run.agent.answer(1)["result"] == {"outcome": {"outcome": "cancelled"}}
    (request,) = decisions(run)
    assert (request.decided_by, request.selected, request.allowed) == (DecisionSource.DEFAULT_REJECT, None, False)


def duplicate_option_ids(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    outcomes = [run.agent.answer(n)["result"]["outcome"] for n in (1, 2, 3, 4)]
    assert outcomes == [
        {"outcome": "cancelled"},  # the only reject option shares its id with an allow option
        {"outcome": "selected", "optionId": "never"},  # the unambiguous reject
        {"outcome": "selected", "optionId": "ok"},  # same-kind duplicates: the first of the kind
        {"outcome": "selected", "optionId": "never"},  # selecting the ambiguous id is refused
    ]
    requests = decisions(run)
    assert [r.allowed for r in requests] == [False, False, True, False]
    assert "ambiguous" in requests[0].reason and "ambiguous" in requests[3].reason


def unknown_tool_kind(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    assert run.agent.answer(1)["result"]["outcome"] == {"outcome": "selected", "optionId": "once"}
    assert run.agent.answer(2)["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    assert run.agent.answer(3)["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    requests = decisions(run)
    assert [r.tool_call.kind for r in requests] == ["deploy", "read_and_delete", None]
    assert [r.decided_by for r in requests] == [
        DecisionSource.POLICY,
        DecisionSource.DEFAULT_REJECT,
        DecisionSource.DEFAULT_REJECT,
    ]


def stderr_flood(tail: bool) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        session = run.open()
        assert run.client.prompt(session, "go").text == "still here"
        run.client.close()
        expected = b"e" * STDERR_TAIL_BYTES if tail else None
        assert run.client.stderr_tail() == expected

    return act


def million_updates(run: Run) -> None:
    session = run.open()
    assert run.client.prompt(session, "one").update_count == 0
    result = run.client.prompt(session, "two")
    # The updates came after the first turn's answer and before the second prompt reached the agent, but the
    # client cannot tell when a line in the pipe was written: they count toward the turn that reads them.
    assert (result.stop_reason, result.chunk_count, result.overflow) == (StopReason.END_TURN, MILLION, None)
    (flood,) = run.ledger.of("update")
    assert (flood.first.seq, flood.count, run.ledger.last_seq) == (1, MILLION, MILLION)


def failing_observer(callback: str) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        session = run.open()
        run.ledger.fail_in = callback
        with pytest.raises(ObserverError) as caught:
            run.client.prompt(session, "go")
        assert caught.value.__cause__ is run.ledger.failure
        last_recorded = [name for name, _ in run.ledger.events][-1]
        assert last_recorded == callback.removeprefix("on_")  # nothing was recorded after the failure
        if callback == "on_send":
            assert "session/prompt" not in run.agent.methods()  # the line it failed to record was not written
        if callback in ("on_permission_request", "on_permission_decision"):
            assert not run.agent.answered(1)  # no answer without a recorded decision
        run.assert_torn_down()

    return act


def blocking_observer(run: Run) -> None:
    session = run.open()
    run.ledger.block_in = "on_update"
    prompt = Background(lambda: run.client.prompt(session, "go", timeout=TIMEOUT))
    assert run.ledger.entered.wait(TIMEOUT)
    run.client.kill()  # from this thread, while the calling thread is stuck in the observer
    wait_for(lambda: not _live_group_members(run.client.pid), what="the agent's group to die")
    run.ledger.release.set()
    with pytest.raises(AgentExited) as caught:
        prompt.join()
    assert caught.value.signal == signal.SIGTERM
    run.assert_torn_down()


def kill_during_initialize(run: Run) -> None:
    call = Background(run.client.initialize)
    wait_for(lambda: "initialize" in run.agent.methods(), what="initialize to reach the agent")
    run.client.kill()
    with pytest.raises(AgentExited, match="kill"):
        call.join()
    run.assert_torn_down()


def close_twice(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    run.client.close()
    returncode = run.client.returncode
    run.client.close()
    run.client.kill()  # a no-op now
    assert run.client.returncode == returncode is not None
    run.assert_torn_down()


def use_after_close(run: Run) -> None:
    session = run.open()
    run.client.close()
    for name, args in (("initialize", ()), ("new_session", (run.tmp,)), ("prompt", (session, "hi"))):
        with pytest.raises(ClientClosed):
            run.after_close(name, *args)
    with pytest.raises(ClientClosed):
        run.after_close("cancel", session)
    assert run.agent.methods() == ["initialize", "session/new"]


def two_calls_at_once(run: Run) -> None:
    session = run.open()
    first = Background(lambda: run.client.prompt(session, "first"))
    wait_for(lambda: "session/prompt" in run.agent.methods(), what="the first prompt to reach the agent")
    client = run.client
    if isinstance(client, AsyncFacade):  # the second call is another task on the client's loop
        loop = client._loop
        for call in (client.inner.initialize(), client.inner.new_session(run.tmp), client.inner.prompt(session, "2")):
            with pytest.raises(ClientBusy):
                asyncio.run_coroutine_threadsafe(call, loop).result(TIMEOUT)
        asyncio.run_coroutine_threadsafe(client.inner.cancel(session), loop).result(TIMEOUT)
    else:
        for second in (client.initialize, lambda: client.new_session(run.tmp), lambda: client.prompt(session, "2")):
            with pytest.raises(ClientBusy):
                second()
        client.cancel(session)  # the one call allowed alongside
    assert first.join().stop_reason is StopReason.CANCELLED
    assert run.agent.methods().count("session/prompt") == 1


def run_like_asyncio_run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    """Run ``coro`` on ``loop`` as ``asyncio.run`` does: SIGINT cancels the task, then KeyboardInterrupt."""
    task = loop.create_task(coro)
    interrupted = []

    def on_sigint(signum: int, frame: object) -> None:
        interrupted.append(signum)
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake the loop

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)


def keyboard_interrupt(run: Run) -> None:
    session = run.open()
    main = threading.main_thread().ident
    assert main == threading.get_ident(), "the interrupt is delivered to the main thread, where pytest runs us"
    assert main is not None

    def interrupt_once_working() -> None:
        wait_for(lambda: len(run.ledger.updates()) >= 1, what="the first update")
        signal.pthread_kill(main, signal.SIGINT)

    # Python's own handler, whatever the process inherited: a shell that starts a job in the background (no job
    # control) starts it with SIGINT ignored, and then the signal would never become a KeyboardInterrupt.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupter = Background(interrupt_once_working)
        client = run.client
        with pytest.raises(KeyboardInterrupt):
            if isinstance(client, AsyncFacade):
                run_like_asyncio_run(client._loop, client.inner.prompt(session, "go", timeout=TIMEOUT))
            else:
                client.prompt(session, "go", timeout=TIMEOUT)
        interrupter.join()
    finally:
        signal.signal(signal.SIGINT, inherited)
    cancels = [m for m in run.ledger.of("send") if m.method == "session/cancel"]
    # asyncio.run turns the interrupt into the task's cancellation, and a cancelled prompt asks the agent to stop.
    assert len(cancels) == (1 if isinstance(client, AsyncFacade) else 0)
    run.assert_torn_down()


SHELL_BAIT = ("$(touch pwned-argv)", "; touch pwned-argv2", "`touch pwned-argv3`", "| touch pwned-argv4")


def nothing_becomes_a_command(run: Run) -> None:
    session = run.open()
    prompt = "$(touch pwned-prompt); `touch pwned-prompt2` && touch pwned-prompt3"
    result = run.client.prompt(session, prompt)
    report = json.loads(run.ledger.updates()[0].text or "")
    assert report["argv"] == list(SHELL_BAIT)  # each argument arrived as one argument, untouched
    assert prompt in {block["text"] for block in run.agent.messages()[2]["params"]["prompt"]}
    assert result.text.endswith("$(touch pwned-output); touch pwned-output2")
    assert run.agent.answer(1)["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    run.client.close()
    assert [path.name for path in (*run.tmp.iterdir(), *Path.cwd().iterdir()) if "pwned" in path.name] == []


def default_deny(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    assert run.agent.answer(1)["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    (request,) = decisions(run)
    assert (request.decided_by, request.allowed) == (DecisionSource.DEFAULT_REJECT, False)


def select_unoffered(run: Run) -> None:
    session = run.open()
    run.client.prompt(session, "go")
    assert run.agent.answer(1)["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    (request,) = decisions(run)
    assert (request.decided_by, request.allowed) == (DecisionSource.OBSERVER, False)
    assert request.decision == PermissionReply.reject()
    assert "'yolo' was not offered" in request.reason


def escaped_grandchild(supervised: bool) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        run.client.initialize()
        (escaped,) = run.pids()
        run.cleanups.append(lambda: kill_stray(escaped))
        assert pid_alive(escaped)
        assert os.getsid(escaped) != os.getsid(0)  # a session of its own: no group signal of ours reaches it
        assert os.getpgid(escaped) != run.client.pid
        run.client.close()
        if supervised:
            assert not pid_alive(escaped)
        else:
            assert pid_alive(escaped), "the group signal reached a process that left the group?"
        run.assert_torn_down()

    return act


def kill_with_escaped_grandchild(run: Run) -> None:
    session = run.open()

    def kill_once_busy() -> None:
        wait_for(lambda: len(run.ledger.updates()) >= 1, what="the first update")
        run.client.kill()

    killer = Background(kill_once_busy)
    with pytest.raises(AgentExited, match="kill"):
        run.client.prompt(session, "go", timeout=TIMEOUT)
    killer.join()
    (escaped,) = run.pids()
    run.cleanups.append(lambda: kill_stray(escaped))
    assert not pid_alive(escaped)
    run.assert_torn_down()


def kill_stray(pid: int) -> None:
    """Kill a process the test knows escaped (not our child: init reaps it) and wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), what=f"the escaped process {pid} to die")


@dataclass(frozen=True)
class Fault:
    """One row of the matrix. ``fault`` and ``outcome`` are what RELIABILITY.md shows."""

    id: str
    area: str
    fault: str
    outcome: str
    steps: Callable[[Path], list[dict[str, Any]]]
    act: Callable[[Run], None]
    options: Mapping[str, Any] = field(default_factory=dict)
    decide: Callable[[tinyacp.PermissionRequest], PermissionReply | None] | None = None
    whole_record: bool = True
    """Every complete line the agent wrote must be in the record (else a prefix, ending where the row says)."""
    extra_args: tuple[str, ...] = ()
    supervised: bool = False
    """The row also runs with ``Options(supervise=True)``, and its outcome is the same."""


AGENT, CALLER, SECURITY, ESCAPE = "The agent", "The caller", "Security", "Escaping the process group"

FAULTS: list[Fault] = [
    Fault(
        "exit-before-initialize",
        AGENT,
        "exits before answering `initialize`",
        "`AgentExited` with its exit code; torn down; later calls raise `ClientClosed`",
        lambda tmp: [{"op": "expect", "method": "initialize"}, {"op": "exit", "code": 3}],
        exit_before_initialize,
        supervised=True,
    ),
    Fault(
        "exit-mid-prompt",
        AGENT,
        "exits in the middle of a prompt",
        "`AgentExited` with its exit code; every update before the exit recorded; torn down",
        after_handshake(update(chunk("partial")), {"op": "exit", "code": 3}),
        exit_mid_prompt,
        supervised=True,
    ),
    Fault(
        "killed-by-signal",
        AGENT,
        "is killed by a signal (SIGKILL) mid-prompt",
        "`AgentExited` whose `.signal` names it; what came before recorded; torn down",
        after_handshake(update(chunk("partial")), {"op": "exit", "signal": int(signal.SIGKILL)}),
        killed_by_signal,
        supervised=True,
    ),
    Fault(
        "closes-stdout-keeps-running",
        AGENT,
        "closes its stdout but keeps running",
        '`AgentExited` ("closed its output") at once, not at the deadline; the agent is stopped (SIGTERM)',
        after_handshake(update(chunk("partial")), {"op": "close_stdout"}, {"op": "hang"}),
        closes_stdout,
        {"kill_grace": SHORT_GRACE},
        supervised=True,
    ),
    Fault(
        "never-answers-initialize",
        AGENT,
        "never answers `initialize`",
        "`AgentTimeout` at the call's deadline; the client stays open (only a prompt's deadline tears down); "
        "`close()` stops the agent",
        lambda tmp: [{"op": "expect", "method": "initialize"}, {"op": "hang"}],
        no_answer_to_initialize,
    ),
    Fault(
        "answers-after-the-deadline",
        AGENT,
        "answers `initialize` after its deadline passed",
        "`AgentTimeout`; the late answer is recorded as `STRAY_RESPONSE` during the next call, which works",
        lambda tmp: [
            {"op": "expect", "method": "initialize"},
            {"op": "expect", "method": "session/new"},
            raw({"jsonrpc": "2.0", "id": 0, "result": INIT_RESULT}),
            {"op": "reply", "result": {"sessionId": "s1"}},
        ],
        late_answer,
    ),
    Fault(
        "never-answers-prompt",
        AGENT,
        "never answers a prompt, not even after `session/cancel`",
        "at the deadline one `session/cancel`, then `AgentTimeout` after `cancel_grace`; torn down",
        after_handshake({"op": "expect", "method": "session/cancel"}, {"op": "hang"}),
        no_answer_to_prompt,
        {"cancel_grace": SHORT_GRACE},
    ),
    Fault(
        "ignores-sigterm",
        AGENT,
        "ignores SIGTERM",
        "`close()` sends SIGKILL after `kill_grace`; `returncode` is `-SIGKILL`",
        lambda tmp: [{"op": "ignore_sigterm"}, *handshake(), end_turn(), {"op": "hang"}],
        ignores_sigterm,
        {"kill_grace": SHORT_GRACE},
        supervised=True,
    ),
    Fault(
        "tools-ignore-sigterm",
        AGENT,
        "starts tools (grandchildren, in its group) that ignore SIGTERM",
        "`close()` ends every one of them (SIGKILL to the group after `kill_grace`)",
        lambda tmp: [
            {"op": "expect", "method": "initialize"},
            tool(tmp, ignore_term=True),
            tool(tmp, ignore_term=True),
            {"op": "reply", "result": INIT_RESULT},
        ],
        tools_ignore_sigterm,
        {"kill_grace": SHORT_GRACE},
        supervised=True,
    ),
    Fault(
        "tool-holds-stdout-after-agent-exit",
        AGENT,
        "dies while a grandchild (ignoring SIGTERM) holds its stdout pipe open",
        "`AgentExited` with the agent's exit code at once (its pidfd, not EOF, tells), not at the deadline; "
        "the grandchild is killed",
        lambda tmp: [
            *handshake(),
            tool(tmp, ignore_term=True, hold_stdout=True),
            update(chunk("x")),
            {"op": "exit", "code": 3},
        ],
        tool_holds_stdout,
        {"kill_grace": SHORT_GRACE},
        supervised=True,
    ),
    Fault(
        "overlong-line",
        AGENT,
        "writes a line one byte longer than the reader's limit",
        "`ReaderExhaustion` before any JSON is parsed; the lines before it recorded; torn down",
        after_handshake(update(chunk("before")), {"op": "big_line", "size": 64 * 1024 + 1}),
        overlong_line,
        {
            "reader_limits": ReaderLimits(max_line=64 * 1024),
            "transfer_limits": TransferLimits(max_update_bytes=64 * 1024),
        },
    ),
    Fault(
        "gib-without-newline",
        AGENT,
        "writes 1 GiB without a newline",
        "`ReaderExhaustion` once the limit (2 MiB) is passed; memory stays at the line buffer; the agent is "
        "stopped long before it wrote the GiB",
        after_handshake({"op": "big_line", "size": GiB, "newline": False}),
        gib_without_newline,
    ),
    Fault(
        "invalid-utf8",
        AGENT,
        "writes invalid UTF-8 (a bare line, and inside a JSON string)",
        "each line recorded as `INVALID` with its exact bytes and skipped; the prompt goes on",
        after_handshake(*(raw_bytes(line + b"\n") for line in BAD_UTF8), update(chunk("ok")), end_turn()),
        skipped_lines(MessageKind.INVALID, len(BAD_UTF8)),
    ),
    Fault(
        "not-json",
        AGENT,
        "writes lines that are not JSON (log lines, a cut-off message, a bare string)",
        "each recorded as `INVALID` and skipped; the prompt goes on",
        after_handshake(
            raw("Loading model weights..."),
            raw('{"jsonrpc":"2.0","method":"session/update","params":'),
            raw('"just a string"'),
            update(chunk("ok")),
            end_turn(),
        ),
        skipped_lines(MessageKind.INVALID, 3),
    ),
    Fault(
        "json-array-batch",
        AGENT,
        "writes a JSON array (a JSON-RPC batch)",
        "recorded as `INVALID` (ACP has no batches); the update inside is not taken",
        after_handshake(raw(BATCH), update(chunk("ok")), end_turn()),
        skipped_lines(MessageKind.INVALID, 1),
    ),
    Fault(
        "jsonrpc-missing-or-wrong",
        AGENT,
        'writes messages with `jsonrpc` missing or not `"2.0"` (updates, and a response to our prompt)',
        "each recorded as `INVALID` and not acted on (the bad response does not end the call)",
        after_handshake(*(raw(line) for line in NOT_JSON_RPC), update(chunk("ok")), end_turn()),
        skipped_lines(MessageKind.INVALID, len(NOT_JSON_RPC)),
        supervised=True,
    ),
    Fault(
        "response-to-unknown-id",
        AGENT,
        'answers ids we never sent (99, the string `"2"` for our 2, an id already answered)',
        "each recorded as `STRAY_RESPONSE` and skipped; the call waits for its own answer",
        after_handshake(
            raw({"jsonrpc": "2.0", "id": 99, "result": {"stopReason": "end_turn"}}),
            raw({"jsonrpc": "2.0", "id": str(PROMPT_ID), "result": {"stopReason": "end_turn"}}),
            raw({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}),
            update(chunk("ok")),
            end_turn(),
        ),
        stray_responses,
    ),
    Fault(
        "two-responses-to-one-id",
        AGENT,
        "answers one request twice",
        "the first answer is taken; the second is recorded as `STRAY_RESPONSE` (during the next call)",
        lambda tmp: [
            {"op": "expect", "method": "initialize"},
            {"op": "reply", "result": INIT_RESULT},
            {"op": "reply", "result": INIT_RESULT},
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s1"}},
        ],
        two_responses,
    ),
    Fault(
        "result-and-error",
        AGENT,
        "answers with both `result` and `error`",
        "`ProtocolViolation`; the response is recorded; the client stays usable",
        after_handshake(
            raw({"jsonrpc": "2.0", "id": PROMPT_ID, "result": {"stopReason": "end_turn"}, "error": {"code": 1}}),
            {"op": "expect", "method": "session/prompt"},
            update(chunk("fine")),
            end_turn(),
        ),
        result_and_error,
    ),
    Fault(
        "updates-for-unknown-session",
        AGENT,
        "sends updates for a session we never opened",
        "recorded (with their session id) and left out of the prompt's reply and counts",
        after_handshake(update(chunk("elsewhere"), session="ghost"), update(chunk("mine")), end_turn()),
        unknown_session,
    ),
    Fault(
        "permission-without-options",
        AGENT,
        "asks permission with no options at all",
        "answered with the `cancelled` outcome, whatever the observer chose; the decision is recorded",
        after_handshake(ask(1, []), ask(2, []), end_turn()),
        no_options,
        decide=lambda request: PermissionReply.allow() if request.request_id == 2 else None,
    ),
    Fault(
        "permission-only-allow-options",
        AGENT,
        "asks permission offering only allow options",
        "default reject finds no reject option: the `cancelled` outcome, never an allow",
        after_handshake(ask(1, ALL_OPTIONS[:2]), end_turn()),
        only_allow_options,
    ),
    Fault(
        "permission-duplicate-option-ids",
        AGENT,
        "asks permission with duplicate option ids",
        "an id the agent gave to options of different kinds is ambiguous and never answered (reject falls "
        "back to another reject option, else `cancelled`; selecting it is refused); same-kind duplicates: the "
        "first of the kind",
        after_handshake(
            ask(1, [option("x", "allow_once"), option("x", "reject_once")]),
            ask(2, [option("x", "allow_once"), option("x", "reject_once"), option("never", "reject_always")]),
            ask(3, [option("ok", "allow_once"), option("ok", "allow_once"), option("no", "reject_once")]),
            ask(4, [option("x", "allow_once"), option("x", "reject_once"), option("never", "reject_always")]),
            end_turn(),
        ),
        duplicate_option_ids,
        decide=lambda request: {"3": PermissionReply.allow(), "4": PermissionReply.select("x")}.get(
            str(request.request_id)
        ),
    ),
    Fault(
        "permission-unknown-tool-kind",
        AGENT,
        "asks permission for a tool kind outside ACP's list (or none)",
        "decided by the policy on the exact string (`kinds={'deploy'}` allows `deploy`; `read` does not allow "
        "`read_and_delete`); no kind: default reject",
        after_handshake(
            ask(1, ALL_OPTIONS, kind="deploy"),
            ask(2, ALL_OPTIONS, kind="read_and_delete"),
            ask(3, ALL_OPTIONS, kind=None),
            end_turn(),
        ),
        unknown_tool_kind,
        {"policy": PermissionPolicy(kinds={"read", "deploy"})},
    ),
    Fault(
        "stderr-flood-discarded",
        AGENT,
        'floods stderr (8 MiB) while `stderr="discard"`',
        "the agent never blocks on it; the prompt returns",
        after_handshake({"op": "stderr", "size": 8 * MiB}, update(chunk("still here")), end_turn()),
        stderr_flood(tail=False),
    ),
    Fault(
        "stderr-flood-tail",
        AGENT,
        'floods stderr (8 MiB) while `stderr="tail"`',
        "the agent never blocks on it; the prompt returns; `stderr_tail()` holds exactly the last 64 KiB",
        after_handshake({"op": "stderr", "size": 8 * MiB}, update(chunk("still here")), end_turn()),
        stderr_flood(tail=True),
        {"stderr": "tail"},
        supervised=True,
    ),
    Fault(
        "million-updates-between-prompts",
        AGENT,
        "writes a million updates between two prompts",
        "all recorded, seq 1 to 1,000,000 without a gap, byte-exact; read during the next prompt, which "
        "returns (they count toward its reply: the client cannot tell when a line was written)",
        after_handshake(
            end_turn(),
            {"op": "flood", "count": MILLION, "text": "tok"},
            {"op": "expect", "method": "session/prompt"},
            end_turn(),
        ),
        million_updates,
        # The deadline holds under any flood: a loaded machine may need more than TIMEOUT for a million.
        {"timeout": 300.0},
    ),
    *(
        Fault(
            f"observer-raises-in-{callback}",
            CALLER,
            f"the observer's `{callback}` raises",
            "`ObserverError` (the original as `__cause__`); the client does not act on that message (no answer, "
            "no write) and tears down; later calls raise `ClientClosed`",
            after_handshake(*steps),
            failing_observer(callback),
            whole_record=False,
        )
        for callback, steps in (
            ("on_update", (update(chunk("one")), update(chunk("two")), end_turn())),
            ("on_permission_request", (ask(1, ALL_OPTIONS), end_turn())),
            ("on_permission_decision", (ask(1, ALL_OPTIONS), end_turn())),
            ("on_message", (raw("a log line"), update(chunk("two")), end_turn())),
            ("on_send", (end_turn(),)),
        )
    ),
    Fault(
        "observer-blocks",
        CALLER,
        "the observer blocks (in `on_update`)",
        "`kill()` from another thread still stops the agent's group at once; the call raises `AgentExited` once "
        "the observer returns",
        after_handshake(update(chunk("one")), {"op": "hang"}),
        blocking_observer,
        supervised=True,
    ),
    Fault(
        "kill-during-initialize",
        CALLER,
        "`kill()` from another thread during `initialize`",
        "`initialize` raises `AgentExited`; the group is gone",
        lambda tmp: [{"op": "expect", "method": "initialize"}, {"op": "hang"}],
        kill_during_initialize,
        supervised=True,
    ),
    Fault(
        "close-twice",
        CALLER,
        "`close()` twice (and `kill()` after it)",
        "the second `close()` and the `kill()` do nothing; `returncode` stays",
        after_handshake(end_turn()),
        close_twice,
    ),
    Fault(
        "use-after-close",
        CALLER,
        "a call after `close()`",
        "`ClientClosed`; nothing is written",
        lambda tmp: handshake()[:4],
        use_after_close,
    ),
    Fault(
        "two-calls-at-once",
        CALLER,
        "a second call while one is in flight (another thread; for `AsyncClient` another task)",
        "`ClientBusy`; nothing is written; `cancel()` is the one call allowed alongside",
        after_handshake({"op": "expect", "method": "session/cancel"}, answer_prompt("cancelled")),
        two_calls_at_once,
    ),
    Fault(
        "keyboard-interrupt-mid-prompt",
        CALLER,
        "KeyboardInterrupt (SIGINT) in the middle of a prompt",
        "`KeyboardInterrupt` propagates and the agent is torn down; under `asyncio.run` the task is cancelled "
        "first, so `AsyncClient` also sends one `session/cancel`",
        after_handshake(update(chunk("working")), {"op": "expect", "method": "session/cancel"}, {"op": "hang"}),
        keyboard_interrupt,
        supervised=True,
    ),
    Fault(
        "shell-metacharacters",
        SECURITY,
        "shell metacharacters in the agent's argv, in a prompt, in the agent's output and in a permission title",
        "nothing is run: argv reaches the agent as given (no shell), text stays text; the tool call is rejected",
        after_handshake(
            {"op": "report"},
            update(chunk("$(touch pwned-output); touch pwned-output2")),
            ask(1, ALL_OPTIONS, kind="execute", title="rm -rf ~; $(touch pwned-title)"),
            end_turn(),
        ),
        nothing_becomes_a_command,
        extra_args=SHELL_BAIT,
        supervised=True,
    ),
    Fault(
        "default-deny",
        SECURITY,
        "a permission request neither the observer nor the policy decides",
        "rejected with the agent's `reject_once` option; recorded as decided by `default-reject`",
        after_handshake(ask(1, ALL_OPTIONS), end_turn()),
        default_deny,
    ),
    Fault(
        "select-unoffered-option",
        SECURITY,
        "the observer selects an option id the agent did not offer",
        "rejected, and the recorded reason says the id was not offered",
        after_handshake(ask(1, ALL_OPTIONS), end_turn()),
        select_unoffered,
        decide=lambda request: PermissionReply.select("yolo"),
    ),
    Fault(
        "setsid-grandchild",
        ESCAPE,
        "a tool double-forks into a new session (`setsid`) and ignores SIGTERM",
        "**not stopped** by `close()`: no group signal reaches it (a documented limit; use `supervise=True`)",
        lambda tmp: [
            {"op": "expect", "method": "initialize"},
            tool(tmp, ignore_term=True, escape=True),
            {"op": "reply", "result": INIT_RESULT},
        ],
        escaped_grandchild(supervised=False),
        {"kill_grace": SHORT_GRACE},
    ),
    Fault(
        "setsid-grandchild-supervised",
        ESCAPE,
        "the same, with `Options(supervise=True)` (Linux)",
        "gone when `close()` returns: the supervisor (a child subreaper) inherited it, sent SIGTERM, then SIGKILL "
        "after half of `kill_grace`, and reaped it",
        lambda tmp: [
            {"op": "expect", "method": "initialize"},
            tool(tmp, ignore_term=True, escape=True),
            {"op": "reply", "result": INIT_RESULT},
        ],
        escaped_grandchild(supervised=True),
        {"kill_grace": SUPERVISED_GRACE, "supervise": True},
    ),
    Fault(
        "setsid-grandchild-supervised-kill",
        ESCAPE,
        "the same, and `kill()` from another thread mid-prompt, with `supervise=True`",
        "the prompt raises `AgentExited`; by then the escaped process is gone too",
        lambda tmp: [*handshake(), tool(tmp, ignore_term=True, escape=True), update(chunk("busy")), {"op": "hang"}],
        kill_with_escaped_grandchild,
        {"kill_grace": SUPERVISED_GRACE, "supervise": True},
    ),
]


# ----------------------------------------------------------------------------------------------------------------
# The matrix.


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def thread_count() -> int:
    """OS threads, so the raw threads tinyacp starts (the kill timer) count too."""
    return len(os.listdir("/proc/self/task"))


def children() -> set[int]:
    """This process's children, zombies included."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):
            found.update(int(pid) for pid in Path(f"/proc/self/task/{task}/children").read_text().split())
    return found


def check_record(run: Run, row: Fault) -> None:
    """The observer's record against what the agent wrote and received (see the module docstring)."""
    ledger = run.ledger
    sent, got = run.agent.sent(), ledger.agent_records()
    assert len(got) <= len(sent), f"records of lines the agent never wrote: {got[len(sent) :]!r}"
    if got:
        *whole, (last_raw, last_count) = got
        assert whole == sent[: len(whole)], "the record differs from what the agent wrote"
        assert last_raw == sent[len(whole)][0] and last_count <= sent[len(whole)][1]
    if row.whole_record:
        assert got == sent, "a line the agent wrote before the fault is missing from the record"
    assert ledger.seq_gaps == [], "update seqs are not 1, 2, 3, ..."

    sends = [message.raw for message in ledger.of("send")]
    received = run.agent.received()
    assert received == sends[: len(received)], "the agent got a line that was not recorded first, or out of order"

    asked: set[tuple[str, object]] = set()
    decided: set[tuple[str, object]] = set()
    for name, value in list(ledger.events):
        if name == "permission_request":
            asked.add((type(value.request_id).__name__, value.request_id))
        elif name == "permission_decision":
            decided.add((type(value.request_id).__name__, value.request_id))
        elif name == "message" and value.kind in (MessageKind.REQUEST, MessageKind.INVALID_REQUEST):
            asked.add((type(value.id).__name__, value.id))
            decided.add((type(value.id).__name__, value.id))
        elif name == "send" and value.method is None:
            key = (type(value.id).__name__, value.id)
            assert key in asked and key in decided, f"an answer to {value.id!r} before its request was recorded"


@pytest.fixture
def cleanups() -> Iterator[list[Callable[[], None]]]:
    """Things a row must undo whatever happened (a process it knows escaped)."""
    pending: list[Callable[[], None]] = []
    yield pending
    for cleanup in pending:
        cleanup()


@pytest.mark.parametrize("row", FAULTS, ids=[row.id for row in FAULTS])
def test_fault_matrix(
    row: Fault,
    make_client: MakeClient,
    tmp_path: Path,
    cleanups: list[Callable[[], None]],
) -> None:
    run_row(row, row.options, make_client=make_client, tmp_path=tmp_path, cleanups=cleanups)


SUPERVISED = [row for row in FAULTS if row.supervised]


@pytest.mark.parametrize("row", SUPERVISED, ids=[row.id for row in SUPERVISED])
def test_fault_matrix_supervised(
    row: Fault,
    make_client: MakeClient,
    tmp_path: Path,
    cleanups: list[Callable[[], None]],
) -> None:
    options = {**row.options, "supervise": True}
    run_row(row, options, make_client=make_client, tmp_path=tmp_path, cleanups=cleanups)


def run_row(
    row: Fault,
    row_options: Mapping[str, Any],
    *,
    make_client: MakeClient,
    tmp_path: Path,
    cleanups: list[Callable[[], None]],
) -> None:
    """One row: the client's life measured from outside, the row's own checks, then the record's."""
    agent = FaultAgent(tmp_path, row.steps(tmp_path), row.extra_args)
    ledger = Ledger(row.decide)
    options = {"timeout": TIMEOUT, **row_options}
    before = (fd_count(), thread_count(), children())

    client = make_client(command=agent.argv, observer=ledger, cwd=tmp_path, **options)
    run = Run(client, agent, ledger, tmp_path, cleanups)
    row.act(run)
    client.close()
    if isinstance(client, AsyncFacade):
        client.dispose()  # its private event loop's fds are the facade's, not the client's

    check_record(run, row)
    wait_for(lambda: fd_count() <= before[0], what=f"fds back to {before[0]} (now {fd_count()})")
    wait_for(lambda: thread_count() <= before[1], what=f"threads back to {before[1]} (now {thread_count()})")
    wait_for(lambda: children() <= before[2], what="no child process left, zombie or not")


# ----------------------------------------------------------------------------------------------------------------
# Options(supervise=True): what the supervisor adds, and what it must not change. (The matrix rows marked
# ``supervised`` run under it too, above: exit codes, signals, pipes and the record are the same with it.)

# A client in a process of its own, so that the test can SIGKILL it: it prints the supervisor's pid and the
# agent's report, then waits to be killed.
CLIENT_TO_KILL = """
import json, sys, time
import tinyacp

options = tinyacp.Options(
    command=json.loads(sys.argv[1]), observer=tinyacp.BaseObserver(), supervise=True, kill_grace=0.2, timeout=20
)
client = tinyacp.Client(options)
client.initialize()
session = client.new_session("/")
result = client.prompt(session.id, "go")
print(json.dumps({"supervisor": client.pid, "report": result.text}), flush=True)
time.sleep(60)
"""


def supervisor_children(pid: int) -> dict[int, bytes]:
    """The supervisor's children and their states (``Z`` for a zombie)."""
    states = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError):
            data = Path(f"/proc/{child}/stat").read_bytes()
            states[int(child)] = data[data.rindex(b")") + 2 :].split()[0]
    return states


def test_supervise_is_refused_where_it_cannot_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(ValueError, match="supervise=True needs Linux"):
        tinyacp.Options(command=["agent"], supervise=True)
    assert not tinyacp.Options(command=["agent"]).supervise


@pytest.mark.parametrize("signum", [signal.SIGSEGV, signal.SIGABRT])
def test_the_supervisor_ends_by_the_signal_that_ended_the_agent(
    make_client: MakeClient, tmp_path: Path, signum: int
) -> None:
    agent = FaultAgent(tmp_path, [*handshake(), update(chunk("partial")), {"op": "exit", "signal": int(signum)}])
    client = make_client(command=agent.argv, observer=Ledger(), timeout=TIMEOUT, supervise=True, cwd=tmp_path)
    client.initialize()
    session = client.new_session(tmp_path)

    with pytest.raises(AgentExited) as caught:
        client.prompt(session.id, "go")

    assert caught.value.signal == signum
    assert client.returncode == -signum


def test_under_the_supervisor_a_program_that_cannot_start_is_still_a_spawn_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (fd_count(), children())
    missing = tmp_path / "no-such-agent"

    with pytest.raises(tinyacp.SpawnError, match="no-such-agent") as caught:
        tinyacp.Client(tinyacp.Options(command=[str(missing)], supervise=True, observer=tinyacp.BaseObserver()))
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    with pytest.raises(tinyacp.SpawnError, match="no-such-dir"):
        tinyacp.Client(
            tinyacp.Options(
                command=["cat"], cwd=tmp_path / "no-such-dir", supervise=True, observer=tinyacp.BaseObserver()
            )
        )
    # A supervisor that ends without saying the agent started (here: not Python at all) is no success either.
    monkeypatch.setattr(sys, "executable", shutil.which("true"))
    with pytest.raises(tinyacp.SpawnError, match="supervisor ended before it started the agent"):
        tinyacp.Client(tinyacp.Options(command=["cat"], supervise=True, observer=tinyacp.BaseObserver()))

    assert fd_count() == before[0]
    wait_for(lambda: children() <= before[1], what="the supervisor reaped")


def test_the_supervised_agent_gets_exactly_the_argv_environment_and_cwd_asked_for(
    make_client: MakeClient, tmp_path: Path
) -> None:
    # No locale variable at all: Python (the supervisor's, and this agent's) then adds LC_CTYPE=C.UTF-8 to its own
    # environment (PEP 538); the agent must still get exactly this mapping.
    env = {"PATH": os.environ.get("PATH", os.defpath), "ONLY_THIS": "value with spaces; and $(dollars)"}
    agent = FaultAgent(tmp_path, [*handshake(), {"op": "report"}, end_turn()], SHELL_BAIT)
    client = make_client(command=agent.argv, observer=Ledger(), timeout=TIMEOUT, env=env, cwd=tmp_path, supervise=True)
    client.initialize()
    session = client.new_session(tmp_path)

    report = json.loads(client.prompt(session.id, "go").text)

    environ = base64.b64decode(report["environ"]).split(b"\0")
    assert sorted(entry for entry in environ if entry) == sorted(f"{k}={v}".encode() for k, v in env.items())
    assert report["argv"] == list(SHELL_BAIT)
    assert report["cwd"] == str(tmp_path)
    assert report["ppid"] == report["pgid"] == client.pid  # the supervisor's child, in the group it leads
    assert report["pid"] != client.pid


def test_the_supervisor_adopts_orphans_and_reaps_them_as_they_die(make_client: MakeClient, tmp_path: Path) -> None:
    # The escaping tool's first two processes exit at once: the second was an orphan, so the supervisor is the
    # one to reap it, and the escaped grandchild is re-parented to it rather than to init.
    steps = [
        {"op": "expect", "method": "initialize"},
        tool(tmp_path, escape=True),
        {"op": "reply", "result": INIT_RESULT},
    ]
    agent = FaultAgent(tmp_path, steps)
    client = make_client(command=agent.argv, timeout=TIMEOUT, supervise=True, kill_grace=SHORT_GRACE)
    client.initialize()
    (escaped,) = [int(pid) for pid in (tmp_path / "tools.pids").read_text().split()]

    wait_for(
        lambda: b"Z" not in supervisor_children(client.pid).values(), what="the supervisor to reap the orphan that died"
    )
    assert escaped in supervisor_children(client.pid)
    client.close()
    assert not pid_alive(escaped)


def test_when_the_client_process_is_killed_the_supervisor_stops_everything(tmp_path: Path) -> None:
    # The agent ignores its stdin closing (it hangs), so only the supervisor noticing its parent's death ends it.
    steps = [
        *handshake(),
        tool(tmp_path, ignore_term=True, escape=True),
        tool(tmp_path, ignore_term=True),
        {"op": "report"},
        end_turn(),
        {"op": "hang"},
    ]
    agent = FaultAgent(tmp_path, steps)
    env = {**os.environ, "PYTHONPATH": str(Path(tinyacp.__file__).parents[1])}
    client_process = subprocess.Popen(
        [sys.executable, "-c", CLIENT_TO_KILL, json.dumps(agent.argv)], stdout=subprocess.PIPE, env=env, cwd=tmp_path
    )
    pids: list[int] = []
    try:
        assert client_process.stdout is not None
        started = json.loads(client_process.stdout.readline())
        tools = [int(pid) for pid in (tmp_path / "tools.pids").read_text().split()]
        pids = [started["supervisor"], json.loads(started["report"])["pid"], *tools]
        assert all(pid_alive(pid) for pid in pids)

        client_process.kill()
        client_process.wait(TIMEOUT)

        wait_for(lambda: not any(pid_alive(pid) for pid in pids), what="the agent, its tools and the supervisor gone")
    finally:
        client_process.kill()
        client_process.wait(TIMEOUT)
        if client_process.stdout is not None:
            client_process.stdout.close()
        for pid in pids:
            kill_stray(pid)


def test_no_module_of_the_library_can_run_a_shell() -> None:
    # The agent is started from an argv list (the matrix row shell-metacharacters shows it); this shows that no
    # other path exists: no shell=True, no os.system or os.popen, nothing that hands a string to /bin/sh.
    shell_calls = {"system", "popen", "getoutput", "getstatusoutput", "spawnlp", "spawnvp"}
    found = []
    for path in sorted(Path(tinyacp.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name in shell_calls:
                found.append(f"{path.name}:{node.lineno} {name}()")
            for keyword in node.keywords:
                if keyword.arg == "shell" and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value):
                    found.append(f"{path.name}:{node.lineno} shell=")
    assert found == []
