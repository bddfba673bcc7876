"""The caller's trace, carried into the agent: W3C Trace Context in ``_meta`` and in the agent's environment.

ACP's ``_meta`` propagation convention (https://agentclientprotocol.com/rfds/meta-propagation) puts the W3C
``traceparent``, ``tracestate`` and ``baggage`` as root keys of a request's ``_meta``; OpenTelemetry's
environment-variable carriers (https://opentelemetry.io/docs/specs/otel/context/env-carriers/) name them
``TRACEPARENT``, ``TRACESTATE`` and ``BAGGAGE`` in a process's environment. The context comes from, in order:
a tracing observer (:mod:`tinyacp.otel`: its own span for each request), ``Options(trace_context=...)``, or the
span active in the caller when the OpenTelemetry API is already imported. Nothing here imports OpenTelemetry:
the active span is read only when the caller's program loaded ``opentelemetry.context`` already.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ENV_KEYS",
    "META_KEYS",
    "TraceContext",
    "agent_env",
    "merged_meta",
    "process_context",
    "request_tracer",
]

META_KEYS: Final = ("traceparent", "tracestate", "baggage")
"""The root keys of ``_meta`` that carry the context, as the ACP convention names them."""

ENV_KEYS: Final = ("TRACEPARENT", "TRACESTATE", "BAGGAGE")
"""The same, as OpenTelemetry's environment-variable carriers name them."""

_TRACEPARENT: Final = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
"""Version 00 of https://www.w3.org/TR/trace-context/#traceparent-header, all-zero ids being invalid."""

_MAX_HEADER: Final = 8192
"""The longest ``tracestate`` or ``baggage`` accepted: W3C Baggage allows 8192 bytes in all; tracestate has at
most 32 members of at most 256 characters each, which is less."""


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A W3C Trace Context: the trace the agent's work joins.

    Args:
        traceparent: ``00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>``, lowercase.
        tracestate: the vendors' entries, as the ``tracestate`` header (None: none).
        baggage: the W3C ``baggage`` header (None: none).

    Raises:
        ValueError: a ``traceparent`` that is not version 00 of the W3C format (or has an all-zero id), or a
            ``tracestate`` or ``baggage`` with a control character or longer than 8192 characters.
        TypeError: a value that is not a str.
    """

    traceparent: str
    tracestate: str | None = None
    baggage: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.traceparent, str):
            raise TypeError(f"traceparent must be a str, not {type(self.traceparent).__name__}")
        if _TRACEPARENT.fullmatch(self.traceparent) is None:
            raise ValueError(
                f"traceparent {self.traceparent[:80]!r} is not a W3C traceparent "
                "(00-<32 lowercase hex>-<16 lowercase hex>-<2 hex>, ids not all zero)"
            )
        for name in ("tracestate", "baggage"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
            if len(value) > _MAX_HEADER or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
                raise ValueError(f"{name} must be at most {_MAX_HEADER} printable characters")

    @property
    def trace_id(self) -> str:
        """The trace's id: 32 lowercase hex characters."""
        return self.traceparent[3:35]

    @property
    def span_id(self) -> str:
        """The parent span's id: 16 lowercase hex characters."""
        return self.traceparent[36:52]

    def carrier(self) -> dict[str, str]:
        """The context as ``_meta`` keys (``traceparent`` and, when set, ``tracestate`` and ``baggage``)."""
        found = {"traceparent": self.traceparent}
        if self.tracestate:
            found["tracestate"] = self.tracestate
        if self.baggage:
            found["baggage"] = self.baggage
        return found

    @classmethod
    def from_carrier(cls, carrier: Mapping[str, Any], *, env: bool = False) -> TraceContext | None:
        """The context a carrier holds: a ``_meta`` object's root keys, or an environment (``env=True``:
        ``TRACEPARENT``…). None when it holds no valid ``traceparent`` (an invalid one is ignored, as W3C
        Trace Context asks of a receiver); an invalid ``tracestate`` or ``baggage`` is dropped alone."""
        keys = ENV_KEYS if env else META_KEYS
        parent = carrier.get(keys[0])
        if not isinstance(parent, str) or _TRACEPARENT.fullmatch(parent.strip().lower()) is None:
            return None
        rest = []
        for key in keys[1:]:
            value = carrier.get(key)
            try:
                TraceContext(parent.strip().lower(), value if isinstance(value, str) else None)
            except ValueError:
                value = None
            rest.append(value if isinstance(value, str) and value else None)
        return cls(parent.strip().lower(), rest[0], rest[1])

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TraceContext | None:
        """The context in ``TRACEPARENT``/``TRACESTATE``/``BAGGAGE`` of ``env`` (None: this process's)."""
        return cls.from_carrier(os.environ if env is None else env, env=True)

    @classmethod
    def current(cls) -> TraceContext | None:
        """The span active in this thread or task, when the program imported the OpenTelemetry API and its
        propagators give a valid ``traceparent``; None otherwise (OpenTelemetry is never imported here)."""
        if "opentelemetry.context" not in sys.modules:
            return None
        from opentelemetry import propagate

        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return cls.from_carrier(carrier)


def merged_meta(meta: Any, carrier: Mapping[str, str] | None) -> Any:
    """``_meta`` with the trace context's keys added: the caller's own keys win. When the caller's ``meta``
    sets ``traceparent`` itself, its trace is the one sent and none of the three keys is added, so a
    ``tracestate`` of another trace never rides with it. ``meta`` that is not a dict is left alone (the request
    refuses it where it is checked)."""
    if not carrier:
        return meta
    if meta is None:
        return dict(carrier)
    if not isinstance(meta, dict) or "traceparent" in meta:
        return meta
    return {**carrier, **meta}


def request_tracer(explicit: TraceContext | None, hook: Any) -> Callable[[str], Mapping[str, str] | None] | None:
    """What gives each request's context: the tracing observer's hook (``trace_request(method)``), else the
    explicit context, else the caller's active span when OpenTelemetry is loaded (asked per request, so a span
    the caller opens around one call is that call's). None: no request carries one (the common case: nothing to
    do per request)."""
    if callable(hook):
        return hook  # type: ignore[no-any-return]
    if explicit is not None:
        fixed = explicit.carrier()
        return lambda method: fixed
    return _active


def _active(method: str) -> Mapping[str, str] | None:
    context = TraceContext.current()
    return None if context is None else context.carrier()


def agent_env(env: Mapping[str, str] | None, context: TraceContext | None) -> Mapping[str, str] | None:
    """The agent's environment with the context in ``TRACEPARENT``/``TRACESTATE``/``BAGGAGE``. An ``env`` the
    caller passed keeps any of the three it sets (then none is added: one trace, whole); with ``env=None``
    (inherit ours) the context replaces the three inherited ones, since the agent's work is a child of ours."""
    if context is None:
        return env
    values = dict(zip(ENV_KEYS, (context.traceparent, context.tracestate, context.baggage), strict=True))
    if env is not None:
        if any(key in env for key in ENV_KEYS):
            return env
        base = dict(env)
    else:
        base = {key: value for key, value in os.environ.items() if key not in ENV_KEYS}
    base.update({key: value for key, value in values.items() if value})
    return base


def process_context(explicit: TraceContext | None, observer: object, command: Sequence[str]) -> TraceContext | None:
    """The context the agent's process starts with: the tracing observer's span for the process
    (``trace_process(command)``), else the explicit context, else the caller's active span (OpenTelemetry
    loaded)."""
    hook = getattr(observer, "trace_process", None)
    if callable(hook):
        found = hook(command)
        if isinstance(found, TraceContext):
            return found
    return explicit if explicit is not None else TraceContext.current()
