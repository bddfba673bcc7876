"""What tracing costs per update: ``python -m benchmarks.tracing [--baseline REF]``.

Instructions, not seconds: each row runs one client through a flood of ``agent_message_chunk`` updates from the
flood agent (:mod:`benchmarks.flood_agent`) under valgrind's callgrind, which counts the instructions of the
client's process only (the agent is a child it does not follow). Two flood sizes are run and the difference in
instructions divided by the difference in updates is the cost of one update, start-up and imports cancelled out.

Rows:

* ``off``: this tree, a no-op observer, no tracing: what every client pays;
* ``baseline``: the same on the tree of ``--baseline REF`` (a git ref, extracted to a temporary directory and put
  first on ``sys.path``): the same figure before tracing existed;
* ``on``: a :class:`~tinyacp.otel.TracingObserver` around the no-op observer, with OpenTelemetry's SDK and a
  batch processor whose exporter drops the spans (what making the spans costs, without a network);
* ``on-tools``: the same with a flood of tool calls (a ``tool_call`` and a ``tool_call_update`` each, so a span
  each), per update.

The output is a Markdown table. ``--quick`` runs tiny floods without valgrind, to check that it runs. Nothing here
asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FLOOD_AGENT = HERE / "flood_agent.py"
SIZES = (2_000, 12_000)
TIMEOUT = 1800.0


def run_row(row: str, updates: int) -> None:
    """One client, one prompt answered with ``updates`` updates (this process is the one measured)."""
    import tinyacp

    observer: Any = tinyacp.BaseObserver()
    provider = None
    if row.startswith("on"):
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        from tinyacp.otel import TracingObserver

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        observer = TracingObserver(observer, tracer_provider=provider)
    command = [sys.executable, str(FLOOD_AGENT), "--updates", str(updates)]
    if row == "on-tools":
        command = [sys.executable, str(HERE / "tracing.py"), "--tool-agent", str(updates)]
    options = tinyacp.Options(command=command, observer=observer)
    with tinyacp.Client(options) as client:
        client.initialize(timeout=600)
        session = client.new_session(".", timeout=600)
        client.prompt(session.id, "flood", timeout=TIMEOUT)
    if provider is not None:
        provider.shutdown()


def tool_agent(updates: int) -> None:
    """An agent answering a prompt with ``updates // 2`` tool calls, each announced and completed."""

    def send(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")

    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": "tools"}})
        elif method == "session/prompt":
            for n in range(updates // 2):
                call = {"sessionUpdate": "tool_call", "toolCallId": f"c{n}", "title": "Read", "kind": "read"}
                done = {"sessionUpdate": "tool_call_update", "toolCallId": f"c{n}", "status": "completed"}
                for update in (call, done):
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/update",
                            "params": {"sessionId": "tools", "update": update},
                        }
                    )
            send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})
        sys.stdout.flush()


def instructions(row: str, updates: int, pythonpath: str | None, scratch: Path, valgrind: bool) -> int:
    """The instructions the row's process ran (0 without valgrind)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    argv = [sys.executable, "-m", "benchmarks.tracing", "--row", "off" if row == "baseline" else row, str(updates)]
    if not valgrind:
        subprocess.run(argv, cwd=ROOT, env=env, check=True, timeout=TIMEOUT)
        return 0
    out = scratch / f"{row}-{updates}.callgrind"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=TIMEOUT,
        capture_output=True,
    )
    found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no total in {out}")
    return int(found.group(1))


def baseline_tree(ref: str, scratch: Path) -> str:
    """``ref``'s ``src/`` extracted under ``scratch``: the path to put first on ``sys.path``."""
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
    return str(scratch / "src")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=None, help="a git ref to compare with (default: none)")
    parser.add_argument("--quick", action="store_true", help="tiny floods without valgrind: does it run?")
    parser.add_argument("--row", nargs=2, metavar=("ROW", "UPDATES"), help=argparse.SUPPRESS)
    parser.add_argument("--tool-agent", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tool_agent is not None:
        tool_agent(args.tool_agent)
        return
    if args.row is not None:
        run_row(args.row[0], int(args.row[1]))
        return
    valgrind = not args.quick and shutil.which("valgrind") is not None
    sizes = (20, 40) if args.quick else SIZES
    rows = ["off", "on", "on-tools"] + (["baseline"] if args.baseline else [])
    per_update: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tinyacp-tracing-bench-") as name:
        scratch = Path(name)
        pythonpath = baseline_tree(args.baseline, scratch) if args.baseline else None
        for row in rows:
            counts = [
                instructions(row, size, pythonpath if row == "baseline" else None, scratch, valgrind) for size in sizes
            ]
            per_update[row] = (counts[1] - counts[0]) / (sizes[1] - sizes[0])
    print(f"| row | instructions per update ({sizes[0]:,} and {sizes[1]:,} updates) | vs off |")
    print("|---|---:|---:|")
    for row in rows:
        ratio = per_update[row] / per_update["off"] if per_update["off"] else 0.0
        print(f"| {row} | {per_update[row]:,.0f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
