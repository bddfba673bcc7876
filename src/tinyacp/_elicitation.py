"""The agent asks the user for input: ``elicitation/create`` (https://agentclientprotocol.com/protocol/elicitation).

Only a client that advertises ``elicitation`` gets such requests (``ClientFeatures(elicitation=True)``). Each goes
to the observer's optional ``on_elicitation``, which answers with an :class:`ElicitationReply` or leaves it
(None: declined). A ``form`` elicitation carries a small JSON Schema of the fields wanted; a ``url`` one a URL for
the user to open: tinyacp never opens it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ._messages import RequestId

__all__ = ["ElicitationReply", "ElicitationRequest"]

_ACTIONS = ("accept", "decline", "cancel")


def _check_value(key: object, value: object) -> None:
    """Refuse what ``ElicitationContentValue`` does not allow: a str, an int, a finite float, a bool or a list of
    str."""
    if not isinstance(key, str):
        raise TypeError(f"elicitation content keys are field names (str), not {key!r}")
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no nan or inf: it would go out as null
        raise TypeError(f"elicitation content value for {key!r} must be a finite number, not {value!r}")
    if isinstance(value, str | int | float | bool):
        return
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return
    raise TypeError(
        f"elicitation content value for {key!r} must be a str, int, float, bool or list of str, not {value!r}"
    )


class ElicitationReply(msgspec.Struct, frozen=True):
    """The answer to an elicitation. Build one with :meth:`accept`, :meth:`decline` or :meth:`cancel`.

    Raises:
        ValueError: an action other than accept, decline or cancel, or content with an action other than accept.
        TypeError: content that is not a dict of field names to str, int, float, bool or list of str values.
    """

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise ValueError(f"an ElicitationReply action is accept, decline or cancel, not {self.action!r}")
        if self.content is not None:
            if self.action != "accept":
                raise ValueError("only an accepting reply carries content")
            if not isinstance(self.content, dict):
                raise TypeError(f"elicitation content is a dict, not {type(self.content).__name__}")
            for key, value in self.content.items():
                _check_value(key, value)

    @classmethod
    def accept(cls, content: dict[str, Any] | None = None) -> ElicitationReply:
        """The user answered: ``content`` maps each field of the requested schema to its value."""
        return cls("accept", dict(content) if content is not None else None)

    @classmethod
    def decline(cls) -> ElicitationReply:
        """The user (or the program) declined to answer: what a request nobody answers gets."""
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationReply:
        """The request was dismissed (the turn is being cancelled, the user closed the form)."""
        return cls("cancel")

    def _wire(self) -> dict[str, Any]:
        if self.content is None:
            return {"action": self.action}
        content = {key: list(value) if isinstance(value, tuple) else value for key, value in self.content.items()}
        return {"action": self.action, "content": content}


@dataclass(slots=True, eq=False)
class ElicitationRequest:
    """An ``elicitation/create`` request from the agent and, once decided, the reply it gets.

    The line is recorded with ``on_message`` first (its :class:`~tinyacp.MessageKind` is ``elicitation``); then
    ``on_elicitation`` gets this request; the answer line, which carries the decision, goes to ``on_send``
    before it is written. So the request and the decision are recorded before the agent hears the answer.
    """

    epoch: int
    raw: bytes
    """The exact line the agent sent, without its newline."""
    request_id: RequestId
    """The agent's own id for this request, echoed in our answer."""
    message: str
    """What the agent asks, in words for the user."""
    mode: str
    """``form`` (fill in ``requested_schema``), ``url`` (open ``url``: tinyacp never does), or a newer mode."""
    session_id: str | None = None
    """The session that asks (None when the request is tied to a request instead)."""
    tool_call_id: str | None = None
    """The tool call that asks, if any."""
    scope_request_id: RequestId = None
    """The request of ours this elicitation is tied to, when it is not tied to a session."""
    requested_schema: dict[str, Any] | None = None
    """A form's fields: a JSON Schema object whose ``properties`` are strings, numbers, integers, booleans or
    enums, and its ``required`` list."""
    url: str | None = None
    elicitation_id: str | None = None
    reply: ElicitationReply | None = None
    """The answer the agent gets, filled in before the answer is recorded and written."""
    decided_by: str = ""
    """``observer``, ``default-decline`` (the observer gave no reply) or ``cancelled`` (its turn was cancelled)."""


class ElicitationParams(msgspec.Struct, frozen=True, rename="camel"):
    """The params of ``elicitation/create`` as the schema has them (a scope, and a mode's own fields)."""

    message: str
    mode: str
    session_id: str | None = None
    tool_call_id: str | None = None
    request_id: int | str | None = None
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None

    def problem(self) -> str | None:
        """What breaks the schema beyond the field types (None: nothing)."""
        if self.session_id is None and self.request_id is None:
            return "an elicitation needs a sessionId or a requestId"
        if self.mode == "form" and self.requested_schema is None:
            return "a form elicitation needs a requestedSchema"
        if self.mode == "url" and (self.url is None or self.elicitation_id is None):
            return "a url elicitation needs a url and an elicitationId"
        return None


def elicitation_request(epoch: int, raw: bytes, request_id: RequestId, params: ElicitationParams) -> ElicitationRequest:
    """The observer's view of a request whose params fit the schema."""
    return ElicitationRequest(
        epoch,
        raw,
        request_id,
        params.message,
        params.mode,
        params.session_id,
        params.tool_call_id,
        params.request_id,
        params.requested_schema,
        params.url,
        params.elicitation_id,
    )
