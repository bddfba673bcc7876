"""The model's spans as OpenTelemetry spans: imported only once a tracer is configured."""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._trace_context import TraceContext
from ._spans import Attributes

__all__ = ["OtelSink", "root_context"]


def root_context(parent: TraceContext | None) -> otel_context.Context:
    """The context the process's span starts in: ``parent`` when given, else the caller's current one."""
    if parent is None:
        return otel_context.get_current()
    return propagate.extract(parent.carrier(), context=otel_context.Context())


class OtelSink:
    """Starts, annotates and ends real spans with ``tracer``, the model's times as theirs."""

    def __init__(self, tracer: trace.Tracer, root: otel_context.Context) -> None:
        self._tracer = tracer
        self._root = root
        self._spans: dict[str, trace.Span] = {}

    def start(self, key: str, name: str, parent: str | None, ts: int, attributes: Attributes, *, client: bool) -> None:
        owner = self._spans.get(parent) if parent is not None else None
        context = self._root if owner is None else trace.set_span_in_context(owner, self._root)
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        self._spans[key] = self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=ts
        )

    def event(self, key: str, name: str, ts: int, attributes: Attributes) -> None:
        span = self._spans.get(key)
        if span is not None:
            span.add_event(name, attributes, timestamp=ts)

    def end(self, key: str, ts: int, attributes: Attributes, error: tuple[str, str] | None) -> None:
        span = self._spans.pop(key, None)
        if span is None:
            return
        span.set_attributes(attributes)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error[1]))
        span.end(end_time=ts)

    def carrier(self, key: str) -> dict[str, str]:
        """The W3C headers of span ``key`` (the caller's baggage with them), for the agent."""
        span = self._spans.get(key)
        found: dict[str, str] = {}
        if span is not None:
            propagate.inject(found, context=trace.set_span_in_context(span, self._root))
        return found

    def trace_id(self, key: str) -> str | None:
        span = self._spans.get(key)
        if span is None:
            return None
        found: Any = span.get_span_context().trace_id
        return format(found, "032x") if found else None
