"""The pure parts of the core on their own: what a line of the agent is (:mod:`tinyacp._inbound`) and what an
answer to our request decodes to (:mod:`tinyacp._answers`), without a conversation around them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tinyacp import AuthRequired, ProtocolViolation, RequestError, SessionNotFound, StopReason, TurnUsage
from tinyacp import _answers as answers
from tinyacp import _inbound as inbound
from tinyacp._elicitation import ElicitationParams
from tinyacp._inbound import Kind
from tinyacp._messages import INVALID_PARAMS, Envelope, PermissionParams, UnknownUpdate, UsageUpdate

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

DECODE = msgspec.json.Decoder(Envelope).decode


def envelope(message: dict[str, Any]) -> Envelope:
    line = DECODE(msgspec.json.encode(message))
    assert isinstance(line, Envelope)
    return line


@pytest.mark.parametrize(
    ("message", "elicitation", "kind"),
    [
        ({"method": "session/update", "params": {}}, False, Kind.UPDATE),
        ({"method": "_x/ping"}, False, Kind.NOTIFICATION),
        ({"method": "session/update", "id": 3}, False, Kind.UNSERVED),
        ({"method": "session/request_permission", "id": 3}, False, Kind.PERMISSION),
        ({"method": "elicitation/create", "id": None}, True, Kind.ELICITATION),
        ({"method": "elicitation/create", "id": 3}, False, Kind.UNSERVED),
        ({"method": "fs/read_text_file", "id": "a"}, True, Kind.UNSERVED),
        ({"id": 0, "result": {}}, False, Kind.RESPONSE),
        ({"id": None, "error": {}}, False, Kind.RESPONSE),
        ({"result": {}}, False, Kind.NEITHER),
    ],
)
def test_a_message_is_classified_in_the_order_json_rpc_reads_it(
    message: dict[str, Any], elicitation: bool, kind: Kind
) -> None:
    assert inbound.kind(envelope({"jsonrpc": "2.0", **message}), elicitation=elicitation) is kind


@pytest.mark.parametrize(
    ("text", "detail", "request_id", "code"),
    [
        (b"[1, 2]", "a JSON array (ACP v1 has no batches)", None, inbound.INVALID_REQUEST),
        (b"{nope", "not JSON", None, inbound.INVALID_REQUEST),
        (
            b'{"jsonrpc": "1.0", "id": 7, "method": "x"}',
            "jsonrpc must be \"2.0\", not '1.0'",
            7,
            inbound.INVALID_REQUEST,
        ),
        (b'{"jsonrpc": "2.0", "id": "q", "method": 5}', "not a JSON-RPC message: ", "q", inbound.INVALID_REQUEST),
        (
            # past every interpreter's recursion limit (Python 3.13 decodes 5 000 levels)
            b'{"jsonrpc": "2.0", "id": 9, "method": "x", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "JSON nested too deeply",
            9,
            INVALID_PARAMS,
        ),
    ],
)
def test_a_line_that_is_no_usable_message_says_why_and_the_id_to_answer(
    text: bytes, detail: str, request_id: int | str | None, code: int
) -> None:
    malformed = inbound.read(DECODE, text)
    assert isinstance(malformed, inbound.Malformed)
    assert malformed.detail.startswith(detail)
    assert (malformed.request_id, malformed.code) == (request_id, code)


def test_a_usable_line_reads_as_its_envelope() -> None:
    line = inbound.read(DECODE, b'{"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}')
    assert isinstance(line, Envelope)
    assert (line.id, bytes(line.result or b"")) == (1, b'{"a": 1}')


def test_a_loose_update_keeps_its_session_and_its_json_or_says_why_not() -> None:
    update = {"sessionUpdate": "tea_break", "minutes": 5}
    loose = inbound.loose_update(envelope({"method": "session/update", "params": {"sessionId": "s", "update": update}}))
    assert loose == ("s", UnknownUpdate("tea_break", update))
    unclaimed = inbound.loose_update(envelope({"method": "session/update", "params": {"sessionId": "s", "update": {}}}))
    assert unclaimed == ("s", UnknownUpdate(None, {}))
    problem = inbound.loose_update(envelope({"method": "session/update", "params": {"update": update}}))
    assert isinstance(problem, str)
    assert problem.startswith("a session/update without a readable sessionId and update: ")


def test_request_params_decode_or_say_why_they_are_invalid() -> None:
    permission = {"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []}
    assert isinstance(inbound.permission_params(envelope({"params": permission})), PermissionParams)
    assert isinstance(inbound.permission_params(envelope({})), str)  # no params at all
    form = {"sessionId": "s", "message": "Name?", "mode": "form", "requestedSchema": {"type": "object"}}
    assert isinstance(inbound.elicitation_params(envelope({"params": form})), ElicitationParams)
    unscoped = {"message": "Name?", "mode": "form", "requestedSchema": {}}
    assert (
        inbound.elicitation_params(envelope({"params": unscoped})) == "an elicitation needs a sessionId or a requestId"
    )
    assert isinstance(inbound.elicitation_params(envelope({"params": {"mode": "form"}})), str)


def test_a_response_gives_its_result_or_raises_its_error() -> None:
    assert bytes(answers.result_of("m", envelope({"id": 1, "result": {"x": 1}}), None)) == b'{"x":1}'
    with pytest.raises(ProtocolViolation, match="has both a result and an error"):
        answers.result_of("m", envelope({"id": 1, "result": 1, "error": {}}), None)
    with pytest.raises(ProtocolViolation, match="has neither a result nor an error"):
        answers.result_of("m", envelope({"id": 1}), None)
    with pytest.raises(ProtocolViolation, match="the error answer to m is malformed"):
        answers.result_of("m", envelope({"id": 1, "error": {"code": "x"}}), None)
    with pytest.raises(SessionNotFound):
        answers.result_of("m", envelope({"id": 1, "error": {"code": -32002, "message": "gone"}}), None)
    with pytest.raises(AuthRequired) as auth:
        answers.result_of("m", envelope({"id": 1, "error": {"code": -32000, "message": "log in"}}), None)
    assert auth.value.auth_methods == ()
    with pytest.raises(RequestError) as other:
        answers.result_of("m", envelope({"id": 1, "error": {"code": 7, "message": "no", "data": [1]}}), None)
    assert type(other.value) is RequestError and (other.value.code, other.value.data) == (7, [1])


def test_a_prompt_answer_gives_its_stop_reason_usage_and_other_fields() -> None:
    raw = msgspec.Raw(b'{"stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 4}, "x": 1}')
    reason, usage, meta = answers.decode_prompt(raw, None)
    assert (reason, meta) == (StopReason.END_TURN, {"x": 1})
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (3, 4)
    last = UsageUpdate(used=10, size=100)
    assert answers.decode_prompt(msgspec.Raw(b'{"stopReason": "tea"}'), last) == (
        "tea",
        TurnUsage(context_used=10, context_size=100),
        None,
    )
    with pytest.raises(ProtocolViolation, match="no stopReason string"):
        answers.decode_prompt(msgspec.Raw(b'{"stopReason": 1}'), None)


def test_a_session_answer_must_name_a_new_session() -> None:
    assert answers.decode_session(msgspec.Raw(b'{"sessionId": "s9"}'), None).id == "s9"
    assert answers.decode_session(msgspec.Raw(b"{}"), "s1").id == "s1"
    with pytest.raises(ProtocolViolation, match="no sessionId"):
        answers.decode_session(msgspec.Raw(b"{}"), None)
