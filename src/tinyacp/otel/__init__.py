"""Every run as an OpenTelemetry trace: ``pip install "tinyacp[otel]"``.

Wrap the observer you already have in a :class:`TracingObserver` and the client's agent process, its
``initialize``, its session calls, each prompt turn (``invoke_agent {agent}``) and each tool call
(``execute_tool {title}``) become spans, following OpenTelemetry's GenAI semantic conventions; the agent is
started with the context of its spans (``_meta`` and ``TRACEPARENT``), so its own telemetry joins the trace::

    from opentelemetry.sdk.trace import TracerProvider
    import tinyacp
    from tinyacp.otel import TracingObserver

    journal = tinyacp.JsonlJournal("run.jsonl")
    traced = TracingObserver(journal, tracer_provider=TracerProvider(...))
    options = tinyacp.Options(command=[...], epoch=journal.begin_epoch(), observer=traced)

The spans are made from what the client hands the observer, so a client without a tracing observer pays
nothing for tracing. Importing this module imports nothing of OpenTelemetry; making a :class:`TracingObserver`
does. docs/traces.md lists the spans, their attributes and what is captured.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._config import TraceExport, export_wanted
    from ._observer import CAPTURE_CONTENT_ENV, TracingObserver, export_batch, export_journal
    from ._spans import MAX_ATTRIBUTE_LENGTH, MAX_CAPTURED_CHARS, MAX_EVENTS

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "MAX_ATTRIBUTE_LENGTH",
    "MAX_CAPTURED_CHARS",
    "MAX_EVENTS",
    "TraceExport",
    "TracingObserver",
    "export_batch",
    "export_journal",
    "export_wanted",
]

_LAZY: dict[str, str] = {
    "CAPTURE_CONTENT_ENV": "._observer",
    "MAX_ATTRIBUTE_LENGTH": "._spans",
    "MAX_CAPTURED_CHARS": "._spans",
    "MAX_EVENTS": "._spans",
    "TraceExport": "._config",
    "TracingObserver": "._observer",
    "export_batch": "._observer",
    "export_journal": "._observer",
    "export_wanted": "._config",
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (importing :mod:`tinyacp.otel._config` alone stays cheap).

    Raises:
        AttributeError: no such public name.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tinyacp.otel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
