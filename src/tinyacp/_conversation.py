"""The conversation core: every decision of the protocol, and no I/O.

The core takes the agent's lines in and says what happens next; the shells (:mod:`tinyacp._client` and
:mod:`tinyacp._async_client`) only move bytes and call the observer. It owns the JSON-RPC ids, classifies each
line, decides permission requests, applies the transfer limits and knows when to send the one ``session/cancel``.

``receive(line)`` returns either an :class:`~tinyacp.Update` (the hot path: the shell records it with
``on_update`` and then calls :meth:`Conversation.update_recorded`) or a *step* generator for everything else.
A step generator yields :class:`Record` (call this observer method with this value, send me its result) and
:class:`Write` (record this line with ``on_send``, then write it), in exactly the order they must happen, and
returns a :class:`Done` when the call in flight has its answer. So the order "record, then act" lives here once,
for both shells.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Sequence
from typing import Any, Final

import msgspec

from ._errors import (
    MissingDurableObserver,
    ObserverError,
    ProtocolViolation,
    RequestError,
    TransferLimitExceeded,
    UnsupportedContent,
    UnsupportedProtocolVersion,
)
from ._limits import Overflow, OverflowKind, TransferLimits
from ._messages import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NO_CLIENT_CAPABILITIES,
    PROTOCOL_VERSION,
    AgentMessageChunk,
    AnyMcpServer,
    ClientInfo,
    Envelope,
    ErrorObject,
    Initialize,
    LooseUpdateParams,
    OutError,
    OutNotification,
    OutRequest,
    OutResult,
    PermissionParams,
    PromptCapabilities,
    PromptContent,
    RequestId,
    Session,
    SessionUpdate,
    UnknownUpdate,
    UpdateLine,
    VersionProbe,
    prompt_blocks,
    required_capability,
    stop_reason,
    wire_blocks,
)
from ._permissions import PermissionPolicy, PermissionReply, PermissionRequest, decide
from ._records import AgentMessage, MessageKind, OutgoingMessage, PromptResult, Update
from .reader import ReaderLimits

__all__ = ["Conversation", "Done", "Record", "Step", "Write"]

ON_UPDATE: Final = "on_update"
ON_PERMISSION_REQUEST: Final = "on_permission_request"
ON_PERMISSION_DECISION: Final = "on_permission_decision"
ON_MESSAGE: Final = "on_message"
ON_SEND: Final = "on_send"

_JOIN_EVERY: Final = 1024
"""update_recorded joins the kept reply text into one string every this many chunks."""

# msgspec raises RecursionError for JSON nested past the interpreter's limit (about 1000 levels, a 2 KB line):
# that is an unreadable line from the agent like any other, not our crash.
_UNREADABLE: Final = (msgspec.MsgspecError, RecursionError)


class Record:
    """Call the observer method ``callback`` with ``value``; send its result back into the step."""

    __slots__ = ("callback", "value")

    def __init__(self, callback: str, value: object) -> None:
        self.callback = callback
        self.value = value


class Write:
    """Record ``message`` with ``on_send``, then write its line to the agent."""

    __slots__ = ("message",)

    def __init__(self, message: OutgoingMessage) -> None:
        self.message = message


class Done:
    """The call in flight has its answer."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


Step = Generator[Record | Write, Any, Done | None]
"""What :meth:`Conversation.receive` returns for every line but an accepted update."""


class _Pending:
    __slots__ = ("finish", "id", "method")

    def __init__(self, id: int, method: str, finish: Callable[[msgspec.Raw], object]) -> None:
        self.id = id
        self.method = method
        self.finish = finish


class _Turn:
    """One prompt turn's reply, bounded by the reply limits.

    Each of the turn's updates is counted once, in one of ``kept_chunks``, ``dropped_chunks`` (message chunks
    past a reply limit) and ``other_updates``: a kept chunk, the hot path, then writes two counters, not four.
    """

    __slots__ = (
        "cancel_sent",
        "dropped_chunks",
        "kept_bytes",
        "kept_chunks",
        "other_updates",
        "overflow",
        "parts",
        "session_id",
        "timed_out",
    )

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.parts: list[str] = []
        self.kept_bytes = 0
        self.kept_chunks = 0
        self.dropped_chunks = 0
        self.other_updates = 0
        self.overflow: Overflow | None = None
        self.cancel_sent = False
        self.timed_out = False


class Conversation:
    """The state of one client's conversation with one agent, driven line by line.

    Args:
        epoch: the caller's transport epoch, stamped on every record.
        transfer_limits: the bounds to apply.
        reader_limits: the line limit (``max_update_bytes`` may not exceed it).
        policy: decides permission requests the observer leaves open.
        client_info: sent in ``initialize``.
        has_observer: whether updates and permission requests can be recorded at all.

    Raises:
        ValueError: ``max_update_bytes`` is larger than the reader's line limit.
    """

    def __init__(
        self,
        *,
        epoch: int,
        transfer_limits: TransferLimits,
        reader_limits: ReaderLimits,
        policy: PermissionPolicy,
        client_info: ClientInfo,
        has_observer: bool,
    ) -> None:
        if transfer_limits.max_update_bytes > reader_limits.max_line:
            raise ValueError(
                f"transfer_limits.max_update_bytes ({transfer_limits.max_update_bytes}) may not exceed "
                f"reader_limits.max_line ({reader_limits.max_line}): a longer update could never be read"
            )
        self.epoch = epoch
        self.limits = transfer_limits
        self.policy = policy
        self.client_info = client_info
        self.has_observer = has_observer
        self.seq = 0
        """The seq of the last update received."""
        self.agent: Initialize | None = None
        """The agent's answer to ``initialize``, once it came."""
        self._next_id = 0
        self._pending: _Pending | None = None
        self._turn: _Turn | None = None
        self._encode = msgspec.json.Encoder().encode
        self._decode_update = msgspec.json.Decoder(UpdateLine).decode
        self._decode_envelope = msgspec.json.Decoder(Envelope).decode
        # Bound once: the hot path reads them on every update.
        self._max_update_bytes = transfer_limits.max_update_bytes
        self._max_updates = transfer_limits.max_updates
        self._max_reply_bytes = transfer_limits.max_reply_bytes
        self._max_reply_chunks = transfer_limits.max_reply_chunks

    # ----------------------------------------------------------------------------------------------------------
    # What we write.

    def initialize(self) -> OutgoingMessage:
        """The ``initialize`` request: protocol version 1, our info, and no client capabilities."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": NO_CLIENT_CAPABILITIES,
            "clientInfo": self.client_info,
        }
        return self._request("initialize", params, self._finish_initialize)

    def new_session(self, cwd: str, mcp_servers: Sequence[AnyMcpServer] = ()) -> OutgoingMessage:
        """The ``session/new`` request. ``cwd`` must be absolute, as the protocol requires."""
        if not os.path.isabs(cwd):
            raise ValueError(f"the session's cwd must be an absolute path, not {cwd!r}")
        params = {"cwd": cwd, "mcpServers": list(mcp_servers)}
        return self._request("session/new", params, self._finish_new_session)

    def prompt(self, session_id: str, content: str | Sequence[PromptContent]) -> OutgoingMessage:
        """The ``session/prompt`` request; starts the turn whose reply the core collects.

        Raises:
            UnsupportedContent: a block needs a capability the agent did not advertise.
            TransferLimitExceeded: the line is longer than ``max_message_bytes``.
        """
        blocks = prompt_blocks(content)
        capabilities = self.agent.prompt_capabilities if self.agent is not None else PromptCapabilities()
        for block in blocks:
            needed = required_capability(block)
            if needed is not None and not capabilities.allows(needed):
                raise UnsupportedContent(type(block).__name__, needed)
        params = {"sessionId": session_id, "prompt": wire_blocks(blocks)}
        message = self._request("session/prompt", params, self._finish_prompt)
        self._turn = _Turn(session_id)
        return message

    def cancel(self, session_id: str) -> OutgoingMessage:
        """A ``session/cancel`` notification; from now on this turn's permission requests are cancelled.

        Raises:
            TransferLimitExceeded: the line is longer than ``max_message_bytes`` (the turn is left as it was).
        """
        message = self.check_cancel(session_id)
        turn = self._turn
        if turn is not None and turn.session_id == session_id:
            turn.cancel_sent = True
        return message

    def check_cancel(self, session_id: str) -> OutgoingMessage:
        """The ``session/cancel`` line, built without marking the turn: lets a shell refuse it when it is asked
        for, rather than when it is written in the middle of another call.

        Raises:
            TransferLimitExceeded: the line is longer than ``max_message_bytes``.
        """
        return self._message(
            None, "session/cancel", OutNotification("2.0", "session/cancel", {"sessionId": session_id})
        )

    def cancel_turn_once(self) -> OutgoingMessage | None:
        """The one ``session/cancel`` a limit or a deadline sends; None if the turn was cancelled already."""
        turn = self._turn
        if turn is None or turn.cancel_sent:
            return None
        return self.cancel(turn.session_id)

    def deadline_passed(self) -> OutgoingMessage | None:
        """The prompt's deadline passed: mark the turn timed out and ask the agent to stop (once)."""
        if self._turn is not None:
            self._turn.timed_out = True
        return self.cancel_turn_once()

    def end_call(self) -> None:
        """Forget the call in flight (done, failed or timed out): a late answer is then a stray response."""
        self._pending = None
        self._turn = None

    @property
    def in_turn(self) -> bool:
        """Whether a prompt turn is waiting for its response."""
        return self._turn is not None

    def _request(self, method: str, params: Any, finish: Callable[[msgspec.Raw], object]) -> OutgoingMessage:
        request_id = self._next_id
        message = self._message(request_id, method, OutRequest("2.0", request_id, method, params))
        self._next_id += 1
        self._pending = _Pending(request_id, method, finish)
        return message

    def _message(self, request_id: int | None, method: str, body: object) -> OutgoingMessage:
        raw = self._encode(body)
        if len(raw) > self.limits.max_message_bytes:
            raise TransferLimitExceeded("max_message_bytes", self.limits.max_message_bytes, len(raw))
        return OutgoingMessage(self.epoch, raw, method, request_id)

    def _response(self, request_id: RequestId, result: Any) -> OutgoingMessage:
        return OutgoingMessage(self.epoch, self._encode(OutResult("2.0", request_id, result)), None, request_id)

    def _error(self, request_id: RequestId, code: int, message: str) -> OutgoingMessage:
        body = OutError("2.0", request_id, ErrorObject(code, message))
        return OutgoingMessage(self.epoch, self._encode(body), None, request_id)

    # ----------------------------------------------------------------------------------------------------------
    # Answers to our requests.

    def _finish_initialize(self, result: msgspec.Raw) -> Initialize:
        version = msgspec.json.decode(result, type=VersionProbe).protocol_version
        if version is msgspec.UNSET:
            raise ProtocolViolation("the initialize answer has no protocolVersion")
        if type(version) is not int or version != PROTOCOL_VERSION:
            raise UnsupportedProtocolVersion(version)
        self.agent = msgspec.json.decode(result, type=Initialize)
        return self.agent

    def _finish_new_session(self, result: msgspec.Raw) -> Session:
        return msgspec.json.decode(result, type=Session)

    def _finish_prompt(self, result: msgspec.Raw) -> PromptResult:
        fields = msgspec.json.decode(result, type=dict[str, Any])
        reason = fields.pop("stopReason", None)
        if not isinstance(reason, str):
            raise ProtocolViolation(f"the prompt response has no stopReason string: {bytes(result)[:200]!r}")
        turn = self._turn
        assert turn is not None, "a prompt response is only accepted while its turn is open"
        self._turn = None
        chunks = turn.kept_chunks + turn.dropped_chunks
        return PromptResult(
            session_id=turn.session_id,
            text="".join(turn.parts),
            stop_reason=stop_reason(reason),
            overflow=turn.overflow,
            update_count=chunks + turn.other_updates,
            chunk_count=chunks,
            timed_out=turn.timed_out,
            cancelled=turn.cancel_sent,
            meta=fields or None,
        )

    # ----------------------------------------------------------------------------------------------------------
    # What the agent sends.

    def receive(self, raw: bytes) -> Update | Step:
        """Classify one line (without its newline): an update to record, or a step for everything else.

        Raises:
            MissingDurableObserver: an update arrived and there is no observer.
        """
        try:
            params = self._decode_update(raw).params
        except _UNREADABLE:
            return self._other(raw)
        # The hot path: _accept inlined for an update within the limits, with an observer to record it.
        seq = self.seq + 1
        if seq <= self._max_updates and len(raw) <= self._max_update_bytes and self.has_observer:
            self.seq = seq
            payload = params.update
            return Update(self.epoch, seq, raw, payload.kind, params.session_id, payload)
        return self._accept(raw, params.session_id, params.update)

    def update_recorded(self, update: Update) -> OutgoingMessage | None:
        """Act on an update the observer recorded: collect the reply; on overflow, the one cancel to send."""
        turn = self._turn
        if turn is None or update.session_id != turn.session_id:
            return None
        payload = update.payload
        if payload.__class__ is not AgentMessageChunk:
            turn.other_updates += 1
            return None
        if turn.overflow is not None:
            turn.dropped_chunks += 1
            return None
        text = payload.content.text
        if text is None:
            size = 0
            text = ""
        elif text.isascii():
            size = len(text)
        else:
            size = len(text.encode())
        kept_bytes = turn.kept_bytes + size
        kept_chunks = turn.kept_chunks
        if kept_chunks < self._max_reply_chunks and kept_bytes <= self._max_reply_bytes:
            # parts holds one string per kept chunk, except that every _JOIN_EVERY of them are joined into one:
            # a str object costs 49 bytes more than its ASCII text, which more than doubles a reply of short
            # chunks (a million 40-byte chunks: 89 MB as chunks, 40 MB joined).
            parts = turn.parts
            parts.append(text)
            turn.kept_bytes = kept_bytes
            kept_chunks += 1
            turn.kept_chunks = kept_chunks
            if not kept_chunks % _JOIN_EVERY:
                joined = kept_chunks // _JOIN_EVERY - 1  # blocks joined before this one
                parts[joined:] = ["".join(parts[joined:])]
            return None
        turn.dropped_chunks += 1
        kind = OverflowKind.REPLY_CHUNKS if kept_chunks >= self._max_reply_chunks else OverflowKind.REPLY_BYTES
        turn.overflow = Overflow(kind, turn.kept_bytes, kept_chunks, update.seq)
        return self.cancel_turn_once()

    def _accept(self, raw: bytes, session_id: str, payload: SessionUpdate) -> Update | Step:
        if not self.has_observer:
            raise MissingDurableObserver(
                "an update arrived and the client has no observer to record it; pass Options(observer=...)"
            )
        seq = self.seq = self.seq + 1
        if len(raw) > self._max_update_bytes:
            return self._refuse(raw, seq, "max_update_bytes", self._max_update_bytes, len(raw))
        if seq > self._max_updates:
            return self._refuse(raw, seq, "max_updates", self._max_updates, seq)
        return Update(self.epoch, seq, raw, payload.kind, session_id, payload)

    def _refuse(self, raw: bytes, seq: int, limit: str, value: int, size: int) -> Step:
        detail = f"update seq {seq} refused: {limit}={value} exceeded ({size})"
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.REFUSED_UPDATE, "session/update", None, detail))
        raise TransferLimitExceeded(limit, value, size, seq)

    def _note(
        self, raw: bytes, kind: MessageKind, method: str | None, request_id: RequestId, detail: str = ""
    ) -> AgentMessage:
        return AgentMessage(self.epoch, raw, kind, method, request_id, detail)

    def _invalid(self, raw: bytes, detail: str) -> Step:
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.INVALID, None, None, detail))
        return None

    def _other(self, raw: bytes) -> Step:
        try:
            envelope = self._decode_envelope(raw)
        except msgspec.ValidationError as exc:  # a subclass of DecodeError: caught first
            if raw.lstrip().startswith(b"["):
                return self._invalid(raw, "a JSON array (ACP v1 has no batches)")
            return self._invalid(raw, f"not a JSON-RPC message: {exc}")
        except msgspec.DecodeError:
            return self._invalid(raw, "not JSON")
        except RecursionError:
            return self._invalid(raw, "JSON nested too deeply")
        if envelope.jsonrpc != "2.0":
            return self._invalid(raw, f'jsonrpc must be "2.0", not {envelope.jsonrpc!r}')
        method = envelope.method
        if isinstance(method, str):
            if envelope.id is msgspec.UNSET:
                if method == "session/update":
                    return self._loose_update(raw, envelope)
                return self._notification(raw, method)
            if method == "session/request_permission":
                return self._permission(raw, envelope)
            return self._unserved(raw, method, envelope.id)
        if envelope.id is not msgspec.UNSET:
            return self._response_to_us(raw, envelope)
        return self._invalid(raw, "neither a request, a response nor a notification")

    def _notification(self, raw: bytes, method: str) -> Step:
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.NOTIFICATION, method, None))
        return None

    def _unserved(self, raw: bytes, method: str, request_id: RequestId) -> Step:
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.REQUEST, method, request_id))
        yield Write(self._error(request_id, METHOD_NOT_FOUND, "Method not found"))
        return None

    def _loose_update(self, raw: bytes, envelope: Envelope) -> Step:
        try:
            params = msgspec.json.decode(envelope.params or b"null", type=LooseUpdateParams)
        except _UNREADABLE as exc:
            yield from self._invalid(raw, f"a session/update without a readable sessionId and update: {exc}")
            return None
        claimed = params.update.get("sessionUpdate")
        payload = UnknownUpdate(claimed if isinstance(claimed, str) else None, params.update)
        update = self._accept(raw, params.session_id, payload)
        if not isinstance(update, Update):
            return (yield from update)
        yield Record(ON_UPDATE, update)
        cancel = self.update_recorded(update)
        if cancel is not None:
            yield Write(cancel)
        return None

    def _permission(self, raw: bytes, envelope: Envelope) -> Step:
        request_id = envelope.id
        assert request_id is not msgspec.UNSET
        try:
            params = msgspec.json.decode(envelope.params or b"null", type=PermissionParams)
        except _UNREADABLE as exc:
            note = self._note(raw, MessageKind.INVALID_REQUEST, "session/request_permission", request_id, str(exc))
            yield Record(ON_MESSAGE, note)
            yield Write(self._error(request_id, INVALID_PARAMS, f"Invalid params: {exc}"))
            return None
        if not self.has_observer:
            raise MissingDurableObserver(
                "a permission request arrived and the client has no observer to record the decision"
            )
        request = PermissionRequest(self.epoch, raw, request_id, params.session_id, params.tool_call, params.options)
        reply = yield Record(ON_PERMISSION_REQUEST, request)
        if reply is not None and not isinstance(reply, PermissionReply):
            raise ObserverError(
                f"on_permission_request must return a PermissionReply or None, not {type(reply).__name__}"
            )
        turn = self._turn
        cancelled = turn is not None and turn.cancel_sent and turn.session_id == params.session_id
        decide(request, reply, self.policy, cancelled=cancelled)
        yield Record(ON_PERMISSION_DECISION, request)
        yield Write(self._response(request_id, {"outcome": request.outcome}))
        return None

    def _response_to_us(self, raw: bytes, envelope: Envelope) -> Step:
        pending = self._pending
        request_id = envelope.id
        if pending is None or type(request_id) is not int or request_id != pending.id:
            detail = "a response to an id we did not send or that was already answered"
            yield Record(ON_MESSAGE, self._note(raw, MessageKind.STRAY_RESPONSE, None, request_id, detail))  # type: ignore[arg-type]
            return None
        self._pending = None
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.RESPONSE, pending.method, request_id))
        result, error = envelope.result, envelope.error
        if result is not msgspec.UNSET and error is not msgspec.UNSET:
            raise ProtocolViolation(f"the response to {pending.method} has both a result and an error")
        if error is not msgspec.UNSET:
            try:
                err = msgspec.json.decode(error, type=ErrorObject)
            except _UNREADABLE as exc:
                raise ProtocolViolation(f"the error answer to {pending.method} is malformed: {exc}") from exc
            raise RequestError(pending.method, err.code, err.message, err.data)
        if result is msgspec.UNSET:
            raise ProtocolViolation(f"the response to {pending.method} has neither a result nor an error")
        try:
            return Done(pending.finish(result))
        except _UNREADABLE as exc:
            raise ProtocolViolation(f"the answer to {pending.method} does not fit the schema: {exc}") from exc
