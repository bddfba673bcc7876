"""The command's run as a trace: ``--otel-endpoint URL`` or OpenTelemetry's standard variables turn it on.

A run of ``tinyacp prompt`` or ``chat`` is a ``tinyacp prompt`` (``tinyacp chat``) span, a child of the
``TRACEPARENT`` the command was started with (a CI job's trace), over the agent's spans
(:class:`tinyacp.otel.TracingObserver`). Export never holds the run up or fails it (:mod:`tinyacp.otel._provider`).
Nothing of OpenTelemetry is imported unless export is on.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ...otel._config import TraceExport, export_wanted

__all__ = ["CommandTrace", "trace_export"]


def trace_export(args: argparse.Namespace) -> TraceExport | None:
    """What ``--otel-endpoint`` and the standard variables ask for (None: no export).

    Raises:
        UsageProblem: an endpoint that is not an http(s) URL.
    """
    from ._exit import UsageProblem

    endpoint = getattr(args, "otel_endpoint", None)
    if not export_wanted(endpoint):
        return None
    import importlib.util

    if (
        importlib.util.find_spec("opentelemetry.sdk") is None
        or importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None
    ):
        if endpoint is not None:
            raise UsageProblem('--otel-endpoint needs OpenTelemetry: pip install "tinyacp[otel]"')
        print(
            "tinyacp: the OTEL_* variables ask for spans, but OpenTelemetry is not installed (pip install "
            '"tinyacp[otel]"): the run goes on without them',
            file=sys.stderr,
        )
        return None
    try:
        spec = TraceExport(endpoint=endpoint)
    except ValueError as exc:
        raise UsageProblem(f"--otel-endpoint: {exc}") from None
    _warn_on_stderr()
    return spec


class CommandTrace:
    """The run's span and the provider that exports it (made only when export is on)."""

    def __init__(self, spec: TraceExport, name: str) -> None:
        from ..._trace_context import TraceContext
        from ...otel._provider import make_provider
        from ...otel._sink import root_context

        self.spec = spec
        self.provider = make_provider(spec)
        self.trace_id: str | None = None
        self.span: Any = None
        if self.provider is None:
            return
        tracer = self.provider.get_tracer("tinyacp")
        self.span = tracer.start_span(name, context=root_context(TraceContext.from_env()))
        self.trace_id = f"{self.span.get_span_context().trace_id:032x}"

    def observer(self, inner: Any) -> Any:
        """``inner`` traced under the run's span (``inner`` itself when export turned out off)."""
        if self.span is None:
            return inner
        from ..._trace_context import TraceContext
        from ...otel._observer import TracingObserver

        context = self.span.get_span_context()
        parent = TraceContext(f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}")
        return TracingObserver(
            inner, tracer_provider=self.provider, capture_content=self.spec.capture_content, parent=parent
        )

    def end(self, code: int, error_type: str | None) -> None:
        """End the run's span with the exit status, and send what is queued (waiting a bounded time)."""
        if self.span is None or self.provider is None:
            return
        from opentelemetry.trace import Status, StatusCode

        from ...otel._provider import shutdown

        self.span.set_attribute("process.exit.code", code)
        if error_type is not None:
            self.span.set_attribute("error.type", error_type)
            self.span.set_status(Status(StatusCode.ERROR))
        self.span.end()
        shutdown(self.provider)


def _warn_on_stderr() -> None:
    """The export's one warning reaches the person running the command (the library's loggers are silent)."""
    logger = logging.getLogger("tinyacp.otel")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("tinyacp: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
