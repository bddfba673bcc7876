"""What the tests of ``tinyacp view`` look at: a real batch of the demo agent (turns ok, rejected, failed and past
their timeout), a journal of a real run carrying hostile text, and crafted lines of the kinds the demo does not send
(a notice, a tool call with a name and a diff, an update kind from the future)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import tinyacp
from tinyacp.batch import run_batch

HOSTILE = (
    '<script>window.__pwned=1</script></script><img src=x onerror="window.__pwned=2">'
    "<!-- javascript:window.__pwned=3 --> \u202eevil\u202c \u2028 \x1b[31mred\x1b[0m &amp; \x00"
)
"""Text an agent or a file may carry: markup, a script, a link, bidi overrides, a line separator, controls."""

HOSTILE_FILE = '<img src=x onerror="window.__pwned=4">.txt'
"""A file name in the directory the demo lists (its tool call's content)."""

CRASH = "import sys; sys.stderr.write('the agent fell over: <b>bold</b>\\n'); sys.exit(3)"

ALLOWED: list[dict[str, Any]] = [
    {"id": "read-1", "prompt": "What is in this folder?"},
    {"id": "read-2", "prompt": "with-notice with-compaction What is in this folder, again?"},
]
REJECTED: list[dict[str, Any]] = [{"id": "rejected-1", "prompt": "Read the folder, if you may"}]
FAILED: list[dict[str, Any]] = [
    {"id": "crash-1", "prompt": "hello", "agent": [sys.executable, "-c", CRASH]},
    {"id": "slow-1", "prompt": "wait for it", "agent": "demo --delay 2", "timeout": 0.5},
]


def demo_batch(out: Path, work: Path) -> Path:
    """A batch of the demo agent in ``out``: two turns whose read was allowed (the second with a notice and a
    compaction), one rejected (by the default policy), one whose agent crashed and one past its timeout. Returns
    ``out``."""
    work.mkdir(exist_ok=True)
    (work / "notes.txt").write_text("some notes\n", encoding="utf-8")
    run_batch(ALLOWED, out, agent="demo", cwd=work, policy=tinyacp.PermissionPolicy(["read"]), timeout=60)
    run_batch(REJECTED + FAILED, out, agent="demo", cwd=work, timeout=60, concurrency=3)
    return out


def update(journal: tinyacp.JsonlJournal, epoch: int, seq: int, update: dict[str, Any]) -> None:
    """Record a ``session/update`` line carrying ``update``, as the client would."""
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
    raw = json.dumps(message, separators=(",", ":")).encode()
    payload = tinyacp.UnknownUpdate(None, {})
    journal.on_update(tinyacp.Update(epoch, seq, raw, tinyacp.UpdateKind.UNKNOWN, "s", payload))


def _out(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any]) -> None:
    raw = json.dumps(message, separators=(",", ":")).encode()
    journal.on_send(tinyacp.OutgoingMessage(epoch, raw, message.get("method"), message.get("id")))


def _in(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any], method: str) -> None:
    raw = json.dumps(message, separators=(",", ":")).encode()
    kind = tinyacp.MessageKind.RESPONSE
    journal.on_message(tinyacp.AgentMessage(epoch, raw, kind, method=method, id=message.get("id")))


def crafted_epoch(journal: tinyacp.JsonlJournal) -> int:
    """An epoch with what the demo agent does not send: a notice, a tool call with a ``name`` and a diff, an update
    kind no version knows, hostile text in each; the prompt is answered ``end_turn``."""
    epoch = journal.begin_epoch()
    prompt = {"type": "text", "text": "crafted: " + HOSTILE}
    _out(journal, epoch, {"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"prompt": [prompt]}})
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": "Model fallback " + HOSTILE}
    update(journal, epoch, 1, {**notice, "description": "javascript:alert(1) " + HOSTILE})
    diff = {"type": "diff", "path": "javascript:alert(1)", "oldText": "a\nold line\nz", "newText": "a\nnew line\nz"}
    tool = {"sessionUpdate": "tool_call", "toolCallId": "edit_1", "name": "edit_file", "kind": "edit"}
    update(journal, epoch, 2, {**tool, "title": "Edit " + HOSTILE, "status": "completed", "content": [diff]})
    update(journal, epoch, 3, {"sessionUpdate": "hologram_update", "beam": HOSTILE})
    chunk = {"type": "text", "text": "crafted reply " + HOSTILE}
    update(journal, epoch, 4, {"sessionUpdate": "agent_message_chunk", "content": chunk})
    _in(journal, epoch, {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}, "session/prompt")
    journal.flush()
    return epoch


def hostile_journal(path: Path, work: Path) -> Path:
    """A journal of a real run of the demo agent whose prompt and directory carry hostile text (its read is
    allowed, so the directory's listing is in the tool call), then a crafted epoch (see :func:`crafted_epoch`)."""
    work.mkdir(exist_ok=True)
    (work / HOSTILE_FILE).write_text("x", encoding="utf-8")
    journal = tinyacp.JsonlJournal(path)
    try:
        options = tinyacp.Options(
            command=[sys.executable, "-m", "tinyacp.demo"],
            epoch=journal.begin_epoch(),
            observer=journal,
            policy=tinyacp.PermissionPolicy(["read"]),
        )
        with tinyacp.Client(options) as client:
            client.initialize(timeout=30)
            session = client.new_session(work, timeout=30)
            client.prompt(session.id, HOSTILE, timeout=30)
        crafted_epoch(journal)
    finally:
        journal.close()
    return path


def page_data(page: str) -> dict[str, Any]:
    """The page's data document (its turns, overview and notes)."""
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.DOTALL)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def transcript(page: str, index: int) -> dict[str, Any]:
    """The transcript of the page's turn ``index``."""
    found = re.search(rf'<script type="application/json" id="tx-{index}">(.*?)</script>', page, re.DOTALL)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data
