"""A batch as one trace: a ``batch {name}`` span in the process that runs the batch, and a ``turn {id}`` span per
attempt wherever the turn runs (this process, or a Ray worker), the batch span's ``traceparent`` carried to the
worker in the turn's settings. Each turn's client gets a :class:`~tinyacp.otel.TracingObserver` under its turn.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from .._trace_context import TraceContext
from ..otel._config import TraceExport
from ..otel._observer import TracingObserver
from ..otel._provider import flush, make_provider, shutdown
from ..otel._sink import root_context
from ..otel._spans import cut

__all__ = ["TurnTrace", "batch_trace"]

_providers: dict[tuple[str | None, str], TracerProvider | None] = {}
"""This process's provider for each endpoint and service name: a worker's turns share one."""
_lock = threading.Lock()
_here: set[tuple[str | None, str]] = set()
"""The exports whose batch span is in this process (the local engine): its end sends what its turns queued."""


def _provider(spec: TraceExport) -> TracerProvider | None:
    key = (spec.endpoint, spec.service_name)
    with _lock:
        if key not in _providers:
            _providers[key] = make_provider(spec)
        return _providers[key]


def _forget(spec: TraceExport) -> TracerProvider | None:
    with _lock:
        return _providers.pop((spec.endpoint, spec.service_name), None)


def _carrier(span: trace.Span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


@contextmanager
def batch_trace(settings: Any, out: Path) -> Iterator[Any]:
    """The batch's span around the batch: yields the settings whose ``trace.parent`` is that span (or the
    settings without ``trace`` when export is turned off by the standard variables)."""
    spec: TraceExport = settings.trace
    provider = _provider(spec)
    if provider is None:
        yield dataclasses.replace(settings, trace=None)
        return
    parent = TraceContext.from_carrier({"traceparent": spec.parent}) if spec.parent else TraceContext.from_env()
    tracer = provider.get_tracer("tinyacp")
    _here.add((spec.endpoint, spec.service_name))
    span = tracer.start_span(f"batch {cut(out.name, 100)}", context=root_context(parent))
    span.set_attribute("tinyacp.batch.directory", cut(str(out)))
    try:
        yield dataclasses.replace(settings, trace=dataclasses.replace(spec, parent=_carrier(span)))
    except BaseException as exc:
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, cut(str(exc))))
        raise
    finally:
        span.end()
        _here.discard((spec.endpoint, spec.service_name))
        _forget(spec)
        shutdown(provider)


class TurnTrace:
    """One attempt's ``turn {id}`` span, child of the batch's; its client's observer is traced under it."""

    def __init__(self, spec: TraceExport, item_id: object, attempt: int, agent: str) -> None:
        self._spec = spec
        self._provider = _provider(spec)
        self.trace_id: str | None = None
        self._span: trace.Span | None = None
        if self._provider is None:
            return
        parent = TraceContext.from_carrier({"traceparent": spec.parent}) if spec.parent else None
        tracer = self._provider.get_tracer("tinyacp")
        self._span = tracer.start_span(f"turn {cut(str(item_id), 100)}", context=root_context(parent))
        self._span.set_attributes({"tinyacp.item.id": cut(str(item_id)), "tinyacp.attempt": attempt})
        self._span.set_attribute("tinyacp.agent", cut(agent))
        self.trace_id = f"{self._span.get_span_context().trace_id:032x}"

    def observer(self, inner: Any) -> Any:
        """``inner`` traced under this turn (``inner`` itself when export is off)."""
        if self._span is None:
            return inner
        context = TraceContext.from_carrier({"traceparent": _carrier(self._span)})
        return TracingObserver(
            inner, tracer_provider=self._provider, capture_content=self._spec.capture_content, parent=context
        )

    def end(self, error: tuple[str, str] | None, stop_reason: str | None) -> None:
        """End the turn's span and send what is queued (bounded)."""
        if self._span is None:
            return
        if stop_reason is not None:
            self._span.set_attribute("tinyacp.stop_reason", cut(stop_reason))
        if error is not None:
            self._span.set_attribute("error.type", cut(error[0], 100))
            self._span.set_status(Status(StatusCode.ERROR, cut(error[1])))
        self._span.end()
        if (self._spec.endpoint, self._spec.service_name) not in _here:
            # On a worker (Ray): send now, in the background, rather than at the next tick of the processor,
            # since the cluster may stop the worker when the batch ends. Never waited for here.
            threading.Thread(target=flush, args=(self._provider,), daemon=True).start()
