"""A tracer provider that exports without ever holding up a run: a bounded queue, short timeouts, one warning.

Spans go out from OpenTelemetry's batch processor, in its own thread: a backend that is slow or down costs at
most :data:`MAX_QUEUE` spans of memory (the rest are dropped, as the SDK does) and one warning on the
``tinyacp.otel`` logger; each export gives up after :data:`EXPORT_TIMEOUT` seconds; and :func:`shutdown` waits at
most :data:`SHUTDOWN_WAIT` seconds for the last spans.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ._config import TraceExport

__all__ = ["EXPORT_TIMEOUT", "MAX_QUEUE", "SHUTDOWN_WAIT", "make_provider", "shutdown"]

MAX_QUEUE: Final = 2048
"""Spans waiting to go out, at most (the SDK's default): a run makes a few per turn and one per tool call."""

EXPORT_TIMEOUT: Final = 5.0
"""Seconds one export may take, retries included."""

SHUTDOWN_WAIT: Final = 5.0
"""Seconds the end of a run waits for the last spans to go out."""

_log = logging.getLogger("tinyacp.otel")


class _WarnOnce(SpanExporter):
    """The exporter, whose first failure is one warning (the SDK's own logs of it are silenced)."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self._inner = inner
        self._where = where
        self._warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception as exc:
            result = SpanExportResult.FAILURE
            why = f"{type(exc).__name__}: {exc}"
        else:
            why = "the backend refused them or could not be reached"
        if result is not SpanExportResult.SUCCESS and not self._warned:
            self._warned = True
            _log.warning("spans could not be sent to %s (%s); the run goes on without them", self._where, why)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _exporter(spec: TraceExport) -> tuple[SpanExporter, str] | None:
    kind = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if spec.endpoint is None and kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(), "the console"
    if spec.endpoint is None and kind not in ("otlp", "console"):
        _log.warning("OTEL_TRACES_EXPORTER=%s is not one tinyacp can use (otlp, console, none): no spans", kind)
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    for name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk.trace.export"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # their failure is our one warning
    url = spec.traces_url
    exporter = OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT)
    where = (
        url
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "the OTLP endpoint")
    )
    return exporter, where


def make_provider(spec: TraceExport) -> TracerProvider | None:
    """A provider exporting as ``spec`` and the standard variables say; None when they turn export off."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    made = _exporter(spec)
    if made is None:
        return None
    attributes: dict[str, Any] = {}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = spec.service_name
    provider = TracerProvider(resource=Resource.create(attributes))
    processor = BatchSpanProcessor(
        _WarnOnce(*made),
        max_queue_size=MAX_QUEUE,
        schedule_delay_millis=500,
        export_timeout_millis=EXPORT_TIMEOUT * 1000,
    )
    provider.add_span_processor(processor)
    return provider


def shutdown(provider: TracerProvider, wait: float = SHUTDOWN_WAIT) -> None:
    """Send what is queued and stop, waiting at most ``wait`` seconds (a daemon thread finishes the rest, or is
    dropped at exit)."""
    worker = threading.Thread(target=provider.shutdown, name="tinyacp-otel-shutdown", daemon=True)
    worker.start()
    worker.join(wait)


def flush(provider: Any, wait: float = SHUTDOWN_WAIT) -> None:
    """Send what is queued, waiting at most ``wait`` seconds (a batch's worker, after each turn)."""
    force = getattr(provider, "force_flush", None)
    if callable(force):
        force(int(wait * 1000))
