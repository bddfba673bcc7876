"""What spans a run makes, read from OpenTelemetry's in-memory exporter: subagents under their parent's tool call,
events for notices, compaction, cancellation and permission decisions, failures named, and every bound. The same
spans reach a real backend in tests/test_traces.py; here the cases that need a particular turn."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tinyacp
from helpers import pid_alive
from tinyacp.otel import MAX_ATTRIBUTE_LENGTH, MAX_EVENTS, TracingObserver
from tinyacp.otel._spans import SpanModel

DEMO = [sys.executable, "-m", "tinyacp.demo"]


def traced(**options: Any) -> tuple[InMemorySpanExporter, TracingObserver, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, TracingObserver(tinyacp.BaseObserver(), tracer_provider=provider, **options), provider


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def parent(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    assert span.parent is not None, span.name
    return next(other for other in spans if other.context.span_id == span.parent.span_id)


def test_a_subagent_is_a_child_of_its_parents_turn_and_its_tool_calls_are_its_own(tmp_path: Path) -> None:
    exporter, observer, _ = traced()
    features = tinyacp.ClientFeatures(subagents=True)
    options = tinyacp.Options(
        command=DEMO, observer=observer, features=features, policy=tinyacp.PermissionPolicy(kinds=["read"])
    )
    with tinyacp.Client(options) as client:
        client.initialize(timeout=30)
        session = client.new_session(str(tmp_path), timeout=30)
        result = client.prompt(session.id, "read with-subagent with-notice with-compaction", timeout=30)
    assert result.stop_reason == "end_turn"
    spans = exporter.get_finished_spans()
    turn = named(spans, "invoke_agent tinyacp-demo")[0]
    subagent = named(spans, "invoke_agent File reader")[0]
    assert parent(subagent, spans) is turn or parent(parent(subagent, spans), spans) is turn
    assert subagent.attributes is not None
    assert subagent.attributes["tinyacp.parent_session"] == session.id
    child_tools = [span for span in spans if span.name.startswith("execute_tool") and parent(span, spans) is subagent]
    assert child_tools
    assert [event.name for event in turn.events if event.name in ("notice", "compaction")] == [
        "notice",
        "compaction",
        "compaction",
    ] or {"notice", "compaction"} <= {event.name for event in turn.events}
    assert all((span.attributes or {}).get("error.type") is None for span in spans)


def test_a_cancelled_turn_has_the_cancel_and_the_answer_as_events(tmp_path: Path) -> None:
    exporter, observer, _ = traced()
    options = tinyacp.Options(command=[*DEMO, "--delay", "0.3", "--chunks", "20"], observer=observer)
    with tinyacp.Client(options) as client:
        client.initialize(timeout=30)
        session = client.new_session(str(tmp_path), timeout=30)
        timer = threading.Timer(0.5, client.cancel, args=(session.id,))
        timer.start()
        try:
            result = client.prompt(session.id, "hello", timeout=60)
        finally:
            timer.cancel()
    assert result.stop_reason == "cancelled"
    turn = named(exporter.get_finished_spans(), "invoke_agent tinyacp-demo")[0]
    assert {"cancel", "cancelled"} <= {event.name for event in turn.events}
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.response.finish_reasons"] == ("cancelled",)


def test_a_failure_ends_every_open_span_with_the_exceptions_name(tmp_path: Path) -> None:
    exporter, observer, _ = traced()
    options = tinyacp.Options(command=[*DEMO, "--delay", "0.5", "--chunks", "50"], observer=observer)
    with tinyacp.Client(options) as client:
        pid = client.pid
        client.initialize(timeout=30)
        session = client.new_session(str(tmp_path), timeout=30)
        timer = threading.Timer(0.5, client.kill)
        timer.start()
        with pytest.raises(tinyacp.AgentExited):
            client.prompt(session.id, "hello", timeout=60)
        timer.cancel()
    assert not pid_alive(pid)
    spans = exporter.get_finished_spans()
    turn = named(spans, "invoke_agent tinyacp-demo")[0]
    process = named(spans, "agent process")[0]
    for span in (turn, process):
        assert span.attributes is not None
        assert span.attributes["error.type"] == "AgentExited", span.name
        assert not span.status.is_ok


def test_an_error_answer_is_the_exception_tinyacp_raises(tmp_path: Path) -> None:
    exporter, observer, _ = traced()
    with tinyacp.Client(tinyacp.Options(command=DEMO, observer=observer)) as client:
        client.initialize(timeout=30)
        with pytest.raises(tinyacp.RequestError):
            client.authenticate("demo-api-key", timeout=30)  # no key: the demo answers with an error
    span = named(exporter.get_finished_spans(), "authenticate")[0]
    assert span.attributes is not None
    assert span.attributes["error.type"] in ("RequestError", "AuthRequired")
    assert isinstance(span.attributes["rpc.jsonrpc.error_code"], int)


class Recorded:
    """A sink that keeps what the model asked for."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[str, str | None, dict[str, Any]]] = {}
        self.events: dict[str, list[str]] = {}
        self.ended: dict[str, tuple[dict[str, Any], tuple[str, str] | None]] = {}

    def start(self, key: str, name: str, parent: str | None, ts: int, attributes: Any, *, client: bool) -> None:
        self.started[key] = (name, parent, dict(attributes))

    def event(self, key: str, name: str, ts: int, attributes: Any) -> None:
        self.events.setdefault(key, []).append(name)

    def end(self, key: str, ts: int, attributes: Any, error: tuple[str, str] | None) -> None:
        self.ended[key] = (dict(attributes), error)


def test_events_are_bounded_then_counted_and_values_are_cut() -> None:
    sink = Recorded()
    model = SpanModel(sink)
    model.begin(1, {})
    model.sent(2, {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    for n in range(MAX_EVENTS + 500):
        model.update(3, "s", "notice", {"sessionUpdate": "notice", "severity": "warning", "title": f"n{n}"})
    title = "x" * (MAX_ATTRIBUTE_LENGTH * 3)
    model.update(4, "s", "tool_call", {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": title})
    model.received(5, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    model.finish(6, {})
    turn = next(key for key, (name, _, _) in sink.started.items() if name == "invoke_agent agent")
    assert len(sink.events[turn]) == MAX_EVENTS
    assert sink.ended[turn][0]["tinyacp.events.dropped"] == 500
    tool = next(key for key, (name, _, _) in sink.started.items() if name.startswith("execute_tool"))
    name, parent_key, attributes = sink.started[tool]
    assert parent_key == turn
    assert len(attributes["gen_ai.tool.name"]) == MAX_ATTRIBUTE_LENGTH
    assert attributes["gen_ai.tool.name"].endswith("…")
    assert len(name) <= 128
    assert sink.ended[tool] == ({"tinyacp.tool.status": "unfinished"}, None)
    assert set(sink.ended) == set(sink.started)


def test_a_request_never_answered_ends_as_unanswered() -> None:
    sink = Recorded()
    model = SpanModel(sink)
    model.begin(1, {})
    model.sent(2, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    model.finish(3, {})
    request = next(key for key, (name, _, _) in sink.started.items() if name == "initialize")
    assert sink.ended[request][1] is not None
    assert sink.ended[request][0]["error.type"] == "Unanswered"
    assert sink.ended["process"][1] is None
