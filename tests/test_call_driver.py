"""The one call driver, through both clients: full duplex, deadlines under any flood, a fair event loop, nothing
lost when the agent dies, re-entrant calls, the reap after a cancelled close, durations refused, the flush point.

Every test runs against ``Client`` and ``AsyncClient`` (the ``make_client`` fixture) unless only one of them has
the behaviour. The agents are scripted (``agents/scripted.py``) or flood from their whole process group
(``agents/group_flood_agent.py``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import os
import sys
import time
from typing import Any

import pytest

import tinyacp
from helpers import AGENTS, INIT_RESULT, MakeClient, MakeScripted, Recorder, chunk, end_turn, handshake
from tinyacp import AgentExited, AgentTimeout, ClientBusy, Options, TransferLimits
from tinyacp._process import _live_group_members

MiB = 1 << 20
SLACK = 5.0
"""Seconds a deadline may be overrun on a loaded machine; the flood without the driver's checks runs for ever."""


def group_flood(processes: int, method: str) -> list[str]:
    return [sys.executable, str(AGENTS / "group_flood_agent.py"), str(processes), method]


def update_line(text: str, session: str = "s1") -> bytes:
    params = {"sessionId": session, "update": chunk(text)}
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}).encode() + b"\n"


class Flushing(Recorder):
    """A Recorder with the flush point: each flush is an event, in order with the records."""

    def flush(self) -> None:
        self._add("flush", None)


# ----------------------------------------------------------------------------------------------------------------
# 1. Full duplex.


def test_an_agent_that_writes_a_mebibyte_before_it_reads_the_prompt_does_not_deadlock_a_long_prompt(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    count = MiB // len(update_line("x" * 40)) + 1  # more than a pipe holds, so the agent blocks on its writes
    agent = scripted(
        [
            *handshake()[:4],
            {"op": "flood", "count": count, "text": "x" * 40},
            {"op": "expect", "method": "session/prompt"},
            end_turn(),
        ]
    )
    recorder = Recorder()
    limits = TransferLimits(max_message_bytes=16 * MiB)
    client = make_client(command=agent.argv, observer=recorder, transfer_limits=limits, timeout=60)
    client.initialize()
    client.new_session("/")

    result = client.prompt("s1", "p" * (4 * MiB))  # far more than the agent's stdin pipe holds

    assert result.stop_reason == "end_turn"
    assert len(recorder.updates) == count
    assert [update.seq for update in recorder.updates] == list(range(1, count + 1))
    assert len(agent.received()[-1]["params"]["prompt"][0]["text"]) == 4 * MiB


# ----------------------------------------------------------------------------------------------------------------
# 2. Deadlines hold under any flood.


def test_a_prompt_deadline_holds_while_the_agents_whole_group_floods(make_client: MakeClient) -> None:
    recorder = Recorder()
    limits = TransferLimits(max_reply_bytes=1 << 40, max_reply_chunks=1 << 40, max_updates=1 << 40)
    client = make_client(
        command=group_flood(3, "session/prompt"),
        observer=recorder,
        transfer_limits=limits,
        cancel_grace=0.3,
        kill_grace=0.5,
    )
    client.initialize()
    client.new_session("/")

    started = time.monotonic()
    with pytest.raises(AgentTimeout):
        client.prompt("s1", "go", timeout=0.5)
    elapsed = time.monotonic() - started

    assert 0.8 <= elapsed < 0.8 + 0.5 + SLACK  # deadline, grace, then the teardown's kill_grace at most
    sent = [message.method for message in recorder.of("send")]
    assert sent.count("session/cancel") == 1
    assert len(recorder.updates) > 0
    assert client.closed


def test_a_handshake_deadline_holds_while_the_agents_whole_group_floods(make_client: MakeClient) -> None:
    recorder = Recorder()
    client = make_client(command=group_flood(3, "session/new"), observer=recorder, kill_grace=0.5)
    client.initialize()

    started = time.monotonic()
    with pytest.raises(AgentTimeout):
        client.new_session("/", timeout=0.5)

    assert time.monotonic() - started < 0.5 + SLACK
    assert [message.method for message in recorder.of("send")][-1] == "$/cancel_request"


def test_close_returns_within_kill_grace_while_the_agents_whole_group_floods(make_client: MakeClient) -> None:
    recorder = Recorder()
    client = make_client(command=group_flood(3, "session/new"), observer=recorder, kill_grace=0.5)
    client.initialize()
    with pytest.raises(AgentTimeout):
        client.new_session("/", timeout=0.2)

    started = time.monotonic()
    client.close()

    assert time.monotonic() - started < 0.5 + SLACK
    assert not _live_group_members(client.pid)


# ----------------------------------------------------------------------------------------------------------------
# 3. A fair event loop.


FLOOD_SECONDS = 2.0
"""How long the starvation test floods its client: the deadline of its prompt."""


def test_a_flooding_agent_does_not_starve_the_other_tasks_of_its_event_loop() -> None:
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.001)

    async def main() -> tuple[float, float]:
        limits = TransferLimits(max_reply_bytes=1 << 40, max_reply_chunks=1 << 40, max_updates=1 << 40)
        options = Options(
            command=group_flood(2, "session/prompt"),
            observer=tinyacp.BaseObserver(),
            transfer_limits=limits,
            cancel_grace=0.2,
            kill_grace=0.5,
        )
        async with tinyacp.AsyncClient(options) as client:
            await client.initialize()
            await client.new_session("/")
            task = asyncio.create_task(ticker())
            await asyncio.sleep(0)
            started = time.monotonic()
            with pytest.raises(AgentTimeout):
                await client.prompt("s1", "go", timeout=FLOOD_SECONDS)
            ended = time.monotonic()
            task.cancel()
        return started, ended

    started, ended = asyncio.run(asyncio.wait_for(main(), 30))
    during = [tick for tick in ticks if started <= tick <= ended]
    # A loop starved by the flood would tick once or twice in the whole prompt; a fair one ticks all along (every
    # 50 ms slice at least: some 20 times a second, fewer on a loaded machine, so the bound keeps a wide margin).
    assert len(during) >= 8
    gaps = [later - earlier for earlier, later in itertools.pairwise(during)]
    # The goal is 50 ms (benchmarks); this only catches a loop held for the whole flood. Half the flood, not less:
    # under a full parallel run on two cores the whole process was once not scheduled for 0.58 s.
    assert max(gaps) < FLOOD_SECONDS / 2


def test_calls_in_a_row_let_the_event_loop_run_once_per_fair_slice_not_once_per_call(scripted: MakeScripted) -> None:
    turns = 5
    next_prompt = {"op": "expect", "method": "session/prompt"}
    agent = scripted([*handshake(), *[step for _ in range(turns) for step in (end_turn(), next_prompt)]][:-1])

    async def main() -> int:
        async with tinyacp.AsyncClient(Options(command=agent.argv, observer=tinyacp.BaseObserver())) as client:
            await client.initialize()
            await client.new_session("/")
            checkpoints = 0
            checkpoint = client._checkpoint

            async def counted() -> None:
                nonlocal checkpoints
                checkpoints += 1
                await checkpoint()

            client._checkpoint = counted  # type: ignore[method-assign]
            now = time.monotonic() + 1.0  # past the slice the handshake's last wait began
            client._driver._clock = lambda: now  # then no time passes: one fair slice holds every call
            for _ in range(turns):
                assert (await client.prompt("s1", "go")).stop_reason == "end_turn"
        return checkpoints

    # The loop last ran at the first call's checkpoint or wait, whichever call made it: no call pays a turn of its
    # own for starting (each such turn is a pass of the event loop and a poll of its selector).
    assert asyncio.run(asyncio.wait_for(main(), 30)) == 1


# ----------------------------------------------------------------------------------------------------------------
# 4. Nothing lost when the agent dies.


def test_an_agent_that_dies_while_the_client_writes_has_its_last_lines_recorded_first(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    lines = b"".join(update_line(f"last {n}") for n in range(3))
    agent = scripted(
        [*handshake()[:4], {"op": "raw_b64", "data": base64.b64encode(lines).decode()}, {"op": "exit", "code": 3}]
    )
    recorder = Recorder()
    limits = TransferLimits(max_message_bytes=16 * MiB)
    client = make_client(command=agent.argv, observer=recorder, transfer_limits=limits, timeout=30)
    client.initialize()
    client.new_session("/")

    started = time.monotonic()
    with pytest.raises(AgentExited):
        client.prompt("s1", "p" * (4 * MiB))  # the agent is gone before it reads any of it

    assert time.monotonic() - started < SLACK
    assert [update.text for update in recorder.updates] == ["last 0", "last 1", "last 2"]
    assert client.closed


def test_an_agent_that_closes_its_stdin_fails_the_next_write_at_once_after_its_lines_are_recorded(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    answer = json.dumps({"jsonrpc": "2.0", "id": 0, "result": INIT_RESULT}).encode() + b"\n"
    after = update_line("after 1") + update_line("after 2")
    agent = scripted(
        [
            {"op": "expect", "method": "initialize"},
            {"op": "close_stdin"},
            {"op": "raw_b64", "data": base64.b64encode(answer + after).decode()},  # one write: all in the pipe
            {"op": "hang"},
        ]
    )
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, timeout=30)
    client.initialize()

    started = time.monotonic()
    with pytest.raises(AgentExited, match="closed its input"):
        client.new_session("/")

    assert time.monotonic() - started < SLACK  # not the call's 30 s deadline
    assert [update.text for update in recorder.updates] == ["after 1", "after 2"]
    assert client.closed


def test_an_agent_that_dies_mid_stream_has_every_line_before_its_death_recorded(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [*handshake(), *({"op": "update", "update": chunk(f"u{n}")} for n in range(5)), {"op": "exit", "code": 7}]
    )
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, timeout=30)
    client.initialize()
    client.new_session("/")

    with pytest.raises(AgentExited) as raised:
        client.prompt("s1", "go")

    assert [update.text for update in recorder.updates] == [f"u{n}" for n in range(5)]
    assert raised.value.returncode == 7


# ----------------------------------------------------------------------------------------------------------------
# 5. Re-entrant calls fail fast.


def test_calls_from_inside_an_observer_method_of_the_sync_client_fail_fast_or_work_as_from_another_thread(
    scripted: MakeScripted,
) -> None:
    agent = scripted([*handshake(), {"op": "update", "update": chunk("one")}, {"op": "hang"}])
    seen: list[BaseException | None] = []

    class Reentrant(Recorder):
        client: tinyacp.Client

        def on_update(self, update: tinyacp.Update) -> None:
            super().on_update(update)
            for attempt in (self.client.close, lambda: self.client.new_session("/")):
                try:
                    attempt()
                    seen.append(None)
                except ClientBusy as exc:
                    seen.append(exc)
            self.client.cancel("s1")  # queued, written by the call in flight

        def on_send(self, message: tinyacp.OutgoingMessage) -> None:
            super().on_send(message)
            if message.method == "session/cancel":
                self.client.kill()  # the call in flight ends at its next batch

    recorder = Reentrant()
    client = tinyacp.Client(Options(command=agent.argv, observer=recorder, kill_grace=0.5))
    recorder.client = client
    try:
        client.initialize()
        client.new_session("/")
        with pytest.raises(AgentExited, match="kill"):
            client.prompt("s1", "go", timeout=30)
        assert [type(error) for error in seen] == [ClientBusy, ClientBusy]
        assert [message.method for message in recorder.of("send")][-1] == "session/cancel"
    finally:
        client.close()
    assert not _live_group_members(client.pid)


def test_calls_awaited_inside_an_observer_method_of_the_async_client_fail_fast_or_work_as_from_another_task(
    scripted: MakeScripted,
) -> None:
    agent = scripted([*handshake(), {"op": "update", "update": chunk("one")}, {"op": "hang"}])
    seen: list[BaseException | None] = []

    class Reentrant(Recorder):
        client: tinyacp.AsyncClient

        async def on_update(self, update: tinyacp.Update) -> None:  # type: ignore[override]
            super().on_update(update)
            for attempt in (self.client.close, lambda: self.client.new_session("/")):
                try:
                    await attempt()
                    seen.append(None)
                except ClientBusy as exc:
                    seen.append(exc)
            await self.client.cancel("s1")

        async def on_send(self, message: tinyacp.OutgoingMessage) -> None:  # type: ignore[override]
            super().on_send(message)
            if message.method == "session/cancel":
                self.client.kill()

    async def main() -> tinyacp.AsyncClient:
        recorder = Reentrant()
        client = tinyacp.AsyncClient(Options(command=agent.argv, observer=recorder, kill_grace=0.5))
        recorder.client = client
        try:
            await client.initialize()
            await client.new_session("/")
            with pytest.raises(AgentExited, match="kill"):
                await client.prompt("s1", "go", timeout=30)
            assert [type(error) for error in seen] == [ClientBusy, ClientBusy]
            assert [message.method for message in recorder.of("send")][-1] == "session/cancel"
        finally:
            await client.close()
        return client

    client = asyncio.run(asyncio.wait_for(main(), 30))
    assert not _live_group_members(client.pid)


# ----------------------------------------------------------------------------------------------------------------
# 6. AsyncClient.close() always waits for the reap.


def test_a_close_after_a_cancelled_close_still_waits_until_the_agents_group_is_gone(scripted: MakeScripted) -> None:
    agent = scripted([{"op": "ignore_sigterm"}, *handshake()[:2], {"op": "hang"}])

    async def main() -> int:
        client = tinyacp.AsyncClient(Options(command=agent.argv, kill_grace=1.0, observer=tinyacp.BaseObserver()))
        await client.initialize()  # the agent ignores SIGTERM from now on
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.close(), 0.1)  # cancelled while the agent ignores SIGTERM
        assert _live_group_members(client.pid)
        await client.close()
        assert not _live_group_members(client.pid)
        with pytest.raises(ChildProcessError):
            os.waitpid(client.pid, os.WNOHANG)
        return client.pid

    pid = asyncio.run(asyncio.wait_for(main(), 30))
    assert not _live_group_members(pid)


# ----------------------------------------------------------------------------------------------------------------
# 7. Non-finite numbers are refused.


@pytest.mark.parametrize("field", ["timeout", "cancel_grace", "kill_grace"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0])
def test_options_refuse_durations_that_are_not_finite_and_non_negative(field: str, value: float) -> None:
    durations: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=field):
        Options(command=["agent"], **durations)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_a_call_refuses_a_timeout_that_is_not_finite_and_non_negative_before_writing_anything(
    make_client: MakeClient, scripted: MakeScripted, value: float
) -> None:
    agent = scripted(handshake())
    client = make_client(command=agent.argv, observer=Recorder())
    with pytest.raises(ValueError, match="timeout"):
        client.initialize(timeout=value)
    assert client.initialize(timeout=10).protocol_version == 1
    assert agent.methods() == ["initialize"]


# ----------------------------------------------------------------------------------------------------------------
# The flush point.


def test_the_observer_is_flushed_after_recording_and_before_every_act(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    permission = {
        "sessionId": "s1",
        "toolCall": {"toolCallId": "t1", "title": "rm", "kind": "delete"},
        "options": [{"optionId": "no", "name": "No", "kind": "reject_once"}],
    }
    agent = scripted(
        [
            *handshake(),
            {"op": "update", "update": chunk("a")},
            {"op": "update", "update": chunk("b")},
            {"op": "request", "method": "session/request_permission", "params": permission, "id": 9},
            {"op": "update", "update": chunk("c")},
            end_turn(),
        ]
    )
    recorder = Flushing()
    client = make_client(command=agent.argv, observer=recorder, timeout=30)
    client.initialize()
    client.new_session("/")
    client.prompt("s1", "go")

    names = [name for name, _ in recorder.events]
    # Never two flushes in a row: only when something was recorded since the last one.
    assert all(not (a == b == "flush") for a, b in itertools.pairwise(names))
    # Every line we write is recorded, then flushed, then written; the call returns after a flush.
    for index, name in enumerate(names):
        if name == "send":
            assert names[index + 1] == "flush"
    assert names[-1] == "flush"
    decision = names.index("permission_decision")
    assert names[decision + 1 : decision + 3] == ["send", "flush"]
    assert names.index("update") < names.index("permission_request")


def test_an_observer_without_flush_is_never_asked_to_flush(make_client: MakeClient, scripted: MakeScripted) -> None:
    agent = scripted([*handshake(), {"op": "update", "update": chunk("a")}, end_turn()])
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, timeout=30)
    client.initialize()
    client.new_session("/")
    assert client.prompt("s1", "go").text == "a"
    assert not hasattr(recorder, "flush")


def test_a_failing_flush_stops_the_client_before_it_acts(make_client: MakeClient, scripted: MakeScripted) -> None:
    agent = scripted([*handshake(), {"op": "update", "update": chunk("a")}, end_turn()])

    class Failing(Recorder):
        def flush(self) -> None:
            if self.updates:
                raise OSError("disk full")

    recorder = Failing()
    client = make_client(command=agent.argv, observer=recorder, timeout=30)
    client.initialize()
    client.new_session("/")
    with pytest.raises(tinyacp.ObserverError, match="disk full"):
        client.prompt("s1", "go")
    assert client.closed


def test_a_failing_flush_is_what_a_failing_call_raises_its_own_error_the_context(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "overloaded"}}
    burst = update_line("a") + json.dumps(error).encode() + b"\n"  # one write: the client reads both at once
    agent = scripted([*handshake(), {"op": "raw_b64", "data": base64.b64encode(burst).decode()}, {"op": "hang"}])

    class Failing(Recorder):
        def flush(self) -> None:
            if self.updates:
                raise OSError("disk full")

    client = make_client(command=agent.argv, observer=Failing(), timeout=30)
    client.initialize()
    client.new_session("/")
    with pytest.raises(tinyacp.ObserverError, match="disk full") as raised:
        client.prompt("s1", "go")
    assert isinstance(raised.value.__context__, tinyacp.RequestError)  # the agent's error, not lost either
    assert client.closed  # a failing observer tears down, though a RequestError alone would not
