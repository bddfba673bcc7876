"""The conversation core, driven with scripted agent bytes and no process (the h11 way).

Every test runs twice: with the agent's bytes fed whole and fed one byte at a time through a sans-I/O
:class:`~tinyacp.LineReader`. A small :class:`Driver` plays the shell: it runs the core's steps, answers
``on_permission_request`` as the test says, and logs every effect in order — the observer calls and the bytes
written — so each test can assert exactly what was recorded before what was done.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from helpers.core import EPOCH, NO_CAPABILITIES, SESSION, Decide, Driver, line, make_core, result, update
from tinyacp import (
    AgentMessage,
    ClientInfo,
    DecisionSource,
    Initialize,
    MessageKind,
    MissingDurableObserver,
    OutgoingMessage,
    Overflow,
    OverflowKind,
    PermissionPolicy,
    PermissionReply,
    PermissionRequest,
    PromptBlobResource,
    PromptContent,
    PromptMedia,
    PromptResourceLink,
    PromptResult,
    PromptText,
    PromptTextResource,
    ProtocolViolation,
    ReaderLimits,
    RequestError,
    Session,
    StopReason,
    TransferLimitExceeded,
    TransferLimits,
    TurnUsage,
    UnsupportedContent,
    UnsupportedProtocolVersion,
    UpdateKind,
)
from tinyacp._conversation import Conversation

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)


Event = tuple[str, Any]

# The permission options of released agents (REAL_AGENTS.md): ids differ, kinds mean the same everywhere.
AGENT_OPTIONS: dict[str, list[tuple[str, str]]] = {
    "claude": [("allow", "allow_once"), ("allow_always", "allow_always"), ("reject", "reject_once")],
    "codex": [
        ("approved", "allow_once"),
        ("approved-execpolicy-amendment", "allow_always"),
        ("abort", "reject_once"),
    ],
    "gemini": [("proceed_once", "allow_once"), ("proceed_always", "allow_always"), ("cancel", "reject_once")],
    "opencode": [("once", "allow_once"), ("always", "allow_always"), ("reject", "reject_once")],
}
ALLOW_ONCE_ID = {"claude": "allow", "codex": "approved", "gemini": "proceed_once", "opencode": "once"}
REJECT_ONCE_ID = {"claude": "reject", "codex": "abort", "gemini": "cancel", "opencode": "reject"}


# -- the driver ----------------------------------------------------------------------------------------------


def chunk(text: str, session: str = SESSION) -> bytes:
    return update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}, session)


def permission(
    request_id: object,
    options: Sequence[tuple[str, str]],
    *,
    kind: str | None = "edit",
    title: str | None = "Write notes.txt",
    session: str = SESSION,
) -> bytes:
    tool_call: dict[str, Any] = {"toolCallId": "call_1", "status": "pending"}
    if kind is not None:
        tool_call["kind"] = kind
    if title is not None:
        tool_call["title"] = title
    params = {
        "sessionId": session,
        "toolCall": tool_call,
        "options": [{"optionId": oid, "name": oid.title(), "kind": okind} for oid, okind in options],
    }
    return line({"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission", "params": params})


def in_turn(
    piece: int | None,
    *,
    decide: Decide | None = None,
    policy: PermissionPolicy | None = None,
    limits: TransferLimits | None = None,
    init: dict[str, Any] | None = None,
) -> Driver:
    """A driver whose core is initialized, has session s1 and a prompt in flight; events cleared."""
    driver = Driver(make_core(policy=policy, limits=limits), piece, decide)
    driver.send(driver.core.initialize().message)
    driver.feed(result(0, init or NO_CAPABILITIES))
    driver.send(driver.core.new_session("/work").message)
    driver.feed(result(1, {"sessionId": SESSION}))
    driver.send(driver.core.prompt(SESSION, "hello").message)
    assert [type(value) for value in driver.done] == [Initialize, Session]
    driver.events.clear()
    driver.done.clear()
    return driver


def outcome_of(driver: Driver) -> dict[str, Any]:
    (answer,) = driver.writes()
    outcome: dict[str, Any] = answer["result"]["outcome"]
    return outcome


def decided(driver: Driver) -> PermissionRequest:
    (request,) = driver.of("on_permission_decision")
    assert isinstance(request, PermissionRequest)
    return request


# -- record before act ---------------------------------------------------------------------------------------


def test_a_permission_request_is_recorded_then_decided_then_recorded_then_sent_then_written(
    piece: int | None,
) -> None:
    seen_open: list[bool] = []

    def decide(request: PermissionRequest) -> PermissionReply:
        seen_open.append(request.decision is None and request.decided_by is None and request.outcome == {})
        return PermissionReply.allow()

    driver = in_turn(piece, decide=decide)
    raw = permission(0, AGENT_OPTIONS["claude"])
    driver.feed(raw)
    assert driver.names() == ["on_permission_request", "on_permission_decision", "on_send", "write"]
    assert seen_open == [True]
    request = driver.events[0][1]
    assert driver.events[1][1] is request
    assert request.raw == raw.rstrip(b"\n")
    assert (request.epoch, request.request_id, request.session_id) == (EPOCH, 0, SESSION)
    assert (request.tool_call.kind, request.tool_call.title) == ("edit", "Write notes.txt")
    sent: OutgoingMessage = driver.events[2][1]
    assert driver.events[3][1] == sent.raw + b"\n"
    assert (sent.method, sent.id, sent.epoch) == (None, 0, EPOCH)
    assert json.loads(sent.raw) == {"jsonrpc": "2.0", "id": 0, "result": {"outcome": request.outcome}}
    assert request.outcome == {"outcome": "selected", "optionId": "allow"}
    assert driver.done == []


def test_a_request_we_do_not_serve_is_recorded_before_the_method_not_found_answer(piece: int | None) -> None:
    driver = in_turn(piece)
    raw = line({"jsonrpc": "2.0", "id": "fs-1", "method": "fs/read_text_file", "params": {"path": "/etc/passwd"}})
    driver.feed(raw)
    assert driver.names() == ["on_message", "on_send", "write"]
    message = driver.events[0][1]
    assert message == AgentMessage(EPOCH, raw.rstrip(b"\n"), MessageKind.REQUEST, "fs/read_text_file", "fs-1")
    (answer,) = driver.writes()
    assert answer == {
        "jsonrpc": "2.0",
        "id": "fs-1",
        "error": {"code": -32601, "message": "Method not found"},
    }


def test_a_broken_permission_request_is_recorded_before_the_invalid_params_answer(piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: pytest.fail("a broken request reached the observer"))
    driver.feed(line({"jsonrpc": "2.0", "id": 5, "method": "session/request_permission", "params": {"options": 1}}))
    assert driver.names() == ["on_message", "on_send", "write"]
    message = driver.events[0][1]
    assert (message.kind, message.method, message.id) == (
        MessageKind.INVALID_REQUEST,
        "session/request_permission",
        5,
    )
    (answer,) = driver.writes()
    assert (answer["id"], answer["error"]["code"]) == (5, -32602)


def test_the_overflowing_update_is_recorded_before_the_one_cancel(piece: int | None) -> None:
    driver = in_turn(piece, limits=TransferLimits(max_reply_chunks=2))
    driver.feed(chunk("a") + chunk("b") + chunk("c") + chunk("d"))
    assert driver.names() == ["on_update", "on_update", "on_update", "on_send", "write", "on_update"]
    assert driver.events[2][1].seq == 3
    (cancel,) = driver.writes()
    assert cancel == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SESSION}}
    assert driver.events[3][1].method == "session/cancel"
    driver.feed(result(2, {"stopReason": "cancelled"}))
    (outcome,) = driver.done
    assert isinstance(outcome, PromptResult)
    assert outcome.text == "ab"
    assert outcome.overflow == Overflow(OverflowKind.REPLY_CHUNKS, 2, 2, 3)
    assert (outcome.cancelled, outcome.timed_out, outcome.chunk_count, outcome.update_count) == (True, False, 4, 4)
    assert outcome.stop_reason is StopReason.CANCELLED


def test_reply_bytes_overflow_keeps_whole_chunks_counted_in_utf8(piece: int | None) -> None:
    driver = in_turn(piece, limits=TransferLimits(max_reply_bytes=5))
    driver.feed(chunk("ü") + chunk("ab") + chunk("c"))  # 2 + 2 bytes kept; "c" would make 5: kept too
    assert driver.writes() == []
    driver.feed(chunk("d"))
    assert driver.names()[-3:] == ["on_update", "on_send", "write"]
    driver.feed(result(2, {"stopReason": "end_turn"}))
    (outcome,) = driver.done
    assert isinstance(outcome, PromptResult)
    assert outcome.text == "üabc"
    assert outcome.overflow == Overflow(OverflowKind.REPLY_BYTES, 5, 3, 4)


def test_after_a_cancel_by_the_caller_no_limit_sends_another(piece: int | None) -> None:
    driver = in_turn(piece, limits=TransferLimits(max_reply_chunks=1))
    driver.send(driver.core.cancel(SESSION))
    driver.feed(chunk("a") + chunk("b"))
    assert [w["method"] for w in driver.writes()] == ["session/cancel"]
    assert driver.core.cancel_turn_once() is None
    assert driver.core.deadline_passed() is None


def test_a_refused_update_is_recorded_before_the_call_fails(piece: int | None) -> None:
    raw = chunk("x" * 200)
    driver = in_turn(piece, limits=TransferLimits(max_update_bytes=len(raw) - 2))
    driver.feed(chunk("ok"))
    with pytest.raises(TransferLimitExceeded) as raised:
        driver.feed(raw)
    assert (raised.value.limit, raised.value.size, raised.value.seq) == ("max_update_bytes", len(raw) - 1, 2)
    assert driver.names() == ["on_update", "on_message"]
    refused = driver.events[1][1]
    assert (refused.kind, refused.raw) == (MessageKind.REFUSED_UPDATE, raw.rstrip(b"\n"))


def test_the_first_update_past_max_updates_is_refused(piece: int | None) -> None:
    driver = in_turn(piece, limits=TransferLimits(max_updates=2))
    driver.feed(chunk("a") + chunk("b"))
    with pytest.raises(TransferLimitExceeded) as raised:
        driver.feed(update({"sessionUpdate": "brand_new"}))
    assert (raised.value.limit, raised.value.seq) == ("max_updates", 3)
    assert driver.names() == ["on_update", "on_update", "on_message"]


# -- permissions: by kind, never by id -----------------------------------------------------------------------


@pytest.mark.parametrize("agent", list(AGENT_OPTIONS))
@pytest.mark.parametrize("order", ["as-sent", "reversed"])
def test_allow_picks_the_allow_once_option_of_every_real_agent(agent: str, order: str, piece: int | None) -> None:
    options = AGENT_OPTIONS[agent] if order == "as-sent" else AGENT_OPTIONS[agent][::-1]
    driver = in_turn(piece, decide=lambda request: PermissionReply.allow())
    driver.feed(permission(0, options))
    request = decided(driver)
    assert outcome_of(driver) == {"outcome": "selected", "optionId": ALLOW_ONCE_ID[agent]}
    assert (request.decision, request.decided_by, request.allowed) == (
        PermissionReply.allow(),
        DecisionSource.OBSERVER,
        True,
    )
    assert request.selected is not None
    assert request.selected.kind == "allow_once"


@pytest.mark.parametrize("agent", list(AGENT_OPTIONS))
@pytest.mark.parametrize("reply", [PermissionReply.reject(), None], ids=["observer-reject", "default-reject"])
def test_reject_picks_the_reject_once_option_of_every_real_agent(
    agent: str, reply: PermissionReply | None, piece: int | None
) -> None:
    driver = in_turn(piece, decide=lambda request: reply)
    driver.feed(permission("perm-1", AGENT_OPTIONS[agent]))
    request = decided(driver)
    # gemini's reject_once option is called "cancel": it is still a rejection, not the cancelled outcome.
    assert outcome_of(driver) == {"outcome": "selected", "optionId": REJECT_ONCE_ID[agent]}
    assert request.decision == PermissionReply.reject()
    assert request.decided_by is (DecisionSource.OBSERVER if reply else DecisionSource.DEFAULT_REJECT)
    assert request.allowed is False


@pytest.mark.parametrize(
    ("options", "reply", "expected"),
    [
        ([("a", "allow_always"), ("r", "reject_always")], PermissionReply.allow(), "a"),
        ([("r", "reject_always"), ("a", "allow_always")], PermissionReply.reject(), "r"),
        ([("aa", "allow_always"), ("a", "allow_once")], PermissionReply.allow(), "a"),
        ([("ra", "reject_always"), ("r", "reject_once")], PermissionReply.reject(), "r"),
        ([("a1", "allow_once"), ("a2", "allow_once")], PermissionReply.allow(), "a1"),
        ([("r", "reject_once"), ("ra", "reject_always")], PermissionReply.allow(), "r"),
        ([("a", "allow_once"), ("x", "defer")], PermissionReply.reject(), None),
        ([], PermissionReply.allow(), None),
        ([], PermissionReply.reject(), None),
    ],
    ids=[
        "allow-always-when-no-once",
        "reject-always-when-no-once",
        "allow-once-before-always",
        "reject-once-before-always",
        "first-of-a-kind",
        "allow-without-allow-rejects",
        "reject-without-reject-cancels",
        "allow-no-options",
        "reject-no-options",
    ],
)
def test_decisions_map_to_options_by_kind(
    options: list[tuple[str, str]], reply: PermissionReply, expected: str | None, piece: int | None
) -> None:
    driver = in_turn(piece, decide=lambda request: reply)
    driver.feed(permission(0, options))
    request = decided(driver)
    if expected is None:
        assert outcome_of(driver) == {"outcome": "cancelled"}
        assert request.selected is None
        assert "no reject option" in request.reason
    else:
        assert outcome_of(driver) == {"outcome": "selected", "optionId": expected}
        assert request.selected is not None
        assert request.selected.option_id == expected
    if reply.action == "allow" and not any(kind.startswith("allow") for _, kind in options):
        assert request.decision == PermissionReply.reject()
        assert "no allow option" in request.reason


def test_select_takes_the_offered_option_whatever_its_kind(piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: PermissionReply.select("proceed_always"))
    driver.feed(permission(0, AGENT_OPTIONS["gemini"]))
    request = decided(driver)
    assert outcome_of(driver) == {"outcome": "selected", "optionId": "proceed_always"}
    assert (request.decision, request.decided_by) == (PermissionReply.select("proceed_always"), DecisionSource.OBSERVER)


def test_select_of_an_id_not_offered_is_a_rejection(piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: PermissionReply.select("allow"))
    driver.feed(permission(0, AGENT_OPTIONS["codex"]))
    request = decided(driver)
    assert outcome_of(driver) == {"outcome": "selected", "optionId": "abort"}
    assert request.decision == PermissionReply.reject()
    assert request.decided_by is DecisionSource.OBSERVER
    assert "'allow' was not offered" in request.reason


def test_the_observer_may_answer_cancelled(piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: PermissionReply.cancelled())
    driver.feed(permission(0, AGENT_OPTIONS["claude"]))
    request = decided(driver)
    assert outcome_of(driver) == {"outcome": "cancelled"}
    assert (request.selected, request.decided_by) == (None, DecisionSource.OBSERVER)


@pytest.mark.parametrize(
    ("policy", "kind", "title", "allowed"),
    [
        (PermissionPolicy(kinds={"read", "search"}), "read", "cat x", True),
        (PermissionPolicy(kinds={"read", "search"}), "edit", "cat x", False),
        (PermissionPolicy(kinds={"read"}), None, "read the file", False),
        (PermissionPolicy(title_prefixes=("git status", "ls ")), "execute", "git status --short", True),
        (PermissionPolicy(title_prefixes=("git status", "ls ")), "execute", "rm -rf / # git status", False),
        (PermissionPolicy(title_prefixes=("ls ",)), "execute", None, False),
        (PermissionPolicy(allow_all=True), None, None, True),
        (PermissionPolicy(), "read", "Read file", False),
    ],
    ids=["kind", "other-kind", "no-kind", "title", "title-not-prefix", "no-title", "allow-all", "default"],
)
def test_the_policy_decides_by_claimed_kind_or_title_prefix(
    policy: PermissionPolicy, kind: str | None, title: str | None, allowed: bool, piece: int | None
) -> None:
    driver = in_turn(piece, policy=policy)
    driver.feed(permission(0, AGENT_OPTIONS["opencode"], kind=kind, title=title))
    request = decided(driver)
    assert request.allowed is allowed
    assert outcome_of(driver)["optionId"] == ("once" if allowed else "reject")
    assert request.decided_by is (DecisionSource.POLICY if allowed else DecisionSource.DEFAULT_REJECT)


def test_the_observer_overrules_the_policy(piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: PermissionReply.reject(), policy=PermissionPolicy(allow_all=True))
    driver.feed(permission(0, AGENT_OPTIONS["claude"]))
    assert (decided(driver).decided_by, outcome_of(driver)["optionId"]) == (DecisionSource.OBSERVER, "reject")


def test_after_cancel_this_turns_permission_requests_get_the_cancelled_outcome(piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: PermissionReply.allow(), policy=PermissionPolicy(allow_all=True))
    driver.send(driver.core.cancel(SESSION))
    driver.events.clear()
    driver.feed(permission(0, AGENT_OPTIONS["claude"]))
    # The observer still records the request first; the answer is the protocol's cancelled outcome.
    assert driver.names() == ["on_permission_request", "on_permission_decision", "on_send", "write"]
    request = decided(driver)
    assert outcome_of(driver) == {"outcome": "cancelled"}
    assert (request.decision, request.decided_by, request.selected) == (
        PermissionReply.cancelled(),
        DecisionSource.CANCELLED,
        None,
    )
    # Another session's request is not part of the cancelled turn.
    driver.events.clear()
    driver.feed(permission(1, AGENT_OPTIONS["claude"], session="other"))
    assert (decided(driver).decided_by, outcome_of(driver)) == (
        DecisionSource.OBSERVER,
        {"outcome": "selected", "optionId": "allow"},
    )
    # The next turn starts uncancelled.
    driver.feed(result(2, {"stopReason": "cancelled"}))
    (outcome,) = driver.done
    assert isinstance(outcome, PromptResult)
    assert outcome.cancelled is True
    driver.send(driver.core.prompt(SESSION, "again").message)
    driver.events.clear()
    driver.feed(permission(2, AGENT_OPTIONS["claude"]))
    assert decided(driver).decided_by is DecisionSource.OBSERVER


@pytest.mark.parametrize(
    "request_id",
    [0, 7, -1, 2**53, "7", "0", "", "ad12f768-3946-4658-9fee-661169fd3d47", None],
)
def test_the_agents_request_ids_are_echoed_exactly(request_id: object, piece: int | None) -> None:
    driver = in_turn(piece, decide=lambda request: PermissionReply.allow())
    driver.feed(permission(request_id, AGENT_OPTIONS["claude"]))
    driver.feed(line({"jsonrpc": "2.0", "id": request_id, "method": "terminal/create", "params": {}}))
    permission_answer, error_answer = driver.writes()
    for answer in (permission_answer, error_answer):
        assert type(answer["id"]) is type(request_id)
        assert answer["id"] == request_id
    assert decided(driver).request_id == request_id
    assert [message.id for message in driver.of("on_send")] == [request_id, request_id]


def test_the_agents_ids_are_independent_of_ours(piece: int | None) -> None:
    """fast-agent's request ids collide with the client's pending prompt id: that must not complete our call."""
    driver = Driver(make_core(), piece, decide=lambda request: PermissionReply.allow())
    prompt = driver.send(driver.core.prompt(SESSION, "hi").message)
    assert prompt.id == 0
    driver.feed(permission(0, AGENT_OPTIONS["claude"]))
    driver.feed(line({"jsonrpc": "2.0", "id": 0, "method": "fs/write_text_file", "params": {}}))
    driver.feed(line({"jsonrpc": "2.0", "id": "0", "result": {"stopReason": "end_turn"}}))
    assert driver.done == []
    assert driver.core.in_turn
    assert [w["id"] for w in driver.writes()] == [0, 0, 0]
    assert driver.of("on_message")[-1].kind is MessageKind.STRAY_RESPONSE
    driver.feed(result(0, {"stopReason": "end_turn"}))
    (outcome,) = driver.done
    assert isinstance(outcome, PromptResult)


# -- seq, responses, versions --------------------------------------------------------------------------------


def test_seq_counts_every_update_from_one_over_the_cores_life(piece: int | None) -> None:
    driver = in_turn(piece)
    driver.feed(chunk("a") + update({"sessionUpdate": "plan", "entries": []}) + chunk("x", session="other"))
    driver.feed(update({"sessionUpdate": "future_kind"}) + result(2, {"stopReason": "end_turn"}))
    # An update after the response (codex does this) is still numbered, and belongs to no turn.
    driver.feed(update({"sessionUpdate": "available_commands_update", "availableCommands": []}))
    driver.send(driver.core.new_session("/other").message)
    driver.feed(result(3, {"sessionId": "s2"}))
    driver.send(driver.core.prompt("s2", "second").message)
    driver.feed(chunk("b", session="s2") + chunk("c", session=SESSION) + result(4, {"stopReason": "end_turn"}))
    updates = driver.of("on_update")
    assert [u.seq for u in updates] == list(range(1, 8))
    assert [u.kind for u in updates][3] is UpdateKind.UNKNOWN
    assert driver.core.seq == 7
    first, second = [value for value in driver.done if isinstance(value, PromptResult)]
    assert (first.text, first.update_count, first.chunk_count) == ("a", 3, 1)
    assert (second.session_id, second.text, second.update_count, second.chunk_count) == ("s2", "b", 1, 1)


def test_an_error_response_raises_request_error_after_it_is_recorded(piece: int | None) -> None:
    driver = Driver(make_core(), piece)
    driver.send(driver.core.initialize().message)
    error = {"code": -32000, "message": "Authentication required", "data": {"methods": ["login"]}}
    raw = line({"jsonrpc": "2.0", "id": 0, "error": error})
    with pytest.raises(RequestError) as raised:
        driver.feed(raw)
    assert (raised.value.method, raised.value.code, raised.value.message, raised.value.data) == (
        "initialize",
        -32000,
        "Authentication required",
        {"methods": ["login"]},
    )
    (message,) = driver.of("on_message")
    assert message == AgentMessage(EPOCH, raw.rstrip(b"\n"), MessageKind.RESPONSE, "initialize", 0)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"result": {"sessionId": "s"}, "error": {"code": 1, "message": "m"}}, "both a result and an error"),
        ({}, "neither a result nor an error"),
        ({"error": {"code": "x", "message": "m"}}, "malformed"),
        ({"error": "boom"}, "malformed"),
        ({"result": {"modes": None}}, "does not fit"),
        ({"result": []}, "does not fit"),
        ({"result": None}, "does not fit"),
    ],
    ids=["result-and-error", "neither", "error-code-not-int", "error-not-object", "no-session-id", "array", "null"],
)
def test_an_unusable_answer_is_a_protocol_violation(body: dict[str, Any], match: str, piece: int | None) -> None:
    driver = Driver(make_core(), piece)
    driver.send(driver.core.new_session("/work").message)
    with pytest.raises(ProtocolViolation, match=match):
        driver.feed(line({"jsonrpc": "2.0", "id": 0, **body}))
    assert [m.kind for m in driver.of("on_message")] == [MessageKind.RESPONSE]


def test_a_prompt_answer_without_a_stop_reason_is_a_protocol_violation(piece: int | None) -> None:
    driver = in_turn(piece)
    with pytest.raises(ProtocolViolation, match="stopReason"):
        driver.feed(result(2, {"stopReason": 1}))


@pytest.mark.parametrize("version", [2, "1.0.0", "1", 0, True, None, [1]])
def test_a_protocol_version_other_than_1_is_unsupported(version: object, piece: int | None) -> None:
    driver = Driver(make_core(), piece)
    driver.send(driver.core.initialize().message)
    with pytest.raises(UnsupportedProtocolVersion) as raised:
        driver.feed(result(0, {"protocolVersion": version, "agentCapabilities": {}}))
    assert raised.value.version == version
    assert type(raised.value.version) is type(version)
    assert driver.core.agent is None


def test_an_initialize_answer_without_a_protocol_version_is_a_protocol_violation(piece: int | None) -> None:
    driver = Driver(make_core(), piece)
    driver.send(driver.core.initialize().message)
    with pytest.raises(ProtocolViolation, match="protocolVersion"):
        driver.feed(result(0, {"agentCapabilities": {}}))
    assert driver.core.agent is None


# -- what the agent did not advertise ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "capability"),
    [
        (PromptMedia.image("iVBO", "image/png"), "image"),
        (PromptMedia.audio("UklG", "audio/wav"), "audio"),
        (PromptTextResource("file:///a.py", "x = 1"), "embeddedContext"),
        (PromptBlobResource("file:///a.bin", "AAAA"), "embeddedContext"),
    ],
)
def test_content_the_agent_did_not_advertise_is_refused_before_anything_is_built(
    block: PromptContent, capability: str, piece: int | None
) -> None:
    driver = in_turn(piece)
    driver.feed(result(2, {"stopReason": "end_turn"}))
    driver.events.clear()
    with pytest.raises(UnsupportedContent) as raised:
        driver.send(driver.core.prompt(SESSION, [PromptText("look"), block]).message)
    assert (raised.value.block_type, raised.value.capability) == (type(block).__name__, capability)
    assert driver.events == []
    assert not driver.core.in_turn
    # No id was spent, and the baseline blocks still go.
    baseline = driver.core.prompt(SESSION, [PromptText("t"), PromptResourceLink("file:///a", "a")]).message
    assert baseline.id == 3


def test_content_is_sent_once_the_agent_advertises_it(piece: int | None) -> None:
    init = {"protocolVersion": 1, "agentCapabilities": {"promptCapabilities": {"image": True}}}
    driver = in_turn(piece, init=init)
    driver.feed(result(2, {"stopReason": "end_turn"}))
    assert driver.core.prompt(SESSION, [PromptMedia.image("iVBO", "image/png")]).message.id == 3
    driver.core.end_call()
    with pytest.raises(UnsupportedContent, match="audio"):
        driver.core.prompt(SESSION, [PromptMedia.audio("UklG", "audio/wav")])


def test_before_initialize_only_baseline_content_is_allowed() -> None:
    core = make_core()
    with pytest.raises(UnsupportedContent):
        core.prompt(SESSION, [PromptMedia.image("iVBO", "image/png")])
    assert core.prompt(SESSION, "text").message.id == 0


# -- no observer ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        chunk("hi"),
        update({"sessionUpdate": "future_kind"}),
        permission(0, AGENT_OPTIONS["claude"]),
    ],
    ids=["typed-update", "unknown-update", "permission-request"],
)
def test_without_an_observer_the_first_update_or_permission_request_raises(raw: bytes, piece: int | None) -> None:
    driver = Driver(make_core(has_observer=False), piece, decide=lambda request: PermissionReply.allow())
    driver.send(driver.core.initialize().message)
    driver.feed(result(0, NO_CAPABILITIES))
    driver.send(driver.core.prompt(SESSION, "hi").message)
    driver.events.clear()
    with pytest.raises(MissingDurableObserver):
        driver.feed(raw)
    # Nothing was recorded as accepted, and nothing was written.
    assert driver.events == []
    assert driver.core.seq == 0


def test_without_an_observer_other_messages_still_work(piece: int | None) -> None:
    driver = Driver(make_core(has_observer=False), piece)
    driver.send(driver.core.initialize().message)
    driver.feed(line({"jsonrpc": "2.0", "method": "_vendor/hello"}))
    driver.feed(line({"jsonrpc": "2.0", "id": 9, "method": "fs/read_text_file", "params": {}}))
    driver.feed(result(0, NO_CAPABILITIES))
    assert [type(value) for value in driver.done] == [Initialize]
    assert [w.get("error", {}).get("code") for w in driver.writes()] == [None, -32601]


def test_an_update_limit_above_the_line_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_update_bytes"):
        Conversation(
            epoch=1,
            transfer_limits=TransferLimits(max_update_bytes=1001),
            reader_limits=ReaderLimits(1000),
            policy=PermissionPolicy(),
            client_info=ClientInfo("t", "1"),
            has_observer=True,
        )
    Conversation(
        epoch=1,
        transfer_limits=TransferLimits(max_update_bytes=1000),
        reader_limits=ReaderLimits(1000),
        policy=PermissionPolicy(),
        client_info=ClientInfo("t", "1"),
        has_observer=True,
    )


# -- chunking does not matter --------------------------------------------------------------------------------


def transcript() -> bytes:
    """A turn touching every path: updates of each shape, requests, strays, garbage, CRLF, then the answer."""
    return b"".join(
        [
            chunk("Hel"),
            chunk("lo ünïcode\n"),
            update({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t", "kind": "edit"}),
            permission("p", AGENT_OPTIONS["gemini"]),
            update({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"}),
            update({"sessionUpdate": "mystery", "x": [1, {"y": None}]}),
            b"not json\n",
            b"[1,2]\n",
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
            b'{"sessionUpdate":"plan","entries":[]}}}\r\n',
            line({"jsonrpc": "2.0", "id": 77, "result": {}}),
            line({"jsonrpc": "2.0", "id": 3, "method": "terminal/create", "params": {}}),
            line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 3}}),
            result(2, {"stopReason": "end_turn", "usage": {"inputTokens": 1}}),
        ]
    )


def normalised(events: list[Event]) -> list[tuple[str, Any]]:
    """Events in a comparable form (a PermissionRequest compares by identity)."""
    out: list[tuple[str, Any]] = []
    for name, value in events:
        if isinstance(value, PermissionRequest):
            out.append(
                (name, (value.raw, value.decision, value.decided_by, value.selected, value.reason, value.outcome))
            )
        else:
            out.append((name, value))
    return out


def run_transcript(piece: int | None) -> Driver:
    driver = in_turn(piece, decide=lambda request: PermissionReply.allow())
    driver.feed(transcript())
    return driver


def test_the_transcript_is_handled_the_same_in_any_chunking() -> None:
    whole = run_transcript(None)
    for size in (1, 2, 7, 64, 1000):
        other = run_transcript(size)
        assert normalised(other.events) == normalised(whole.events), size
        assert other.done == whole.done, size


def test_the_transcript_records_every_line_once_in_order(piece: int | None) -> None:
    driver = run_transcript(piece)
    assert driver.names() == [
        "on_update",
        "on_update",
        "on_update",
        "on_permission_request",
        "on_permission_decision",
        "on_send",
        "write",
        "on_update",
        "on_update",
        "on_message",
        "on_message",
        "on_update",
        "on_message",
        "on_message",
        "on_send",
        "write",
        "on_message",
        "on_message",
    ]
    recorded = [
        value.raw for name, value in driver.events if name not in ("on_send", "write", "on_permission_decision")
    ]
    assert recorded == transcript().rstrip(b"\n").split(b"\n")
    kinds = [value.kind for name, value in driver.events if name == "on_message"]
    assert kinds == [
        MessageKind.INVALID,
        MessageKind.INVALID,
        MessageKind.STRAY_RESPONSE,
        MessageKind.REQUEST,
        MessageKind.NOTIFICATION,
        MessageKind.RESPONSE,
    ]
    (outcome,) = driver.done
    assert outcome == PromptResult(
        session_id=SESSION,
        text="Hello ünïcode\n",
        stop_reason=StopReason.END_TURN,
        overflow=None,
        update_count=6,
        chunk_count=2,
        usage=TurnUsage(input_tokens=1),
    )


@pytest.mark.parametrize(
    ("action", "option_id"), [("bogus", None), ("select", None), ("allow", "allow"), ("select", 3)]
)
def test_a_malformed_permission_reply_is_refused_when_it_is_built(action: Any, option_id: Any) -> None:
    with pytest.raises(ValueError):
        PermissionReply(action, option_id)
