"""``tinyacp export JOURNAL|BATCH_DIR --otlp URL``: a run recorded earlier, sent as the spans a live run makes.

The spans carry the recorded times and ids derived from the files (:mod:`tinyacp.otel._export`), so exporting
the same journal twice gives the same spans. A journal is one trace (``journal {name}``); a batch's directory is
one trace (``batch {name}``, a ``turn {id}`` per record of its ``results.jsonl``).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

from ..shared._display import print_error
from ..shared._exit import UsageProblem
from ..shared._text import utf8_or_escaped

__all__ = ["cmd_export"]

_EXPORT_TIMEOUT = 10.0
"""Seconds each batch of spans may take to reach the backend (the command waits for them: that is its job)."""


def cmd_export(args: argparse.Namespace) -> int:
    """``tinyacp export``: 0 when the backend took every span, 1 when it did not, 2 on a usage error."""
    from ...otel._config import TraceExport

    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise UsageProblem('tinyacp export needs OpenTelemetry: pip install "tinyacp[otel]"')
    try:
        url = TraceExport(endpoint=args.otlp).traces_url
    except ValueError as exc:
        raise UsageProblem(f"--otlp: {exc}") from None
    path: Path = args.path
    if not path.exists():
        raise UsageProblem(f"{utf8_or_escaped(str(path))}: no such journal or batch directory")
    import logging

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from ...otel._export import export_batch, export_journal

    logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)  # counted, said once
    exporter = _counting(OTLPSpanExporter(endpoint=url, timeout=_EXPORT_TIMEOUT))
    try:
        if path.is_dir():
            if not (path / "results.jsonl").is_file():
                raise UsageProblem(f"{utf8_or_escaped(str(path))}: a directory without results.jsonl is no batch")
            trace_id = export_batch(path, exporter, capture_content=args.capture_content)
        else:
            trace_id = export_journal(path, exporter, capture_content=args.capture_content)
    except OSError as exc:
        print_error(f"{utf8_or_escaped(str(path))}: {exc.strerror or exc}")
        return 2
    if exporter.failed:
        print_error(f"the backend at {url} did not take {exporter.failed} of {exporter.sent} spans")
        return 1
    print(f"trace {trace_id}: {exporter.sent} spans sent to {url}")
    return 0


def _counting(inner: Any) -> Any:
    """The exporter, counting what went (``sent``) and what did not (``failed``)."""
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Counting(SpanExporter):
        def __init__(self) -> None:
            self.sent = 0
            self.failed = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            self.sent += len(spans)
            try:
                result: SpanExportResult = inner.export(spans)
            except Exception:
                result = SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                self.failed += len(spans)
            return result

        def shutdown(self) -> None:
            inner.shutdown()

    return Counting()
