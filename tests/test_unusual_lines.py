"""Lines real agents write that a strict decoder refuses: every request with a readable id gets an answer, a
byte-order mark before the first line is tolerated, and a lone surrogate escape stays in the reply.

The core alone (fed whole lines, and one byte at a time through the line reader), then both clients with a
scripted agent.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from helpers import MakeClient, MakeScripted, Recorder, chunk, handshake
from helpers.core import CoreDriver
from tinyacp import AgentMessage, ClientInfo, MessageKind, PermissionPolicy, ReaderLimits, TransferLimits
from tinyacp._conversation import Conversation
from tinyacp.reader import LineReader

BOM = b"\xef\xbb\xbf"
DEEP = b"[" * 5000 + b"]" * 5000
"""Nested far past the decoder's limit (about a thousand levels)."""


class Lines(CoreDriver):
    def feed(self, data: bytes, piece: int | None) -> None:
        reader = LineReader(None, ReaderLimits(1 << 20))
        pos = 0
        while pos < len(data):
            view = reader.writable()
            n = min(len(view), len(data) - pos, piece or len(data))
            view[:n] = data[pos : pos + n]
            reader.commit(n)
            pos += n
            while type(line := reader.poll()) is bytes:
                self._handle(line)

    def writes(self) -> list[dict[str, Any]]:
        return [json.loads(data) for name, data in self.events if name == "write"]

    def messages(self) -> list[AgentMessage]:
        return [value for name, value in self.events if name == "on_message"]


def core() -> Conversation:
    return Conversation(
        epoch=1,
        transfer_limits=TransferLimits(),
        reader_limits=ReaderLimits(1 << 20),
        policy=PermissionPolicy(),
        client_info=ClientInfo("tests", "1"),
        has_observer=True,
    )


def update(text: str) -> bytes:
    params = {"sessionId": "s1", "update": chunk(text)}
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}).encode()


# -- 8. every agent request with an id gets an answer --------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":' + DEEP + b"}", -32602),
        (b'{"jsonrpc":"2.0","id":"r7","method":"fs/read_text_file","params":{"a":' + DEEP + b"}}", -32602),
        (b'{"jsonrpc":"2.0","id":7,"method":5,"params":{}}', -32600),
        (b'{"jsonrpc":"1.0","id":7,"method":"session/request_permission","params":{}}', -32600),
        (b'{"id":7,"method":"x","params":{}}', -32600),
    ],
    ids=["deep permission params", "deep params, string id", "method not a string", "jsonrpc 1.0", "no jsonrpc"],
)
def test_a_request_that_cannot_be_decoded_is_recorded_then_answered_with_an_error_for_its_id(
    line: bytes, code: int, piece: int | None
) -> None:
    driver = Lines(core())
    driver.feed(line + b"\n", piece)

    (message,) = driver.messages()
    assert (message.kind, message.raw) == (MessageKind.INVALID_REQUEST, line)
    (answer,) = driver.writes()
    assert answer["id"] == json.loads(line.replace(DEEP, b"0"))["id"]
    assert answer["error"]["code"] == code
    assert [name for name, _ in driver.events] == ["on_message", "on_send", "write"]  # recorded first


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":7,"result":' + DEEP + b"}",  # a response: never answered
        b'{"jsonrpc":"2.0","method":"x","params":' + DEEP + b"}",  # a notification: nothing to answer
        b'{"jsonrpc":"2.0","method":"x","params":{"id":7,"a":' + DEEP + b"}}",  # an id, but not the top-level one
        b'{"jsonrpc":"2.0","id":true,"method":5}',  # no usable id
        b"[" + DEEP + b"]",
    ],
    ids=["deep response", "deep notification", "nested id", "bool id", "deep array"],
)
def test_a_line_that_is_no_request_with_a_readable_id_is_only_recorded(line: bytes) -> None:
    driver = Lines(core())
    driver.feed(line + b"\n", None)
    (message,) = driver.messages()
    assert (message.kind, message.raw) == (MessageKind.INVALID, line)
    assert driver.writes() == []


# -- 8. a byte-order mark before the first line ----------------------------------------------------------------


def test_a_byte_order_mark_before_the_first_line_is_recorded_exactly_and_skipped_for_parsing(
    piece: int | None,
) -> None:
    driver = Lines(core())
    driver.feed(BOM + update("hi") + b"\n" + update("there") + b"\n", piece)
    updates = [value for name, value in driver.events if name == "on_update"]
    assert [u.text for u in updates] == ["hi", "there"]
    assert updates[0].raw == BOM + update("hi")


def test_a_byte_order_mark_later_in_the_output_is_an_invalid_line() -> None:
    driver = Lines(core())
    driver.feed(update("hi") + b"\n" + BOM + update("there") + b"\n", None)
    assert [value.text for name, value in driver.events if name == "on_update"] == ["hi"]
    assert [m.kind for m in driver.messages()] == [MessageKind.INVALID]


# -- 9. lone surrogates ----------------------------------------------------------------------------------------


def test_a_lone_surrogate_escape_stays_in_the_reply_with_a_replacement_character(piece: int | None) -> None:
    conversation = core()
    driver = Lines(conversation)
    call = conversation.prompt("s1", "hi")
    halves = [
        update("a").replace(b'"a"', b'"smile \\ud83d"'),
        update("b").replace(b'"b"', b'"\\ude00 done"'),
        update("c").replace(b'"c"', b'"pair \\ud83d\\ude00, escaped \\\\ud83d"'),
    ]
    driver.feed(b"\n".join(halves) + b'\n{"jsonrpc":"2.0","id":0,"result":{"stopReason":"end_turn"}}\n', piece)

    updates = [value for name, value in driver.events if name == "on_update"]
    assert [u.raw for u in updates] == halves
    assert [u.text for u in updates] == ["smile \ufffd", "\ufffd done", "pair \U0001f600, escaped \\ud83d"]
    assert call.message.id == 0
    assert driver.messages()[-1].kind == MessageKind.RESPONSE


# -- through both clients --------------------------------------------------------------------------------------


def test_both_clients_answer_an_undecodable_request_and_keep_a_lone_surrogate_in_the_reply(
    make_client: MakeClient, scripted: MakeScripted
) -> None:
    deep = b'{"jsonrpc":"2.0","id":41,"method":"session/request_permission","params":' + DEEP + b"}\n"
    half = update("x").replace(b'"x"', b'"cut \\ud83d"') + b"\n"
    agent = scripted(
        [
            *handshake(),
            {"op": "raw_b64", "data": base64.b64encode(deep).decode()},
            {"op": "expect", "method": None},  # the client's answer to id 41
            {"op": "raw_b64", "data": base64.b64encode(half).decode()},
            {"op": "send", "message": {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}},
        ]
    )
    recorder = Recorder()
    client = make_client(command=agent.argv, observer=recorder, timeout=30)
    client.initialize()
    client.new_session("/")

    result = client.prompt("s1", "go")

    assert result.text == "cut \ufffd"
    answers = [m for m in agent.received() if m.get("id") == 41]
    assert [a["error"]["code"] for a in answers] == [-32602]
    invalid = [m for m in recorder.of("message") if m.kind == MessageKind.INVALID_REQUEST]
    assert [m.raw for m in invalid] == [deep.rstrip(b"\n")]
