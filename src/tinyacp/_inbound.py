"""What the agent sends, classified: pure functions from a line that is not a plain update to what it is, and
from a request's ``params`` to their values. No I/O, no state.

The conversation core (:mod:`tinyacp._conversation`) decodes the plain updates itself (the hot path) and gives
every other line to :func:`read` and :func:`kind`, in the order JSON-RPC classifies a message; what to record,
answer or decide for each kind (which needs the core's state: the request in flight, the turn, the limits) stays
in the core.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import msgspec

from . import _tolerant_json as tolerant_json
from ._elicitation import ElicitationParams
from ._messages import INVALID_PARAMS, Envelope, LooseUpdateParams, PermissionParams, UnknownUpdate

__all__ = [
    "INVALID_REQUEST",
    "UNREADABLE",
    "Kind",
    "Malformed",
    "elicitation_params",
    "kind",
    "loose_update",
    "permission_params",
    "read",
]

# msgspec raises RecursionError for JSON nested past the interpreter's limit (about 1000 levels, a 2 KB line):
# that is an unreadable line from the agent like any other, not our crash.
UNREADABLE = (msgspec.MsgspecError, RecursionError)

INVALID_REQUEST = -32600
"""JSON-RPC's code for a message that is not a valid request."""


class Kind(enum.Enum):
    """What a JSON-RPC message of the agent is."""

    UPDATE = enum.auto()
    """A ``session/update`` the update decoder refused: a kind of update we do not know, or an unusual one."""
    NOTIFICATION = enum.auto()
    PERMISSION = enum.auto()
    """A ``session/request_permission`` request."""
    ELICITATION = enum.auto()
    """An ``elicitation/create`` request, with elicitation on."""
    SERVED = enum.auto()
    """A request for a file or a terminal, of a method the client serves (``Options(serve=...)``)."""
    UNSERVED = enum.auto()
    """A request of a method we do not serve."""
    RESPONSE = enum.auto()
    """A response: to our request in flight, or a stray one."""
    NEITHER = enum.auto()
    """Neither a request, a response nor a notification."""


class Malformed:
    """A line that is not a JSON-RPC message we can use: ``detail`` says why; a request whose id could be read
    (``request_id`` not None) is answered with ``code``, so that the agent never waits for ever."""

    __slots__ = ("code", "detail", "request_id")

    def __init__(self, detail: str, request_id: int | str | None = None, code: int = INVALID_REQUEST) -> None:
        self.detail = detail
        self.request_id = request_id
        self.code = code


def read(decode: Callable[[bytes], Envelope], text: bytes) -> Envelope | Malformed:
    """The JSON-RPC envelope of ``text`` (a line made parseable), decoded by ``decode``, or why it is none."""
    try:
        envelope = decode(text)
    except msgspec.ValidationError as exc:  # a subclass of DecodeError: caught first
        if text.lstrip().startswith(b"["):
            return Malformed("a JSON array (ACP v1 has no batches)")
        return _malformed(text, f"not a JSON-RPC message: {exc}", INVALID_REQUEST)
    except msgspec.DecodeError:
        return Malformed("not JSON")
    except RecursionError:
        return _malformed(text, "JSON nested too deeply", INVALID_PARAMS)
    if envelope.jsonrpc != "2.0":
        return _malformed(text, f'jsonrpc must be "2.0", not {envelope.jsonrpc!r}', INVALID_REQUEST)
    return envelope


def _malformed(text: bytes, detail: str, code: int) -> Malformed:
    return Malformed(detail, tolerant_json.request_id(text), code)


def kind(envelope: Envelope, *, elicitation: bool, served: frozenset[str] = frozenset()) -> Kind:  # noqa: PLR0911  one return per kind
    """What ``envelope`` is; ``elicitation``: whether we serve ``elicitation/create``; ``served``: the file and
    terminal methods we serve."""
    method = envelope.method
    if isinstance(method, str):
        if envelope.id is msgspec.UNSET:
            return Kind.UPDATE if method == "session/update" else Kind.NOTIFICATION
        if method == "session/request_permission":
            return Kind.PERMISSION
        if method == "elicitation/create" and elicitation:
            return Kind.ELICITATION
        if method in served:
            return Kind.SERVED
        return Kind.UNSERVED
    if envelope.id is not msgspec.UNSET:
        return Kind.RESPONSE
    return Kind.NEITHER


def loose_update(envelope: Envelope) -> tuple[str, UnknownUpdate] | str:
    """A ``session/update`` the update decoder refused: its session and its update kept as JSON values, or why
    it is unusable."""
    try:
        params = msgspec.json.decode(envelope.params or b"null", type=LooseUpdateParams)
    except UNREADABLE as exc:
        return f"a session/update without a readable sessionId and update: {exc}"
    claimed = params.update.get("sessionUpdate")
    return params.session_id, UnknownUpdate(claimed if isinstance(claimed, str) else None, params.update)


def permission_params(envelope: Envelope) -> PermissionParams | str:
    """A ``session/request_permission`` request's params, or why they are invalid."""
    try:
        return msgspec.json.decode(envelope.params or b"null", type=PermissionParams)
    except UNREADABLE as exc:
        return str(exc)


def elicitation_params(envelope: Envelope) -> ElicitationParams | str:
    """An ``elicitation/create`` request's params, or why they are invalid."""
    try:
        params = msgspec.json.decode(envelope.params or b"null", type=ElicitationParams)
    except UNREADABLE as exc:
        return str(exc)
    problem = params.problem()
    return params if problem is None else problem
