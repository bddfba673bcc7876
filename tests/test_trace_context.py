"""The caller's trace reaches the agent: W3C ``traceparent``/``tracestate``/``baggage`` as root keys of every
request's ``_meta`` (ACP's meta propagation convention) and ``TRACEPARENT``/``TRACESTATE``/``BAGGAGE`` in the
agent's environment (OpenTelemetry's environment carriers), from ``Options(trace_context=...)`` or the caller's
active span; the caller's own keys win."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import msgspec
import pytest

import tinyacp
from helpers import AGENTS, Recorder, pid_alive
from tinyacp._trace_context import agent_env, merged_meta

REPORT_AGENT = AGENTS / "report_agent.py"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-11111111111111111111111111111111-2222222222222222-00"
CONTEXT = tinyacp.TraceContext(PARENT, "congo=t61rcWkgMzE", "userId=alice")


def run_report(
    trace_context: tinyacp.TraceContext | None = None,
    env: dict[str, str] | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Run the report agent through one turn: the messages we sent (decoded) and the agent's environment."""
    recorder = Recorder()
    options = tinyacp.Options(
        command=[sys.executable, str(REPORT_AGENT)], observer=recorder, trace_context=trace_context, env=env
    )
    with tinyacp.Client(options) as client:
        pid = client.pid
        client.initialize(timeout=30)
        session = client.new_session(".", timeout=30)
        result = client.prompt(session.id, "hi", meta=meta, timeout=30)
    assert not pid_alive(pid)
    sent = [msgspec.json.decode(message.raw) for message in recorder.of("send")]
    return sent, json.loads(result.text)["env"]


def test_every_request_carries_the_explicit_context_in_meta_and_the_agent_env() -> None:
    sent, env = run_report(CONTEXT)
    requests = [message for message in sent if "method" in message and "id" in message]
    assert [message["method"] for message in requests] == ["initialize", "session/new", "session/prompt"]
    for message in requests:
        assert message["params"]["_meta"] == {
            "traceparent": PARENT,
            "tracestate": "congo=t61rcWkgMzE",
            "baggage": "userId=alice",
        }
    assert (env["TRACEPARENT"], env["TRACESTATE"], env["BAGGAGE"]) == (PARENT, "congo=t61rcWkgMzE", "userId=alice")


def test_without_a_context_nothing_is_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEPARENT", raising=False)
    sent, env = run_report(None)
    assert all("_meta" not in message.get("params", {}) for message in sent)
    assert "TRACEPARENT" not in env


def test_the_callers_meta_is_merged_and_its_own_traceparent_wins() -> None:
    sent, _ = run_report(CONTEXT, meta={"traceparent": OTHER, "mine": 1})
    prompt = next(message for message in sent if message.get("method") == "session/prompt")
    # The caller's trace is sent whole: none of ours rides with it.
    assert prompt["params"]["_meta"] == {"traceparent": OTHER, "mine": 1}
    sent, _ = run_report(CONTEXT, meta={"baggage": "mine=1", "x": True})
    prompt = next(message for message in sent if message.get("method") == "session/prompt")
    assert prompt["params"]["_meta"] == {
        "traceparent": PARENT,
        "tracestate": "congo=t61rcWkgMzE",
        "baggage": "mine=1",
        "x": True,
    }


def test_the_callers_env_keeps_its_own_traceparent() -> None:
    base = {"PATH": os.environ.get("PATH", "/usr/bin"), "TRACEPARENT": OTHER}
    _, env = run_report(CONTEXT, env=base)
    assert env["TRACEPARENT"] == OTHER
    assert "TRACESTATE" not in env
    _, env = run_report(CONTEXT, env={"PATH": base["PATH"]})
    assert env["TRACEPARENT"] == PARENT


def test_an_inherited_traceparent_is_replaced_by_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEPARENT", OTHER)
    monkeypatch.setenv("TRACESTATE", "old=1")
    _, env = run_report(tinyacp.TraceContext(PARENT))
    assert env["TRACEPARENT"] == PARENT
    assert "TRACESTATE" not in env


def test_the_callers_active_span_is_sent_when_opentelemetry_is_loaded() -> None:
    code = f"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
import tinyacp
sys.path.insert(0, {str(AGENTS.parent)!r})
from helpers import Recorder
tracer = TracerProvider().get_tracer("t")
recorder = Recorder()
options = tinyacp.Options(command=[sys.executable, {str(REPORT_AGENT)!r}], observer=recorder)
with tracer.start_as_current_span("caller") as span:
    with tinyacp.Client(options) as client:
        client.initialize(timeout=30)
        session = client.new_session(".", timeout=30)
        with tracer.start_as_current_span("one call") as inner:
            result = client.prompt(session.id, "hi", timeout=30)
sent = [json.loads(m.raw) for m in recorder.of("send")]
print(json.dumps({{"outer": format(span.get_span_context().span_id, "016x"),
    "inner": format(inner.get_span_context().span_id, "016x"),
    "metas": {{m["method"]: m["params"].get("_meta") for m in sent if "id" in m and "method" in m}},
    "env": json.loads(result.text)["env"].get("TRACEPARENT")}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    assert found["metas"]["initialize"]["traceparent"].split("-")[2] == found["outer"]
    assert found["metas"]["session/prompt"]["traceparent"].split("-")[2] == found["inner"]
    assert found["env"].split("-")[2] == found["outer"]


@pytest.mark.parametrize(
    "value",
    [
        "",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ],
)
def test_an_invalid_traceparent_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="traceparent"):
        tinyacp.TraceContext(value)


def test_a_context_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="trace_context"):
        tinyacp.Options(command=["x"], trace_context=PARENT)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="baggage"):
        tinyacp.TraceContext(PARENT, baggage="a=1\nb=2")


def test_a_carrier_gives_its_context_and_ignores_an_invalid_one() -> None:
    assert tinyacp.TraceContext.from_env({"TRACEPARENT": PARENT, "BAGGAGE": "k=v"}) == tinyacp.TraceContext(
        PARENT, None, "k=v"
    )
    assert tinyacp.TraceContext.from_env({"TRACEPARENT": "nonsense"}) is None
    assert tinyacp.TraceContext.from_carrier({"traceparent": PARENT, "tracestate": 3}) == tinyacp.TraceContext(PARENT)
    assert CONTEXT.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert CONTEXT.span_id == "b7ad6b7169203331"


def test_merged_meta_rules() -> None:
    carrier = CONTEXT.carrier()
    assert merged_meta(None, carrier) == carrier
    assert merged_meta({"a": 1}, None) == {"a": 1}
    assert merged_meta({"a": 1, "tracestate": "x=y"}, carrier) == {**carrier, "a": 1, "tracestate": "x=y"}
    assert merged_meta({"traceparent": OTHER}, carrier) == {"traceparent": OTHER}
    assert merged_meta(["not", "a", "dict"], carrier) == ["not", "a", "dict"]


def test_agent_env_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    assert agent_env(None, None) is None
    assert agent_env({"A": "1"}, None) == {"A": "1"}
    assert agent_env({"A": "1"}, CONTEXT) == {
        "A": "1",
        "TRACEPARENT": PARENT,
        "TRACESTATE": "congo=t61rcWkgMzE",
        "BAGGAGE": "userId=alice",
    }
    assert agent_env({"BAGGAGE": "x=1"}, CONTEXT) == {"BAGGAGE": "x=1"}
    monkeypatch.setenv("BAGGAGE", "inherited=1")
    inherited = agent_env(None, tinyacp.TraceContext(PARENT))
    assert inherited is not None
    assert "BAGGAGE" not in inherited
    assert inherited["TRACEPARENT"] == PARENT


def test_the_demo_agent_says_which_trace_it_joined_both_ways(tmp_path: Any) -> None:
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"], observer=tinyacp.BaseObserver(), trace_context=CONTEXT
    )
    with tinyacp.Client(options) as client:
        client.initialize(timeout=30)
        session = client.new_session(str(tmp_path), timeout=30)
        result = client.prompt(session.id, "hi", timeout=30)
        # A call's own traceparent wins in _meta; the environment keeps the client's.
        other = client.prompt(session.id, "again", meta={"traceparent": OTHER}, timeout=30)
    trace_id, span_id = CONTEXT.trace_id, CONTEXT.span_id
    assert f"Joined trace {trace_id} (from _meta, parent span {span_id})\n" in result.text
    assert f"Started in trace {trace_id} (from TRACEPARENT, parent span {span_id})\n" in result.text
    assert "Joined trace 11111111111111111111111111111111 (from _meta, parent span 2222222222222222)" in other.text
    assert f"Started in trace {trace_id} (from TRACEPARENT" in other.text


def test_the_demo_agent_says_nothing_of_a_trace_it_did_not_get(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEPARENT", raising=False)
    options = tinyacp.Options(command=[sys.executable, "-m", "tinyacp.demo"], observer=tinyacp.BaseObserver())
    with tinyacp.Client(options) as client:
        client.initialize(timeout=30)
        session = client.new_session(str(tmp_path), timeout=30)
        result = client.prompt(session.id, "hi", meta={"traceparent": "not-a-traceparent"}, timeout=30)
    assert "trace" not in result.text.lower()
