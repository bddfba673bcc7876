"""Deadlines, against real agent processes and both clients: no call waits for ever on an agent.

Every blocking call takes ``timeout`` (``Options.timeout`` is the default). A prompt's deadline first sends one
``session/cancel`` and waits up to ``Options.cancel_grace`` for the agent's final response. Deadlines are
measured on the monotonic clock, and waiting for one costs (almost) no CPU.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import tinyacp
from helpers import ClientLike, MakeClient, MakeScripted, Recorder, chunk, handshake, pid_alive
from tinyacp import AgentTimeout

# Reads (and logs) everything until its input closes, and never says a word.
SILENT = [{"op": "wait_eof"}]


def answer(request_id: int, reason: str) -> dict[str, Any]:
    """Answer our request ``request_id`` explicitly (after ``expect session/cancel``, ``reply`` would answer the
    cancel)."""
    return {"op": "send", "message": {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": reason}}}


def start(client: ClientLike) -> None:
    client.initialize()
    client.new_session("/")


def assert_torn_down(client: ClientLike) -> None:
    assert client.closed
    assert client.returncode is not None
    assert not pid_alive(client.pid)


# ----------------------------------------------------------------------------------------------------------------
# initialize and session/new.


def test_agent_timeout_is_also_a_builtin_timeout_error() -> None:
    assert issubclass(AgentTimeout, TimeoutError)
    assert issubclass(AgentTimeout, tinyacp.AgentError)


@pytest.mark.parametrize("call", ["initialize", "new_session"])
def test_a_handshake_call_with_no_answer_raises_agent_timeout_at_its_deadline(
    make_client: MakeClient, scripted: MakeScripted, call: str
) -> None:
    steps = SILENT if call == "initialize" else [*handshake()[:2], *SILENT]
    client = make_client(command=scripted(steps).argv)
    if call == "new_session":
        client.initialize()
    started = time.monotonic()

    with pytest.raises(TimeoutError) as caught:  # the builtin catches it
        client.initialize(timeout=0.3) if call == "initialize" else client.new_session("/", timeout=0.3)

    assert isinstance(caught.value, AgentTimeout)
    assert time.monotonic() - started >= 0.3  # the deadline, never before it


def test_options_timeout_is_the_default_deadline_and_a_call_can_override_it(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    slow_reply = [{"op": "sleep", "seconds": 0.5}, {"op": "reply", "result": {"protocolVersion": 1}}]
    # Each answer is slower than the default deadline; the first comes after its call gave up on it.
    agent = scripted([{"op": "expect", "method": "initialize"}, *slow_reply] * 2)
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(AgentTimeout):
        client.initialize()
    assert time.monotonic() - started >= 0.2

    # A handshake call's timeout leaves the client usable; the late answer is recorded as a stray response.
    assert client.initialize(timeout=10).protocol_version == 1
    responses = [(m.kind, m.id) for m in recorder.of("message")]
    assert responses == [(tinyacp.MessageKind.STRAY_RESPONSE, 0), (tinyacp.MessageKind.RESPONSE, 1)]
    # The call that gave up told the agent so, for its own id, before it raised.
    assert agent.methods() == ["initialize", "$/cancel_request", "initialize"]
    assert agent.received()[1]["params"] == {"requestId": 0}


@pytest.mark.parametrize("value", [-1, -0.001])
def test_a_negative_timeout_is_refused_before_anything_is_sent(
    make_client: MakeClient, scripted: MakeScripted, value: float
) -> None:
    agent = scripted([*handshake()[:2]])
    client = make_client(command=agent.argv)
    with pytest.raises(ValueError, match="timeout"):
        client.initialize(timeout=value)
    assert client.initialize(timeout=10).protocol_version == 1
    assert agent.methods() == ["initialize"]
    with pytest.raises(ValueError, match="timeout"):
        tinyacp.Options(command=agent.argv, timeout=value)


# ----------------------------------------------------------------------------------------------------------------
# prompt: the deadline cancels first, then waits cancel_grace.


def test_a_prompt_past_its_deadline_sends_one_cancel_and_returns_the_agents_answer_as_timed_out(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [
            *handshake(),
            {"op": "update", "update": chunk("before ")},
            {"op": "expect", "method": "session/cancel"},
            {"op": "update", "update": chunk("after")},
            answer(2, "cancelled"),
            {"op": "expect", "method": "session/prompt"},
            {"op": "reply", "result": {"stopReason": "end_turn"}},
        ]
    )
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, cancel_grace=10)
    start(client)
    started = time.monotonic()

    result = client.prompt("s1", "hi", timeout=0.3)

    assert time.monotonic() - started >= 0.3
    assert (result.timed_out, result.cancelled, result.stop_reason) == (True, True, "cancelled")
    assert result.text == "before after"  # what came during the grace was recorded and kept
    assert [update.text for update in recorder.updates] == ["before ", "after"]
    assert [message.method for message in recorder.of("send")].count("session/cancel") == 1
    assert not client.closed
    following = client.prompt("s1", "again", timeout=10)  # the client stays usable
    assert (following.timed_out, following.stop_reason) == (False, "end_turn")
    assert agent.methods().count("session/cancel") == 1


def test_a_prompt_whose_agent_ignores_the_cancel_raises_agent_timeout_and_leaves_no_process(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted([*handshake(), {"op": "update", "update": chunk("thinking")}, {"op": "wait_eof"}])
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, cancel_grace=1.0)
    start(client)
    started = time.monotonic()

    with pytest.raises(AgentTimeout):
        client.prompt("s1", "hi", timeout=0.2)

    assert time.monotonic() - started >= 1.2  # the deadline, then the whole grace
    assert_torn_down(client)
    assert [message.method for message in recorder.of("send")].count("session/cancel") == 1
    assert agent.methods().count("session/cancel") == 1  # it read the cancel during the grace, and ignored it
    assert [update.text for update in recorder.updates] == ["thinking"]
    with pytest.raises(tinyacp.ClientClosed):
        client.prompt("s1", "again")


def test_a_prompt_deadline_is_for_the_whole_turn_not_reset_by_each_update(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    # An agent that keeps talking for ten seconds and never answers, not even the cancel.
    trickle = [
        step for _ in range(200) for step in ({"op": "update", "update": chunk(".")}, {"op": "sleep", "seconds": 0.05})
    ]
    agent = scripted([*handshake(), *trickle, {"op": "wait_eof"}])
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, cancel_grace=0.3)
    start(client)
    started = time.monotonic()

    with pytest.raises(AgentTimeout):
        client.prompt("s1", "hi", timeout=0.3)

    assert time.monotonic() - started < 5  # half of what the agent would take
    assert recorder.updates  # it was talking all along
    assert_torn_down(client)


def test_a_prompt_the_agent_does_not_read_times_out_while_writing_and_tears_down(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted([*handshake()[:4], {"op": "hang"}])  # never reads again: the pipe fills up
    client = make_client(command=agent.argv, cancel_grace=0.3)
    start(client)

    with pytest.raises(AgentTimeout):
        client.prompt("s1", "x" * (4 << 20), timeout=0.3)  # far more than a pipe holds

    assert_torn_down(client)


@pytest.mark.slow
def test_a_prompt_the_agent_never_reads_raises_agent_timeout_at_its_deadline_without_waiting_for_the_grace(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    # No session/cancel can reach an agent that does not read: waiting cancel_grace for its answer would be waiting
    # for nothing. The whole call takes the deadline and the teardown (kill_grace), not the minute of grace.
    agent = scripted([*handshake()[:4], {"op": "hang"}])  # never reads again: the pipe fills up
    timeout, kill_grace, margin = 0.5, 0.5, 5.0
    client = make_client(command=agent.argv, cancel_grace=60, kill_grace=kill_grace)
    start(client)
    started = time.monotonic()

    with pytest.raises(AgentTimeout, match="did not read its input"):
        client.prompt("s1", "x" * (4 << 20), timeout=timeout)  # far more than a pipe holds

    elapsed = time.monotonic() - started
    assert timeout <= elapsed < timeout + kill_grace + margin
    assert_torn_down(client)
    assert "session/prompt" not in agent.methods()


def test_a_handshake_call_that_times_out_half_written_tears_the_agent_down(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    # Part of the line is in the pipe and cannot be taken back: anything written after it would be glued to it.
    agent = scripted([*handshake()[:2], {"op": "hang"}])  # never reads after initialize
    client = make_client(command=agent.argv)
    client.initialize()

    with pytest.raises(AgentTimeout):
        client.new_session("/" + "d" * (4 << 20), timeout=0.3)  # far more than a pipe holds

    assert_torn_down(client)
    with pytest.raises(tinyacp.ClientClosed, match="AgentTimeout"):
        client.new_session("/")


# ----------------------------------------------------------------------------------------------------------------
# The clock and the cost of waiting.


def test_waiting_for_a_deadline_costs_almost_no_cpu(make_client: MakeClient, scripted: MakeScripted) -> None:
    client = make_client(command=scripted(SILENT).argv)
    cpu, wall = time.process_time(), time.monotonic()

    with pytest.raises(AgentTimeout):
        client.initialize(timeout=1.0)

    wall = time.monotonic() - wall
    cpu = time.process_time() - cpu
    assert wall >= 1.0
    assert cpu < 0.2, f"{cpu:.3f} s of CPU during a {wall:.3f} s wait: the client is polling, not blocking"


def test_waiting_through_a_prompt_deadline_and_its_grace_costs_almost_no_cpu(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    client = make_client(command=scripted([*handshake(), {"op": "wait_eof"}]).argv, cancel_grace=0.5)
    start(client)
    cpu, wall = time.process_time(), time.monotonic()

    with pytest.raises(AgentTimeout):
        client.prompt("s1", "hi", timeout=0.5)

    wall = time.monotonic() - wall
    cpu = time.process_time() - cpu
    assert wall >= 1.0
    assert cpu < 0.2, f"{cpu:.3f} s of CPU during a {wall:.3f} s wait: the client is polling, not blocking"


def test_a_jump_of_the_wall_clock_does_not_move_a_deadline(
    make_client: MakeClient, scripted: MakeScripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(command=scripted(SILENT).argv)
    jumps = iter(range(0, 10**12, 3600))  # every read of the wall clock is an hour later than the last
    monkeypatch.setattr(time, "time", lambda: float(next(jumps)))
    started = time.monotonic()

    with pytest.raises(AgentTimeout):
        client.initialize(timeout=0.5)

    monkeypatch.undo()
    assert time.monotonic() - started >= 0.5
