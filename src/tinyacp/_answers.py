"""The answers to our requests: pure functions from an answer's bytes to what its request returns. No I/O, no
state.

The conversation core (:mod:`tinyacp._conversation`) matches each answer to its request and keeps the state it
changes (the agent's ``initialize`` answer, the sessions, the turn's reply); here is only the decoding: a
response's result or its error, and what each request's result decodes to. A decoder's error (msgspec's) is the
core's to map to :class:`~tinyacp.ProtocolViolation`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._errors import AuthRequired, ProtocolViolation, RequestError, SessionNotFound, UnsupportedProtocolVersion
from ._inbound import UNREADABLE
from ._messages import (
    AUTH_REQUIRED,
    PROTOCOL_VERSION,
    RESOURCE_NOT_FOUND,
    ConfigOption,
    Envelope,
    ErrorObject,
    Initialize,
    Session,
    SessionAnswer,
    SessionInfo,
    SessionPage,
    StopReason,
    TurnUsage,
    UsageUpdate,
    VersionProbe,
    config_options,
    session_from,
    stop_reason,
    turn_usage,
)

__all__ = [
    "decode_initialize",
    "decode_json",
    "decode_nothing",
    "decode_options",
    "decode_prompt",
    "decode_session",
    "decode_session_page",
    "request_error",
    "result_of",
]


def result_of(method: str, envelope: Envelope, agent: Initialize | None) -> msgspec.Raw:
    """The result of the response ``envelope`` to our request ``method``.

    Raises:
        ProtocolViolation: the response has both a result and an error, or neither, or a malformed error.
        RequestError: the agent answered with an error (see :func:`request_error`).
    """
    result, error = envelope.result, envelope.error
    if result is not msgspec.UNSET and error is not msgspec.UNSET:
        raise ProtocolViolation(f"the response to {method} has both a result and an error")
    if error is not msgspec.UNSET:
        try:
            err = msgspec.json.decode(error, type=ErrorObject)
        except UNREADABLE as exc:
            raise ProtocolViolation(f"the error answer to {method} is malformed: {exc}") from exc
        raise request_error(method, err, agent)
    if result is msgspec.UNSET:
        raise ProtocolViolation(f"the response to {method} has neither a result nor an error")
    return result


def request_error(method: str, error: ErrorObject, agent: Initialize | None) -> RequestError:
    """The error for an error answer: -32000 (with the methods ``agent`` offered) and -32002 get their own
    classes."""
    if error.code == AUTH_REQUIRED:
        offered = tuple(agent.auth_methods) if agent is not None else ()
        return AuthRequired(method, error.code, error.message, error.data, offered)
    if error.code == RESOURCE_NOT_FOUND:
        return SessionNotFound(method, error.code, error.message, error.data)
    return RequestError(method, error.code, error.message, error.data)


def decode_nothing(result: msgspec.Raw) -> None:
    """An answer whose request returns nothing."""
    return None


def decode_json(result: msgspec.Raw) -> Any:
    """The answer to an extension or unstable request: its JSON as Python values."""
    return msgspec.json.decode(result)


def decode_initialize(result: msgspec.Raw) -> Initialize:
    """The ``initialize`` answer, once its protocol version is ours.

    Raises:
        ProtocolViolation: the answer has no ``protocolVersion``.
        UnsupportedProtocolVersion: the agent speaks another version.
    """
    version = msgspec.json.decode(result, type=VersionProbe).protocol_version
    if version is msgspec.UNSET:
        raise ProtocolViolation("the initialize answer has no protocolVersion")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise UnsupportedProtocolVersion(version)
    return msgspec.json.decode(result, type=Initialize)


def decode_session(result: msgspec.Raw, session_id: str | None) -> Session:
    """The answer to ``session/new``, ``session/fork`` (``session_id`` None: the answer names the session),
    ``session/load`` or ``session/resume`` of ``session_id``.

    Raises:
        ProtocolViolation: a new session's answer has no ``sessionId``.
    """
    answer = msgspec.json.decode(result, type=SessionAnswer)
    if session_id is None and not answer.session_id:
        raise ProtocolViolation(
            f"the session/new answer does not fit the schema (no sessionId): {bytes(result)[:200]!r}"
        )
    return session_from(answer, session_id or "")


class _ListAnswer(msgspec.Struct, frozen=True, rename="camel"):
    sessions: list[Any]
    next_cursor: str | None = None


def decode_session_page(result: msgspec.Raw) -> SessionPage:
    """The ``session/list`` answer; an unreadable entry is skipped, as the schema allows."""
    answer = msgspec.json.decode(result, type=_ListAnswer)
    sessions: list[SessionInfo] = []
    for item in answer.sessions:
        try:
            sessions.append(msgspec.convert(item, SessionInfo))
        except msgspec.ValidationError:
            continue
    return SessionPage(tuple(sessions), answer.next_cursor)


def decode_options(result: msgspec.Raw) -> tuple[ConfigOption, ...]:
    """The config options a ``session/set_config_option`` answer carries.

    Raises:
        ProtocolViolation: the answer has no ``configOptions`` list.
    """
    answer = msgspec.json.decode(result, type=dict[str, Any])
    if not isinstance(answer.get("configOptions"), list):
        raise ProtocolViolation(f"the set_config_option answer has no configOptions list: {bytes(result)[:200]!r}")
    return config_options(answer["configOptions"])


def decode_prompt(
    result: msgspec.Raw, last_usage: UsageUpdate | None
) -> tuple[StopReason | str, TurnUsage | None, dict[str, Any] | None]:
    """The ``session/prompt`` answer: its stop reason, the turn's usage (the answer's, with the context of the
    turn's ``last_usage`` update) and the rest of its fields (None: no other field).

    Raises:
        ProtocolViolation: the answer has no ``stopReason`` string.
    """
    fields = msgspec.json.decode(result, type=dict[str, Any])
    reason = fields.pop("stopReason", None)
    if not isinstance(reason, str):
        raise ProtocolViolation(f"the prompt response has no stopReason string: {bytes(result)[:200]!r}")
    usage, read = turn_usage(fields.get("usage"), last_usage)
    if read:
        del fields["usage"]
    return stop_reason(reason), usage, fields or None
