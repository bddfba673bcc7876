"""Runs as traces in a real backend: Arize Phoenix started on loopback (tests/helpers/traces.py), read back through
its REST API. The spans' names, parentage and attributes follow the GenAI semantic conventions; no secret and, by
default, no prompt text is stored."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import pid_alive
from helpers.cli import Cli
from helpers.traces import Phoenix, by_name, new_project, parent_of, stored_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # Phoenix takes 20 s or more to start under load

PROMPT = "What is in this directory? zebra-quartz-prompt"
SECRET = "sk-never-stored-7f3a9c"


def new_caller() -> tinyacp.TraceContext:
    """A caller's trace of its own: Phoenix files a trace under the project that first received it, so two tests
    never share one."""
    return tinyacp.TraceContext(f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01")


def provider(phoenix: Phoenix, project: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    made = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    made.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.traces_endpoint, timeout=10)))
    return made


def demo_run(phoenix: Phoenix, project: str, **tracing: Any) -> tinyacp.PromptResult:
    """One turn of the demo agent (a read it is allowed, a login with a secret key), traced into ``project``."""
    from tinyacp.otel import TracingObserver

    made = provider(phoenix, project)
    traced = TracingObserver(tinyacp.BaseObserver(), tracer_provider=made, **tracing)
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"], observer=traced, policy=tinyacp.PermissionPolicy(kinds=["read"])
    )
    with tinyacp.Client(options) as client:
        pid = client.pid
        client.initialize(timeout=60)
        client.authenticate("demo-api-key", meta={"api-key": tinyacp.Secret(SECRET)}, timeout=60)
        session = client.new_session(".", timeout=60)
        result = client.prompt(session.id, PROMPT, timeout=60)
    assert not pid_alive(pid)
    made.shutdown()
    return result


def test_a_run_is_one_trace_of_genai_spans(phoenix: Phoenix) -> None:
    project = new_project()
    result = demo_run(phoenix, project)
    spans = phoenix.wait_spans(project, lambda found: any(s["name"] == "agent process" for s in found))
    named = by_name(spans)
    assert set(named) >= {"agent process", "initialize", "authenticate", "session/new", "invoke_agent tinyacp-demo"}
    process = named["agent process"]
    assert process["parent_id"] is None
    assert len({span["context"]["trace_id"] for span in spans}) == 1
    for name in ("initialize", "authenticate", "session/new", "invoke_agent tinyacp-demo"):
        assert parent_of(named[name], spans) is process, name
    turn = named["invoke_agent tinyacp-demo"]
    assert turn["span_kind"] == "AGENT"  # Phoenix reads the GenAI conventions' operation as its own span kind
    attributes = turn["attributes"]
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "tinyacp-demo"
    assert attributes["gen_ai.conversation.id"] == result.session_id
    assert attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert result.usage is not None
    assert attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert attributes["tinyacp.cost.currency"] == "USD"
    tools = [span for span in spans if span["name"].startswith("execute_tool ")]
    assert tools
    for tool in tools:
        assert parent_of(tool, spans) is turn
        assert tool["span_kind"] == "TOOL", tool
        assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
        assert tool["attributes"]["gen_ai.tool.call.id"]
        assert tool["attributes"]["tinyacp.tool.kind"] == "read"
        assert tool["attributes"]["tinyacp.tool.status"] == "completed"
    decisions = [event for tool in tools for event in tool["events"] if event["name"] == "permission"]
    assert decisions
    assert decisions[0]["attributes"]["tinyacp.permission.decided_by"] == "policy"
    assert decisions[0]["attributes"]["tinyacp.permission.option_kind"] == "allow_once"
    assert process["attributes"]["process.exit.code"] in (0, -15)
    # The context reached the agent both ways: the turn's span in the prompt's _meta, the process's in its env.
    trace_id = process["context"]["trace_id"]
    assert f"Joined trace {trace_id} (from _meta, parent span {turn['context']['span_id']})" in result.text
    assert f"Started in trace {trace_id} (from TRACEPARENT, parent span {process['context']['span_id']})" in result.text
    stored = stored_text(spans)
    assert SECRET not in stored
    assert "zebra-quartz-prompt" not in stored
    assert result.text[:40] not in stored


def test_content_is_captured_only_when_asked_and_never_a_secret(phoenix: Phoenix) -> None:
    project = new_project()
    result = demo_run(phoenix, project, capture_content=True)
    spans = phoenix.wait_spans(project, lambda found: any(s["name"] == "agent process" for s in found))
    turn = by_name(spans)["invoke_agent tinyacp-demo"]
    assert "zebra-quartz-prompt" in turn["attributes"]["gen_ai.input.messages"]
    assert result.text[:40] in turn["attributes"]["gen_ai.output.messages"]
    assert SECRET not in stored_text(spans)


def test_the_process_joins_the_callers_trace(phoenix: Phoenix) -> None:
    project = new_project()
    caller = new_caller()
    demo_run(phoenix, project, parent=caller)
    spans = phoenix.wait_spans(project, lambda found: any(s["name"] == "agent process" for s in found))
    process = by_name(spans)["agent process"]
    assert process["context"]["trace_id"] == caller.trace_id
    assert process["parent_id"] == caller.span_id
    assert {span["context"]["trace_id"] for span in spans} == {caller.trace_id}


def journal_run(path: Path) -> tinyacp.PromptResult:
    """One demo turn recorded in a journal, with no tracing at all."""
    journal = tinyacp.JsonlJournal(path)
    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"],
        epoch=journal.begin_epoch(),
        observer=journal,
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
    )
    with journal, tinyacp.Client(options) as client:
        client.initialize(timeout=60)
        session = client.new_session(".", timeout=60)
        return client.prompt(session.id, PROMPT, timeout=60)


def test_an_exported_journal_gives_the_same_spans_every_time(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tinyacp.otel import export_journal

    path = tmp_path / "run.jsonl"
    journal_run(path)
    seen = []
    for _ in range(2):
        exporter = InMemorySpanExporter()
        trace_id = export_journal(path, exporter)
        spans = exporter.get_finished_spans()
        seen.append(
            (trace_id, sorted((s.name, s.context.span_id, s.parent and s.parent.span_id, s.start_time) for s in spans))
        )
    assert seen[0] == seen[1]
    assert len(seen[0][1]) >= 5


def test_an_exported_journal_is_the_runs_spans_at_the_recorded_times(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tinyacp.otel import export_journal

    project = new_project()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    path = tmp_path / "run.jsonl"
    result = journal_run(path)
    trace_id = export_journal(path, OTLPSpanExporter(endpoint=phoenix.traces_endpoint, timeout=10))
    spans = phoenix.wait_spans(project, lambda found: any(s["name"] == "journal run.jsonl" for s in found))
    named = by_name(spans)
    assert {span["context"]["trace_id"] for span in spans} == {trace_id}
    assert parent_of(named["agent process"], spans) is named["journal run.jsonl"]
    turn = named["invoke_agent tinyacp-demo"]
    assert parent_of(turn, spans) is named["agent process"]
    assert turn["attributes"]["gen_ai.conversation.id"] == result.session_id
    records = tinyacp.JsonlJournal.read(path)
    prompt = next(r for r in records if r.get("method") == "session/prompt" and r.get("dir") == "out")
    assert turn["start_time"].startswith(prompt["ts"][:19])
    assert "zebra-quartz-prompt" not in stored_text(spans)


def batch_spans(phoenix: Phoenix, project: str, out: Path, turns: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """The batch's spans once every turn's process span arrived, and its records."""
    from tinyacp.batch import read_results

    records = list(read_results(out / "results.jsonl"))
    assert len(records) == turns
    spans = phoenix.wait_spans(
        project,
        lambda found: (
            sum(s["name"] == "agent process" for s in found) == turns
            and any(s["name"].startswith("batch ") for s in found)
        ),
        timeout=90,
    )
    return spans, records


def check_batch_trace(spans: list[dict[str, Any]], records: list[Any], out: Path) -> None:
    """One trace: ``batch {name}``, a ``turn {id}`` per record, each over its agent's process and turn."""
    root = by_name(spans)[f"batch {out.name}"]
    assert root["parent_id"] is None
    trace_id = root["context"]["trace_id"]
    assert {span["context"]["trace_id"] for span in spans} == {trace_id}
    assert {record.trace_id for record in records} == {trace_id}
    for record in records:
        turn = by_name(spans)[f"turn {record.id}"]
        assert parent_of(turn, spans) is root
        assert turn["attributes"]["tinyacp.item.id"] == str(record.id)
        process = next(s for s in spans if s["name"] == "agent process" and parent_of(s, spans) is turn)
        invoke = next(s for s in spans if s["name"] == "invoke_agent tinyacp-demo" and parent_of(s, spans) is process)
        assert invoke["attributes"]["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert "zebra-quartz-prompt" not in stored_text(spans)


def test_a_local_batch_is_one_trace(phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyacp.batch import run_batch
    from tinyacp.otel import TraceExport

    project = new_project()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    out = tmp_path / "local-batch"
    items = [{"id": f"item-{n}", "prompt": f"{PROMPT} {n}"} for n in range(3)]
    summary = run_batch(items, out, agent="demo", concurrency=2, trace=TraceExport(endpoint=phoenix.url), timeout=60)
    assert summary.all_ok
    spans, records = batch_spans(phoenix, project, out, 3)
    check_batch_trace(spans, records, out)


def test_a_ray_batch_is_one_trace(phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("TINYACP_REQUIRE_RAY") != "1":  # CI sets it: there a missing Ray is a failure, not a skip
        pytest.importorskip("ray", reason='the Ray engine needs the ray extra: pip install -e ".[test,ray]"')
    from tinyacp.batch import run_batch
    from tinyacp.otel import TraceExport

    project = new_project()
    # The workers of the cluster the batch starts inherit this environment: their spans go to the same project.
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    short = Path(tempfile.mkdtemp(prefix="tinyacp-ray-"))  # Ray's socket paths may not pass 107 bytes
    monkeypatch.setenv("RAY_TMPDIR", str(short))
    out = tmp_path / "ray-batch"
    items = [{"id": f"item-{n}", "prompt": f"{PROMPT} {n}"} for n in range(3)]
    # ray.init, in the local cluster the engine starts for the batch, sets a SIGTERM handler it leaves behind.
    handler = signal.getsignal(signal.SIGTERM)
    try:
        summary = run_batch(
            items, out, agent="demo", engine="ray", concurrency=2, trace=TraceExport(endpoint=phoenix.url), timeout=60
        )
    finally:
        signal.signal(signal.SIGTERM, handler)
        shutil.rmtree(short, ignore_errors=True)
    assert summary.all_ok
    spans, records = batch_spans(phoenix, project, out, 3)
    assert all(record.node for record in records)
    check_batch_trace(spans, records, out)


def test_the_command_joins_the_traceparent_it_was_started_with(phoenix: Phoenix, cli: Cli, tmp_path: Path) -> None:
    project = new_project()
    journal = tmp_path / "run.jsonl"
    caller = new_caller()
    env = {**cli.env, **phoenix.project_env(project), "TRACEPARENT": caller.traceparent}
    done = cli.run("prompt", "--yes", "--journal", str(journal), PROMPT, env=env)
    assert done.returncode == 0, done.stderr.decode()
    spans = phoenix.wait_spans(project, lambda found: any(s["name"] == "tinyacp prompt" for s in found))
    named = by_name(spans)
    run = named["tinyacp prompt"]
    assert run["context"]["trace_id"] == caller.trace_id
    assert run["parent_id"] == caller.span_id
    assert parent_of(named["agent process"], spans) is run
    assert parent_of(named["invoke_agent tinyacp-demo"], spans) is named["agent process"]
    assert run["attributes"]["process.exit.code"] == 0
    reply = done.stdout.decode()
    process, turn = named["agent process"], named["invoke_agent tinyacp-demo"]
    assert f"Joined trace {caller.trace_id} (from _meta, parent span {turn['context']['span_id']})" in reply
    assert (
        f"Started in trace {caller.trace_id} (from TRACEPARENT, parent span {process['context']['span_id']})" in reply
    )
    first = tinyacp.JsonlJournal.read(journal)[0]
    assert first["type"] == "epoch"
    assert first["trace_id"] == caller.trace_id
    assert "zebra-quartz-prompt" not in stored_text(spans)


def test_the_command_exports_to_the_endpoint_flag_and_a_batch_is_one_trace(
    phoenix: Phoenix, cli: Cli, tmp_path: Path
) -> None:
    project = new_project()
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": n, "prompt": f"{PROMPT} {n}"}) + "\n" for n in range(2)))
    out = tmp_path / "cli-batch"
    env = {**cli.env, "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}"}
    done = cli.run("batch", str(items), "--out", str(out), "--agent", "demo", "--otel-endpoint", phoenix.url, env=env)
    assert done.returncode == 0, done.stderr.decode()
    spans, records = batch_spans(phoenix, project, out, 2)
    check_batch_trace(spans, records, out)


def test_a_backend_that_is_down_costs_one_warning_and_never_fails_the_run(cli: Cli, tmp_path: Path) -> None:
    journal = tmp_path / "run.jsonl"
    env = {**cli.env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    done = cli.run("prompt", "--yes", "--journal", str(journal), "hello", env=env)
    assert done.returncode == 0, done.stderr.decode()
    trace_id = tinyacp.JsonlJournal.read(journal)[0]["trace_id"]
    assert done.stdout.decode().startswith(f"You said: hello\nJoined trace {trace_id} (from _meta")
    warnings = [line for line in done.stderr.decode().splitlines() if "spans could not be sent" in line]
    assert len(warnings) == 1, done.stderr.decode()
    assert len(trace_id) == 32


def test_export_of_a_batch_directory_sends_its_spans_and_says_the_trace(
    phoenix: Phoenix, cli: Cli, tmp_path: Path
) -> None:
    from tinyacp.batch import run_batch

    project = new_project()
    out = tmp_path / "old-batch"
    items = [{"id": f"old-{n}", "prompt": f"{PROMPT} {n}"} for n in range(2)]
    assert run_batch(items, out, agent="demo", timeout=60).all_ok  # no tracing then
    env = {**cli.env, "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}"}
    done = cli.run("export", str(out), "--otlp", phoenix.url, env=env)
    assert done.returncode == 0, done.stderr.decode()
    trace_id = done.stdout.decode().split()[1].rstrip(":")
    spans = phoenix.wait_spans(project, lambda found: sum(s["name"] == "agent process" for s in found) == 2)
    assert {span["context"]["trace_id"] for span in spans} == {trace_id}
    root = by_name(spans)[f"batch {out.name}"]
    for n in range(2):
        turn = by_name(spans)[f"turn old-{n}"]
        assert parent_of(turn, spans) is root
        process = next(s for s in spans if s["name"] == "agent process" and parent_of(s, spans) is turn)
        assert any(s["name"] == "invoke_agent tinyacp-demo" and parent_of(s, spans) is process for s in spans)
    assert "zebra-quartz-prompt" not in stored_text(spans)


def test_export_refuses_what_is_no_journal_and_a_backend_that_is_down(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("export", str(tmp_path / "missing.jsonl"), "--otlp", "http://127.0.0.1:4318")
    assert done.returncode == 2
    assert b"no such journal" in done.stderr
    done = cli.run("export", str(tmp_path), "--otlp", "http://127.0.0.1:4318")
    assert done.returncode == 2
    assert b"without results.jsonl" in done.stderr
    done = cli.run("export", str(tmp_path), "--otlp", "ftp://x")
    assert done.returncode == 2
    journal = tmp_path / "run.jsonl"
    journal_run(journal)
    done = cli.run("export", str(journal), "--otlp", f"http://127.0.0.1:{closed_port()}")
    assert done.returncode == 1
    assert b"did not take" in done.stderr
    assert b"Traceback" not in done.stderr


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_batch_trace_reads_as_a_tree_in_the_backends_page(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page docs/traces.md shows: Phoenix's own view of a batch's trace, in headless Chromium. With
    ``TINYACP_TRACE_SCREENSHOT=PATH`` the screenshot is also written to PATH (how docs/img/trace-batch.png is made)."""
    from tinyacp.batch import run_batch
    from tinyacp.otel import TraceExport

    executable = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        if os.environ.get("TINYACP_REQUIRE_BROWSER") == "1":
            pytest.fail("the screenshot of a trace needs Chromium and Playwright (TINYACP_REQUIRE_BROWSER=1)")
        pytest.skip("the screenshot of a trace needs Chromium and Playwright")
    from benchmarks.view import CHROMIUM_ARGS

    project = new_project()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    out = tmp_path / "nightly-review"
    items = [{"id": f"review-{n}", "prompt": f"Review part {n} of this directory"} for n in range(2)]
    policy = tinyacp.PermissionPolicy(kinds=["read"])
    assert run_batch(
        items, out, agent="demo", policy=policy, trace=TraceExport(endpoint=phoenix.url), timeout=60
    ).all_ok
    _, records = batch_spans(phoenix, project, out, 2)
    project_id = next(p["id"] for p in phoenix.projects() if p["name"] == project)
    url = f"{phoenix.url}/projects/{project_id}/traces/{records[0].trace_id}"
    shot = tmp_path / "trace-batch.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url, timeout=60_000)
            for name in ("batch nightly-review", "turn review-0", "turn review-1"):
                page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
            page.get_by_text("execute_tool", exact=False).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    wanted = os.environ.get("TINYACP_TRACE_SCREENSHOT")
    if wanted:
        shutil.copyfile(shot, wanted)
