"""An evaluation harness: one agent turn per prompt, several at once, each graded and journaled.

    python examples/eval_harness.py examples/eval_prompts.jsonl --out eval-out \\
        --agent-command "npx -y @agentclientprotocol/claude-agent-acp@0.101.0" --concurrency 4

Each line of the prompts file is a JSON object: ``id``, ``prompt``, and ``expect``, the strings a good reply
contains. Every turn runs in a fresh copy of the fixture directory (``--fixture``, default: the prompts file's
``fixture/`` folder, if any), in its own agent process, with its own journal (``OUT/journals/ID.jsonl``). The
results go to ``OUT/results.jsonl``, one record per prompt, and a summary is printed. Exit status 1 when any prompt
failed.

The agent may read, and nothing else (``--allow-kind`` to change that). For batches of thousands of turns, on one
machine or a cluster, with resumption after a crash, use ``tinyacp batch`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import tinyacp


@dataclass
class Graded:
    id: str
    ok: bool
    missing: list[str]
    stop_reason: str | None
    seconds: float
    error: str | None
    journal: str


def load(path: Path) -> list[dict[str, Any]]:
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = [item["id"] for item in items]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"{path}: the ids are not unique")
    return items


async def one_turn(item: dict[str, Any], args: argparse.Namespace, limit: asyncio.Semaphore) -> Graded:
    journal_path = args.out / "journals" / f"{item['id']}.jsonl"
    async with limit:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"eval-{item['id']}-") as scratch:
            workdir = Path(scratch) / "work"
            if args.fixture is not None:
                shutil.copytree(args.fixture, workdir)
            else:
                workdir.mkdir()
            with tinyacp.JsonlJournal(journal_path) as journal:
                options = tinyacp.Options(
                    command=shlex.split(args.agent_command),
                    cwd=workdir,
                    epoch=journal.begin_epoch(),
                    observer=journal,
                    policy=tinyacp.PermissionPolicy(kinds=args.allow_kind),
                    timeout=args.timeout,
                )
                try:
                    async with tinyacp.AsyncClient(options) as client:
                        await client.initialize()
                        session = await client.new_session(workdir)
                        result = await client.prompt(session.id, item["prompt"])
                except tinyacp.TinyAcpError as exc:
                    seconds = time.monotonic() - started
                    error = f"{type(exc).__name__}: {exc}"
                    return Graded(item["id"], False, list(item["expect"]), None, seconds, error, str(journal_path))
    missing = [text for text in item["expect"] if text not in result.text]
    ok = not missing and result.stop_reason == tinyacp.StopReason.END_TURN
    seconds = time.monotonic() - started
    return Graded(item["id"], ok, missing, str(result.stop_reason), seconds, None, str(journal_path))


async def run(items: list[dict[str, Any]], args: argparse.Namespace) -> list[Graded]:
    limit = asyncio.Semaphore(args.concurrency)
    (args.out / "journals").mkdir(parents=True, exist_ok=True)
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one_turn(item, args, limit)) for item in items]
    return [task.result() for task in tasks]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run and grade one agent turn per prompt.")
    parser.add_argument("prompts", type=Path)
    parser.add_argument("--out", type=Path, default=Path("eval-out"))
    parser.add_argument("--fixture", type=Path, default=None, help="the directory each turn starts from")
    parser.add_argument("--agent-command", default=f"{shlex.quote(sys.executable)} -m tinyacp.demo")
    parser.add_argument("--allow-kind", action="append", default=None, help="tool kinds allowed (default: read)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600.0, help="the deadline of each call, in seconds")
    args = parser.parse_args(argv)
    args.allow_kind = args.allow_kind if args.allow_kind is not None else ["read"]
    if args.fixture is None and (args.prompts.parent / "fixture").is_dir():
        args.fixture = args.prompts.parent / "fixture"

    graded = asyncio.run(run(load(args.prompts), args))
    with (args.out / "results.jsonl").open("w", encoding="utf-8") as results:
        for record in graded:
            results.write(json.dumps(asdict(record)) + "\n")
    for record in graded:
        verdict = "ok  " if record.ok else "FAIL"
        why = record.error or (f"missing {record.missing}" if record.missing else f"stop reason {record.stop_reason}")
        print(f"{verdict} {record.id:<20} {record.seconds:6.1f}s  {'' if record.ok else why}".rstrip())
    passed = sum(record.ok for record in graded)
    print(f"{passed}/{len(graded)} passed")
    return 0 if passed == len(graded) else 1


if __name__ == "__main__":
    sys.exit(main())
