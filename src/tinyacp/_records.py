"""What the client hands to the caller: the records of each line, and the result of a prompt.

Every line the agent sends becomes exactly one record with its raw bytes: an :class:`Update`, a
:class:`~tinyacp.PermissionRequest`, or an :class:`AgentMessage` for everything else. Every line the client
writes becomes an :class:`OutgoingMessage`. Together they are a complete, byte-exact transcript.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import msgspec

from ._constants import SECRET_MARKER
from ._limits import Overflow
from ._messages import (
    AgentMessageChunk,
    AgentThoughtChunk,
    Notice,
    RequestId,
    Secret,
    SessionUpdate,
    StopReason,
    Subagent,
    ToolCall,
    ToolCallUpdate,
    TurnUsage,
    UpdateKind,
    UsageUpdate,
    UserMessageChunk,
)

__all__ = ["AgentMessage", "MessageKind", "OutgoingMessage", "PromptResult", "Update", "usage_fields"]


class Update(msgspec.Struct, frozen=True, gc=False):
    """One ``session/update`` notification, as received and numbered.

    ``seq`` counts updates from 1 over the whole life of the client (not per prompt, not per session), in the
    order they arrived. ``raw`` is the exact line the agent sent, without its newline.
    """

    epoch: int
    seq: int
    raw: bytes
    kind: UpdateKind
    session_id: str
    payload: SessionUpdate
    """The decoded update; an :class:`~tinyacp.UnknownUpdate` when ``kind`` is UNKNOWN."""

    @property
    def text(self) -> str | None:
        """The text of a message or thought chunk whose content is a text block; otherwise None."""
        payload = self.payload
        if isinstance(payload, AgentMessageChunk | AgentThoughtChunk | UserMessageChunk):
            return payload.content.text
        return None

    @property
    def tool_call_id(self) -> str | None:
        """The tool call a ``tool_call`` or ``tool_call_update`` is about."""
        payload = self.payload
        return payload.tool_call_id if isinstance(payload, ToolCall | ToolCallUpdate) else None

    @property
    def title(self) -> str | None:
        """The tool call's title (the agent's claim), when this update carries one."""
        payload = self.payload
        return payload.title if isinstance(payload, ToolCall | ToolCallUpdate) else None

    @property
    def status(self) -> str | None:
        """The tool call's status, when this update carries one."""
        payload = self.payload
        return payload.status if isinstance(payload, ToolCall | ToolCallUpdate) else None

    @property
    def tool_name(self) -> str | None:
        """The tool's own name (``Bash``, ``Read``), when this update carries one."""
        payload = self.payload
        return payload.name if isinstance(payload, ToolCall | ToolCallUpdate) else None

    @property
    def tool_kind(self) -> str | None:
        """The tool call's kind (the agent's claim), when this update carries one."""
        payload = self.payload
        return payload.tool_kind if isinstance(payload, ToolCall | ToolCallUpdate) else None


class MessageKind(enum.StrEnum):
    """What a line that is neither an update nor a permission request turned out to be."""

    RESPONSE = "response"
    """The answer to the request we were waiting for."""
    STRAY_RESPONSE = "stray_response"
    """A response to an id we never sent or that was already answered; skipped."""
    REQUEST = "request"
    """A request we do not serve (``fs/*``, ``terminal/*``, …); answered with -32601."""
    INVALID_REQUEST = "invalid_request"
    """A request we serve whose params break the schema; answered with -32602."""
    NOTIFICATION = "notification"
    """A notification other than ``session/update``; skipped."""
    INVALID = "invalid"
    """Not JSON, not an object, not JSON-RPC 2.0; skipped."""
    ELICITATION = "elicitation"
    """An ``elicitation/create`` request (with elicitation on): ``on_elicitation`` decides its answer next."""
    SERVED = "served"
    """A request for a file or a terminal the client serves (``Options(serve=...)``): decided, then answered."""
    REFUSED_UPDATE = "refused_update"
    """An update past a transfer limit: recorded, not acted on; the call in flight raises."""


class AgentMessage(msgspec.Struct, frozen=True):
    """Any other line the agent sent, with what the client made of it."""

    epoch: int
    raw: bytes
    kind: MessageKind
    method: str | None = None
    id: RequestId = None
    detail: str = ""
    """For INVALID and STRAY lines: what was wrong, in words for a log."""


class OutgoingMessage(msgspec.Struct, frozen=True):
    """A line the client is about to write, shown to the observer before the write."""

    epoch: int
    raw: bytes
    """The exact JSON line, without its newline."""
    method: str | None
    """The method of a request or notification; None for a response to the agent."""
    id: RequestId
    secrets: tuple[Secret, ...] = ()
    """The :class:`~tinyacp.Secret` values written in ``raw``: redact them before storing the line."""
    forced: bool = False
    """Sent with ``force=True``, although the agent did not advertise what it asks for."""
    decided_by: str = ""
    """For our answer to an ``elicitation/create``: who decided it (``observer``, ``default-decline`` or
    ``cancelled``, as :attr:`~tinyacp.ElicitationRequest.decided_by`); for our answer to a served read, write or
    ``terminal/create``, as :attr:`~tinyacp.ServeRequest.decided_by`; empty for every other line."""

    def redacted(self) -> bytes:
        """``raw`` with every JSON string whose value is a secret's replaced by ``"<secret>"`` (``raw`` itself
        when it has none), whatever the secrets' order and however one's text contains another's."""
        if not self.secrets:
            return self.raw
        return _redact(self.raw, {secret.value for secret in self.secrets})


# One JSON string token. Run from the start of a valid JSON text, it finds exactly the string tokens: outside
# strings JSON has no quote, and inside one the escapes are consumed whole. So each secret is matched as the
# whole string it was written as, never as a piece of another string (replacing each secret's text in turn
# lost the longer of two secrets when one contained the other).
_STRING = re.compile(rb'"(?:[^"\\]+|\\.)*"', re.DOTALL)


def _redact(raw: bytes, values: set[str]) -> bytes:
    encoded = {msgspec.json.encode(value) for value in values}
    marker = msgspec.json.encode(SECRET_MARKER)

    def replace(match: re.Match[bytes]) -> bytes:
        token = match.group()
        if token in encoded:
            return marker
        if b"\\" in token:  # the same text written with other escapes (``\u0041`` for ``A``)
            try:
                if msgspec.json.decode(token) in values:
                    return marker
            except msgspec.DecodeError:
                pass
        return token

    return _STRING.sub(replace, raw)


class PromptResult(msgspec.Struct, frozen=True):
    """The outcome of one prompt turn."""

    session_id: str
    text: str
    """The text of this turn's ``agent_message_chunk`` updates, in order (only the chunks that fit)."""
    stop_reason: StopReason | str
    """The agent's word; a value outside v1 is kept as its string."""
    overflow: Overflow | None
    """Set when the reply reached a limit: the client kept what fit and asked the agent to stop."""
    update_count: int
    """Updates for this session received during the turn."""
    chunk_count: int
    """``agent_message_chunk`` updates for this session received during the turn (kept or not)."""
    timed_out: bool = False
    """The deadline passed, the client sent ``session/cancel``, and the agent then ended the turn."""
    cancelled: bool = False
    """The client sent ``session/cancel`` during the turn (by ``cancel()``, a limit or the deadline)."""
    meta: dict[str, Any] | None = None
    """Fields of the prompt response beyond ``stopReason`` and a readable ``usage`` (``_meta``, for one)."""
    usage: TurnUsage | None = None
    """Tokens, context window and cost of the turn, when the agent reported any."""
    notices: tuple[Notice, ...] = ()
    """The turn's ``notice`` updates for its session, in order (warnings, a model fallback): never in ``text``."""
    subagents: tuple[Subagent, ...] = ()
    """Each child session announced in the turn (by its session or one of its children), in the order of their
    first announcement, with its merged latest state."""
    notices_dropped: int = 0
    """The turn's notices left out of ``notices``, past ``TransferLimits.max_notices`` or ``max_notice_bytes``
    (the observer saw them all)."""
    subagents_dropped: int = 0
    """The turn's ``subagent_update`` updates left out of ``subagents``, past ``TransferLimits.max_subagents``
    or ``max_subagent_bytes``: a child never kept, or a change to a kept child (which keeps its earlier state)."""


def usage_fields(usage: TurnUsage | None, last: UsageUpdate | None = None) -> dict[str, Any] | None:
    """A turn's usage as tinyacp writes it (a batch record, the command's ``result`` event): the fields the agent
    reported, by the snake_case names of :class:`~tinyacp.TurnUsage`, the cost as ``amount`` and ``currency``.

    Args:
        usage: the turn's usage (``PromptResult.usage``).
        last: the session's last ``usage_update``, for a turn without a usage (one that got no answer).

    Returns:
        The fields, or None when the agent reported nothing.
    """
    if usage is not None:
        fields = msgspec.structs.asdict(usage)
    elif last is not None:
        fields = {"context_used": last.used, "context_size": last.size, "cost": last.cost}
    else:
        return None
    written = {name: value for name, value in fields.items() if value is not None}
    cost = written.get("cost")
    if cost is not None:
        written["cost"] = {"amount": cost.amount, "currency": cost.currency}
    return written or None
