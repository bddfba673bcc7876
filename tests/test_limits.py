"""The transfer limits, against real agent processes and both clients: what the agent sends stays bounded.

Each limit is tested exactly at its value (accepted) and one past it (refused), with sizes counted the way the
library documents them: lines without their newline, reply text in UTF-8 bytes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import (
    AGENTS,
    ClientLike,
    MakeClient,
    MakeScripted,
    Recorder,
    Scripted,
    chunk,
    end_turn,
    handshake,
    pid_alive,
)
from tinyacp import MessageKind, Overflow, OverflowKind, TransferLimitExceeded, TransferLimits
from tinyacp._process import AgentProcess

MiB = 1024 * 1024
FIELDS = ["max_message_bytes", "max_update_bytes", "max_updates", "max_reply_bytes", "max_reply_chunks"]

PERMISSION_OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def compact(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def update_line(update: dict[str, Any], session: str = "s1") -> str:
    return compact({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})


def padded_update(size: int, kind: str = "agent_message_chunk") -> str:
    """A ``session/update`` line of exactly ``size`` bytes (ASCII, without its newline)."""
    if kind == "agent_message_chunk":
        shape: Callable[[str], dict[str, Any]] = chunk
    else:  # an update kind this client does not know: it takes the loose path through the core
        shape = lambda text: {"sessionUpdate": kind, "text": text}  # noqa: E731
    overhead = len(update_line(shape("")))
    line = update_line(shape("x" * (size - overhead)))
    assert len(line.encode()) == size
    return line


def answer(request_id: int, reason: str) -> dict[str, Any]:
    """Answer our request ``request_id`` (the scripted agent's ``reply`` answers the last expected message,
    which after ``expect session/cancel`` is the cancel)."""
    return {"op": "send", "message": {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": reason}}}


def permission_request(request_id: int) -> dict[str, Any]:
    params = {
        "sessionId": "s1",
        "toolCall": {"toolCallId": f"t{request_id}", "title": "rm -rf build", "kind": "execute"},
        "options": PERMISSION_OPTIONS,
    }
    return {"op": "request", "id": request_id, "method": "session/request_permission", "params": params}


def options(agent: Scripted | list[str], observer: Recorder | None = None, **limits: int) -> tinyacp.Options:
    """Options for an agent, with an observer and the given transfer limits (the reader limit as needed)."""
    argv = agent.argv if isinstance(agent, Scripted) else agent
    transfer = TransferLimits(**limits)
    reader = tinyacp.ReaderLimits(max(tinyacp.DEFAULT_MAX_LINE, transfer.max_update_bytes))
    return tinyacp.Options(
        command=argv,
        observer=observer if observer is not None else Recorder(),
        transfer_limits=transfer,
        reader_limits=reader,
        timeout=10,
    )


def start(client: ClientLike, cwd: str = "/") -> None:
    client.initialize()
    client.new_session(cwd)


def cancels(agent: Scripted) -> int:
    return agent.methods().count("session/cancel")


def assert_torn_down(client: ClientLike) -> None:
    """The client closed itself and the agent is gone (reaped: its returncode is known)."""
    assert client.closed
    assert client.returncode is not None
    assert not pid_alive(client.pid)
    with pytest.raises(tinyacp.ClientClosed):
        client.prompt("s1", "anything")


# ----------------------------------------------------------------------------------------------------------------
# The limits themselves.


def test_default_limits_are_the_documented_values() -> None:
    assert TransferLimits() == TransferLimits(
        max_message_bytes=16 * MiB,
        max_update_bytes=1 * MiB,
        max_updates=10_000_000,
        max_reply_bytes=16 * MiB,
        max_reply_chunks=1_000_000,
    )
    assert tinyacp.Options(command=["agent"]).transfer_limits == TransferLimits()
    # The default update limit fits the default reader, so the default Options build a client.
    assert TransferLimits().max_update_bytes <= tinyacp.DEFAULT_MAX_LINE


@pytest.mark.parametrize("value", [0, -1, True, False, 1.0, 2.5, "1", None])
@pytest.mark.parametrize("field", FIELDS)
def test_a_limit_that_is_not_a_positive_int_is_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        TransferLimits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", FIELDS)
def test_a_limit_of_one_is_accepted(field: str) -> None:
    assert getattr(TransferLimits(**{field: 1}), field) == 1


def test_an_update_limit_above_the_line_limit_is_refused_before_the_agent_starts(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_spawn(*args: object, **kwargs: object) -> None:
        raise AssertionError("the agent was started")

    monkeypatch.setattr(AgentProcess, "spawn", no_spawn)
    with pytest.raises(ValueError, match="max_update_bytes"):
        make_client(
            command=[sys.executable, "-c", "import sys; sys.stdin.read()"],
            reader_limits=tinyacp.ReaderLimits(4096),
            transfer_limits=TransferLimits(max_update_bytes=4097),
        )


def test_an_update_limit_equal_to_the_line_limit_is_accepted(make_client: MakeClient, scripted: MakeScripted) -> None:
    agent = scripted([*handshake(), {"op": "raw", "line": padded_update(4096)}, end_turn()])
    client = make_client(
        command=agent.argv,
        observer=Recorder(),
        reader_limits=tinyacp.ReaderLimits(4096),
        transfer_limits=TransferLimits(max_update_bytes=4096),
    )
    start(client)
    assert client.prompt("s1", "hi").text == "x" * (4096 - len(update_line(chunk(""))))


# ----------------------------------------------------------------------------------------------------------------
# What we write: max_message_bytes.

LIMIT = 4096


def prompt_line(request_id: int, text: str) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/prompt",
        "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]},
    }
    return compact(body).encode()


def test_a_message_exactly_at_the_limit_is_sent_and_one_byte_more_is_refused_before_any_write(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted([*handshake(), end_turn(), {"op": "expect", "method": "session/prompt"}, end_turn()])
    recorder = Recorder()
    client = make_client(options(agent, recorder, max_message_bytes=LIMIT))
    start(client)
    overhead = len(prompt_line(2, ""))
    # One byte too long, and counted in UTF-8 bytes: "é" is two bytes, so far fewer characters than LIMIT.
    room = LIMIT + 1 - overhead
    too_long = "é" * (room // 2) + "a" * (room % 2)
    assert len(prompt_line(2, too_long)) == LIMIT + 1

    with pytest.raises(TransferLimitExceeded, match="max_message_bytes") as refused:
        client.prompt("s1", too_long)

    assert (refused.value.limit, refused.value.value, refused.value.size, refused.value.seq) == (
        "max_message_bytes",
        LIMIT,
        LIMIT + 1,
        None,
    )
    assert f"{LIMIT + 1}" in str(refused.value)
    assert not client.closed
    # Nothing was shown to the observer as sent, and nothing reached the agent.
    assert [message.method for message in recorder.of("send")] == ["initialize", "session/new"]

    exact = "a" * (LIMIT - overhead)
    result = client.prompt("s1", exact)  # the refused prompt used no request id: this one is id 2 again
    assert result.stop_reason == "end_turn"
    assert recorder.of("send")[-1].raw == prompt_line(2, exact)
    assert len(prompt_line(2, exact)) == LIMIT

    assert client.prompt("s1", "and again").stop_reason == "end_turn"
    prompts = [message for message in agent.received() if message.get("method") == "session/prompt"]
    assert [message["params"]["prompt"][0]["text"] for message in prompts] == [exact, "and again"]


def test_a_session_request_past_the_limit_is_refused_and_the_client_stays_usable(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(handshake())
    recorder = Recorder()
    client = make_client(options(agent, recorder, max_message_bytes=LIMIT))
    client.initialize()
    with pytest.raises(TransferLimitExceeded, match="max_message_bytes"):
        client.new_session("/" + "d" * LIMIT)
    assert client.new_session("/").id == "s1"
    assert agent.methods() == ["initialize", "session/new"]
    assert agent.received()[1]["params"]["cwd"] == "/"


def test_a_cancel_past_the_message_limit_is_refused_and_the_client_stays_usable(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted([*handshake(), end_turn()])
    recorder = Recorder()
    client = make_client(options(agent, recorder, max_message_bytes=LIMIT))
    start(client)
    with pytest.raises(TransferLimitExceeded, match="max_message_bytes"):
        client.cancel("s" * LIMIT)
    assert not client.closed
    assert client.prompt("s1", "still here").stop_reason == "end_turn"
    assert "session/cancel" not in [message.method for message in recorder.of("send")]
    assert "session/cancel" not in agent.methods()


# ----------------------------------------------------------------------------------------------------------------
# What the agent sends: max_update_bytes and max_updates.


@pytest.mark.parametrize("kind", ["agent_message_chunk", "a_kind_from_the_future"])
def test_an_update_exactly_at_the_limit_is_taken_and_one_byte_more_tears_the_agent_down(
    make_client: MakeClient, scripted: MakeScripted, kind: str
) -> None:
    at_limit, past_limit = padded_update(LIMIT, kind), padded_update(LIMIT + 1, kind)
    agent = scripted([*handshake(), {"op": "raw", "line": at_limit}, {"op": "raw", "line": past_limit}, end_turn()])
    recorder = Recorder()
    client = make_client(options(agent, recorder, max_update_bytes=LIMIT))
    start(client)

    with pytest.raises(TransferLimitExceeded, match=r"max_update_bytes.*seq 2") as refused:
        client.prompt("s1", "hi")

    assert (refused.value.limit, refused.value.value, refused.value.size, refused.value.seq) == (
        "max_update_bytes",
        LIMIT,
        LIMIT + 1,
        2,
    )
    # The update at the limit was recorded and acted on; the one past it was only recorded, as refused.
    assert [(update.seq, update.raw) for update in recorder.updates] == [(1, at_limit.encode())]
    last_name, last = recorder.events[-1]
    assert last_name == "message"
    assert (last.kind, last.raw, last.method) == (MessageKind.REFUSED_UPDATE, past_limit.encode(), "session/update")
    assert "seq 2" in last.detail
    assert_torn_down(client)


def test_the_update_count_runs_over_the_clients_life_and_the_first_update_past_it_tears_down(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}
    agent = scripted(
        [
            *handshake(),
            {"op": "update", "update": chunk("a")},
            {"op": "update", "update": thought},  # every kind counts,
            {"op": "update", "update": chunk("b"), "session": "s2"},  # and every session
            end_turn(),
            {"op": "expect", "method": "session/prompt"},
            {"op": "update", "update": chunk("c")},
            {"op": "update", "update": chunk("d")},
            end_turn(),
            {"op": "expect", "method": "session/prompt"},
            {"op": "update", "update": chunk("e")},
            end_turn(),
        ]
    )
    recorder = Recorder()
    client = make_client(options(agent, recorder, max_updates=5))
    start(client)
    assert client.prompt("s1", "one").text == "a"
    assert client.prompt("s1", "two").text == "cd"  # updates 4 and 5: exactly at the limit

    with pytest.raises(TransferLimitExceeded, match=r"max_updates.*seq 6") as refused:
        client.prompt("s1", "three")

    assert (refused.value.limit, refused.value.value, refused.value.seq) == ("max_updates", 5, 6)
    assert [update.seq for update in recorder.updates] == [1, 2, 3, 4, 5]
    refused_records = [m for m in recorder.of("message") if m.kind is MessageKind.REFUSED_UPDATE]
    assert len(refused_records) == 1
    assert b'"text":"e"' in refused_records[0].raw
    assert_torn_down(client)


# ----------------------------------------------------------------------------------------------------------------
# One prompt's reply: max_reply_bytes and max_reply_chunks.

# The limit, its value, chunks that fill it exactly, and the overflow when the limit is one less.
REPLY_CASES = {
    "bytes": (
        "max_reply_bytes",
        10,
        ["abcd", "efghij"],
        Overflow(OverflowKind.REPLY_BYTES, kept_bytes=4, kept_chunks=1, left_out_seq=2),
    ),
    # Three characters, eight UTF-8 bytes: a limit counted in characters would keep them all at 7.
    "utf8-bytes": (
        "max_reply_bytes",
        8,
        ["éé", "😀"],
        Overflow(OverflowKind.REPLY_BYTES, kept_bytes=4, kept_chunks=1, left_out_seq=2),
    ),
    "chunks": (
        "max_reply_chunks",
        3,
        ["a", "b", "c"],
        Overflow(OverflowKind.REPLY_CHUNKS, kept_bytes=2, kept_chunks=2, left_out_seq=3),
    ),
}


@pytest.mark.parametrize("case", list(REPLY_CASES))
def test_a_reply_exactly_at_a_reply_limit_is_kept_whole(
    make_client: MakeClient, scripted: MakeScripted, case: str
) -> None:
    field, limit, texts, _ = REPLY_CASES[case]
    steps = [*handshake(), *({"op": "update", "update": chunk(text)} for text in texts), end_turn()]
    agent = scripted(
        [*steps, {"op": "expect", "method": "session/new"}, {"op": "reply", "result": {"sessionId": "s2"}}]
    )
    client = make_client(options(agent, None, **{field: limit}))
    start(client)

    result = client.prompt("s1", "hi")

    assert (result.text, result.overflow, result.cancelled, result.chunk_count) == (
        "".join(texts),
        None,
        False,
        len(texts),
    )
    client.new_session("/")  # the agent logged everything we wrote before this
    assert cancels(agent) == 0


@pytest.mark.parametrize("case", list(REPLY_CASES))
def test_a_reply_one_past_a_reply_limit_keeps_what_fit_cancels_once_and_still_returns_the_final_response(
    make_client: MakeClient, scripted: MakeScripted, case: str
) -> None:
    field, limit, texts, overflow = REPLY_CASES[case]
    tool_call = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "read", "status": "pending"}
    agent = scripted(
        [
            *handshake(),
            *({"op": "update", "update": chunk(text)} for text in texts),
            {"op": "update", "update": chunk("z")},  # would fit, but comes after a chunk that was left out
            {"op": "expect", "method": "session/cancel"},
            {"op": "update", "update": chunk("late")},
            {"op": "update", "update": tool_call},
            {"op": "send", "message": {"jsonrpc": "2.0", "method": "_vendor/note", "params": {}}},
            answer(2, "cancelled"),
            {"op": "expect", "method": "session/new"},
            {"op": "reply", "result": {"sessionId": "s2"}},
        ]
    )
    recorder = Recorder()
    client = make_client(options(agent, recorder, **{field: limit - 1}))
    start(client)

    result = client.prompt("s1", "hi")

    kept = overflow.kept_chunks
    assert result.overflow == overflow
    assert result.text == "".join(texts[:kept])
    assert (result.stop_reason, result.cancelled, result.timed_out) == ("cancelled", True, False)
    assert result.chunk_count == len(texts) + 2
    assert result.update_count == len(texts) + 3
    # The observer saw every update, the left-out ones and the ones after the cancel too, and the notification.
    assert [update.text for update in recorder.updates] == [*texts, "z", "late", None]
    assert recorder.updates[overflow.left_out_seq - 1].text == texts[kept]
    assert [message.method for message in recorder.of("message") if message.kind is MessageKind.NOTIFICATION] == [
        "_vendor/note"
    ]
    assert not client.closed
    client.new_session("/")  # the agent logged everything we wrote before this
    assert cancels(agent) == 1
    assert [message.method for message in recorder.of("send")].count("session/cancel") == 1


def test_an_agent_that_ignores_the_overflow_cancel_gets_cancel_grace_then_is_torn_down(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted([*handshake(), {"op": "update", "update": chunk("abc")}, {"op": "ignore_sigterm"}, {"op": "hang"}])
    recorder = Recorder()
    base = options(agent, recorder, max_reply_bytes=2)
    client = make_client(dataclasses.replace(base, cancel_grace=0.3, kill_grace=0.2))
    start(client)

    with pytest.raises(tinyacp.AgentTimeout):
        client.prompt("s1", "hi", timeout=None)  # no deadline of the caller's: only the grace ends the wait

    assert [update.text for update in recorder.updates] == ["abc"]
    assert [message.method for message in recorder.of("send")].count("session/cancel") == 1
    assert_torn_down(client)


def test_after_a_reply_overflow_permission_requests_get_the_cancelled_outcome(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    agent = scripted(
        [
            *handshake(),
            permission_request(10),  # before the overflow: decided by the caller's rules
            {"op": "update", "update": chunk("abcd")},
            {"op": "expect", "method": "session/cancel"},
            permission_request(11),  # after it: the turn is being cancelled
            answer(2, "cancelled"),
        ]
    )
    recorder = Recorder(decide=lambda request: tinyacp.PermissionReply.allow())
    client = make_client(options(agent, recorder, max_reply_bytes=3))
    start(client)

    result = client.prompt("s1", "hi")

    assert result.overflow == Overflow(OverflowKind.REPLY_BYTES, kept_bytes=0, kept_chunks=0, left_out_seq=1)
    answers = {message["id"]: message["result"] for message in agent.received() if message.get("id") in (10, 11)}
    assert answers == {
        10: {"outcome": {"outcome": "selected", "optionId": "yes"}},
        11: {"outcome": {"outcome": "cancelled"}},
    }
    decisions = recorder.of("permission_decision")
    assert [decision.decided_by for decision in decisions] == [
        tinyacp.DecisionSource.OBSERVER,
        tinyacp.DecisionSource.CANCELLED,
    ]


def test_reply_limits_count_only_this_sessions_message_chunks_and_start_afresh_with_each_prompt(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "long thoughts"}}
    agent = scripted(
        [
            *handshake(),
            {"op": "update", "update": chunk("12345")},
            {"op": "update", "update": chunk("678")},  # past max_reply_bytes=6
            {"op": "expect", "method": "session/cancel"},
            answer(2, "cancelled"),
            {"op": "expect", "method": "session/prompt"},
            {"op": "update", "update": thought},
            {"op": "update", "update": chunk("elsewhere"), "session": "s2"},
            {"op": "update", "update": chunk("123456")},
            end_turn(),
        ]
    )
    client = make_client(options(agent, max_reply_bytes=6))
    start(client)
    first = client.prompt("s1", "one")
    assert (first.text, first.overflow) == ("12345", Overflow(OverflowKind.REPLY_BYTES, 5, 1, 2))

    second = client.prompt("s1", "two")

    assert (second.text, second.overflow, second.cancelled) == ("123456", None, False)


# ----------------------------------------------------------------------------------------------------------------
# The reader's line limit.


@pytest.mark.parametrize("during", ["initialize", "prompt"])
def test_a_line_past_the_reader_limit_stops_reading_before_any_json_is_parsed(
    make_client: MakeClient, scripted: MakeScripted, during: str
) -> None:
    at_limit, past_limit = padded_update(LIMIT), padded_update(LIMIT + 1)
    lines = [{"op": "raw", "line": at_limit}, {"op": "raw", "line": past_limit}, end_turn()]
    if during == "initialize":
        agent = scripted([{"op": "expect", "method": "initialize"}, *lines])
    else:
        agent = scripted([*handshake(), *lines])
    recorder = Recorder()
    client = make_client(
        command=agent.argv,
        observer=recorder,
        reader_limits=tinyacp.ReaderLimits(LIMIT),
        transfer_limits=TransferLimits(max_update_bytes=LIMIT),
        timeout=10,
    )

    with pytest.raises(tinyacp.ReaderExhaustion) as exhausted:
        if during == "initialize":
            client.initialize()
        else:
            start(client)
            client.prompt("s1", "hi")

    assert (exhausted.value.max_line, exhausted.value.seen) == (LIMIT, LIMIT + 1)
    # The line at the limit was taken; of the long one nothing was decoded, numbered or recorded.
    assert [(update.seq, update.raw) for update in recorder.updates] == [(1, at_limit.encode())]
    assert not [m for m in recorder.of("message") if m.kind is not MessageKind.RESPONSE]
    assert_torn_down(client)


# ----------------------------------------------------------------------------------------------------------------
# A real flood through a concurrent agent, which reads (and logs) while it writes.


def test_a_flood_past_the_reply_limit_gets_exactly_one_cancel_while_the_agent_keeps_writing(
    make_client: MakeClient, tmp_path: Path
) -> None:
    log = tmp_path / "flood.log"
    argv = [sys.executable, os.fspath(AGENTS / "firehose_agent.py"), os.fspath(log)]
    argv += ["--count", "2000", "--chunk-bytes", "1000", "--await-cancel", "20"]
    counted = Recorder()
    client = make_client(options(argv, counted, max_reply_bytes=10_500))
    start(client)

    result = client.prompt("s1", "flood")

    assert result.overflow == Overflow(OverflowKind.REPLY_BYTES, kept_bytes=10_000, kept_chunks=10, left_out_seq=11)
    assert (len(result.text), result.chunk_count, result.stop_reason) == (10_000, 2000, "cancelled")
    assert len(counted.updates) == 2000
    client.new_session("/")  # the agent logs each line before it answers, so it logged all we wrote before this
    methods = [json.loads(line).get("method") for line in log.read_bytes().splitlines()]
    assert methods == ["initialize", "session/new", "session/prompt", "session/cancel", "session/new"]
