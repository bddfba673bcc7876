"""``prompt_stream`` in both clients, against real child processes: the turn's updates as they arrive, each after
the observer recorded it, then the result; nothing read while the consumer holds back; leaving early cancels the
turn once and keeps the client usable; the stream raises what ``prompt`` raises, and holds the client meanwhile.

``Client.prompt_stream`` is an iterator (``with ... as stream: for update in stream``), ``AsyncClient``'s an
async one; both run the same call as ``prompt`` (``_calls.prompt_stream``), so they take the same arguments.
Each test checks that no process of the agent's group is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import Flood, MakeScripted, Recorder, chunk, end_turn, handshake, wait_for
from tinyacp import ClientBusy, PromptMedia, PromptText, StopReason, UnsupportedContent, UsageError
from tinyacp._process import _live_group_members

TIMEOUT = 20.0


def update(payload: dict[str, Any], session: str = "s1") -> dict[str, Any]:
    return {"op": "update", "update": payload, "session": session}


def answer_prompt(reason: str, request_id: int = 2) -> dict[str, Any]:
    """Answer the prompt with this id (initialize is 0, session/new 1), whatever the agent expected since."""
    response = {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": reason}}
    return {"op": "raw", "line": json.dumps(response)}


def assert_gone(pid: int) -> None:
    wait_for(lambda: not _live_group_members(pid), timeout=10, what=f"agent group {pid} gone")


@contextlib.contextmanager
def sync_client(command: list[str], **options: Any) -> Iterator[tinyacp.Client]:
    """A Client, closed after; then no process of its agent's group may be left."""
    options.setdefault("timeout", TIMEOUT)
    client = tinyacp.Client(tinyacp.Options(command=command, **options))
    try:
        yield client
    finally:
        client.close()
        assert_gone(client.pid)


@contextlib.asynccontextmanager
async def async_client(command: list[str], **options: Any) -> AsyncIterator[tinyacp.AsyncClient]:
    """An AsyncClient, closed after; then no process of its agent's group may be left."""
    options.setdefault("timeout", TIMEOUT)
    client = tinyacp.AsyncClient(tinyacp.Options(command=command, **options))
    try:
        yield client
    finally:
        await client.close()
        assert_gone(client.pid)


def run_async(main: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(2 * TIMEOUT):
            await main()

    asyncio.run(bounded())


TURN = [
    *handshake(),
    update(chunk("a")),
    update(chunk("not this turn's"), session="other"),
    update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read", "kind": "read"}),
    update(chunk("b")),
    end_turn(),
]
"""A turn of three updates of its own session and one of another."""

LEFT_EARLY = [
    *handshake(),
    update(chunk("a")),
    update(chunk("b")),
    {"op": "expect", "method": "session/cancel"},
    update(chunk("late")),
    answer_prompt("cancelled"),
    {"op": "expect", "method": "session/prompt"},
    end_turn(),
]
"""A turn the agent ends as cancelled once it reads the cancel, then a second turn."""


# ----------------------------------------------------------------------------------------------------------------
# Client.prompt_stream.


def test_sync_prompt_stream_yields_this_turns_updates_in_order_each_recorded_first_then_the_result(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(TURN)
    recorder = Recorder()
    with sync_client(agent.argv, observer=recorder) as client:
        client.initialize()
        session = client.new_session(tmp_path)
        seen: list[tinyacp.Update] = []
        with client.prompt_stream(session.id, "go") as stream:
            assert "session/prompt" not in [m.method for m in recorder.of("send")]  # sent on first use
            with pytest.raises(UsageError):
                stream.result  # noqa: B018 - the turn has not started
            for item in stream:
                assert recorder.updates[-1] is item  # recorded before it is handed out
                seen.append(item)

        assert [(u.seq, u.kind) for u in seen] == [
            (1, tinyacp.UpdateKind.AGENT_MESSAGE_CHUNK),
            (3, tinyacp.UpdateKind.TOOL_CALL),
            (4, tinyacp.UpdateKind.AGENT_MESSAGE_CHUNK),
        ]
        assert (stream.result.text, stream.result.update_count) == ("ab", 3)
        assert stream.result.stop_reason is StopReason.END_TURN
        assert len(recorder.updates) == 4
        assert list(stream) == []  # a finished stream stays finished


def test_sync_prompt_stream_left_early_cancels_the_turn_once_records_the_rest_and_keeps_the_client(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(LEFT_EARLY)
    recorder = Recorder()
    with sync_client(agent.argv, observer=recorder) as client:
        client.initialize()
        client.new_session(tmp_path)
        with client.prompt_stream("s1", "go") as stream:
            first = next(stream)
        assert first.text == "a"

        assert (stream.result.cancelled, stream.result.stop_reason) == (True, StopReason.CANCELLED)
        assert [u.text for u in recorder.updates] == ["a", "b", "late"]  # read on and recorded, not handed out
        following = client.prompt("s1", "again")
        assert following.stop_reason is StopReason.END_TURN
    assert agent.methods().count("session/cancel") == 1


def test_sync_prompt_stream_holds_the_client_until_the_turn_ends(scripted: MakeScripted, tmp_path: Path) -> None:
    agent = scripted([*TURN[:-1], {"op": "expect", "method": "session/cancel"}, end_turn("cancelled")])
    with sync_client(agent.argv, observer=Recorder()) as client:
        client.initialize()
        client.new_session(tmp_path)
        stream = client.prompt_stream("s1", "go")
        next(stream)
        with pytest.raises(ClientBusy):
            client.new_session(tmp_path)
        client.cancel("s1")  # from the consumer's side, between two updates: written by the stream
        assert [u.text for u in stream] == [None, "b"]
        assert stream.result.stop_reason is StopReason.CANCELLED
        assert not client.closed


def test_sync_prompt_stream_raises_what_prompt_raises_on_first_use_and_releases_the_client(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(TURN)
    with sync_client(agent.argv, observer=Recorder()) as client:
        client.initialize()
        client.new_session(tmp_path)
        stream = client.prompt_stream("s1", [PromptText("look"), PromptMedia.image("iVBO", "image/png")])
        with pytest.raises(UnsupportedContent):
            next(stream)
        assert "session/prompt" not in agent.methods()
        assert client.prompt("s1", "go").text == "ab"  # the client was released


def test_sync_close_while_a_stream_was_left_open_tears_down_without_waiting(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted([*handshake(), update(chunk("a")), {"op": "wait_eof"}])
    recorder = Recorder()
    client = tinyacp.Client(tinyacp.Options(command=agent.argv, observer=recorder, timeout=TIMEOUT))
    client.initialize()
    client.new_session(tmp_path)
    stream = client.prompt_stream("s1", "go")
    assert next(stream).text == "a"

    client.close()  # the consumer dropped the stream without closing it

    assert client.closed
    assert_gone(client.pid)
    assert list(stream) == []


def test_sync_prompt_stream_does_not_read_while_the_consumer_holds_back(tmp_path: Path) -> None:
    flood = Flood(tmp_path)  # about 700 KB: ten times what the pipe and our line buffer hold together
    with sync_client(flood.command, **flood.options()) as client:
        client.initialize()
        session = client.new_session(tmp_path)
        with client.prompt_stream(session.id, "flood") as stream:
            first = next(stream)

            # The consumer holds on to the first update; the agent fills the pipe and gets stuck.
            wait_for(lambda: flood.status()[0] == "stuck", timeout=TIMEOUT, what="the agent to get stuck")
            assert flood.held_back()
            assert flood.recorder.updates == [first]

            rest = list(stream)
        assert len(rest) == flood.count - 1
        assert stream.result.chunk_count == flood.count
    assert flood.status()[0] == "done"


# ----------------------------------------------------------------------------------------------------------------
# Both clients: the same call as prompt.


def test_prompt_stream_sends_meta_like_prompt_in_both_clients(scripted: MakeScripted, tmp_path: Path) -> None:
    meta = {"trace": "t-1"}
    sync_agent = scripted(TURN, name="sync")
    with sync_client(sync_agent.argv, observer=Recorder()) as client:
        client.initialize()
        client.new_session(tmp_path)
        with client.prompt_stream("s1", "go", meta=meta) as stream:
            assert len(list(stream)) == 3

    async_agent = scripted(TURN, name="async")

    async def main() -> None:
        async with async_client(async_agent.argv, observer=Recorder()) as client:
            await client.initialize()
            await client.new_session(tmp_path)
            async with client.prompt_stream("s1", "go", meta=meta) as stream:
                assert len([item async for item in stream]) == 3

    run_async(main)
    for agent in (sync_agent, async_agent):
        (sent,) = [m for m in agent.received() if m.get("method") == "session/prompt"]
        assert sent["params"]["_meta"] == meta


def test_async_prompt_stream_left_early_cancels_the_turn_once_records_the_rest_and_keeps_the_client(
    scripted: MakeScripted, tmp_path: Path
) -> None:
    agent = scripted(LEFT_EARLY)
    recorder = Recorder()

    async def main() -> None:
        async with async_client(agent.argv, observer=recorder) as client:
            await client.initialize()
            await client.new_session(tmp_path)
            async with client.prompt_stream("s1", "go") as stream:
                first = await anext(stream)
            assert first.text == "a"

            assert (stream.result.cancelled, stream.result.stop_reason) == (True, StopReason.CANCELLED)
            assert [u.text for u in recorder.updates] == ["a", "b", "late"]
            assert (await client.prompt("s1", "again")).stop_reason is StopReason.END_TURN

    run_async(main)
    assert agent.methods().count("session/cancel") == 1
