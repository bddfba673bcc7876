"""What the tests of ``tinyacp view`` look at: a real batch of the demo agent (turns ok, rejected, failed and past
their timeout), a journal of a real run carrying hostile text, and crafted lines of the kinds the demo does not send
(a notice, a tool call with a name and a diff, an update kind from the future).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import msgspec

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


def update(
    journal: tinyacp.JsonlJournal, epoch: int, seq: int, update: dict[str, Any], *, session_id: str = "s"
) -> None:
    """Record a ``session/update`` line of ``session_id`` carrying ``update``, as the client would."""
    params = {"sessionId": session_id, "update": update}
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    raw = json.dumps(message, separators=(",", ":")).encode()
    payload = tinyacp.UnknownUpdate(None, {})
    journal.on_update(tinyacp.Update(epoch, seq, raw, tinyacp.UpdateKind.UNKNOWN, session_id, payload))


def sent(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any]) -> None:
    raw = json.dumps(message, separators=(",", ":")).encode()
    journal.on_send(tinyacp.OutgoingMessage(epoch, raw, message.get("method"), message.get("id")))


def received(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any], method: str | None) -> None:
    """Record a line of the agent's: our request's answer (``method``), or a request of its own (None)."""
    raw = json.dumps(message, separators=(",", ":")).encode()
    if method is None:
        kind, method = tinyacp.MessageKind.ELICITATION, message["method"]
    else:
        kind = tinyacp.MessageKind.RESPONSE
    journal.on_message(tinyacp.AgentMessage(epoch, raw, kind, method=method, id=message.get("id")))


def requested(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any]) -> None:
    """Record a request of the agent's that is neither a permission nor a question (``fs/*``, ``terminal/*``)."""
    raw = json.dumps(message, separators=(",", ":")).encode()
    kind = tinyacp.MessageKind.REQUEST
    journal.on_message(tinyacp.AgentMessage(epoch, raw, kind, method=message["method"], id=message["id"]))


def answered(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any], decided_by: str) -> None:
    """Record our answer to a request of the agent's, with who decided it."""
    raw = json.dumps(message, separators=(",", ":")).encode()
    journal.on_send(tinyacp.OutgoingMessage(epoch, raw, None, message["id"], decided_by=decided_by))


def serve_decided(journal: tinyacp.JsonlJournal, path: Path, epoch: int, fields: dict[str, Any]) -> None:
    """Add a ``serve_decision`` record to the journal at ``path`` (the client's decision on a file or terminal
    request, as it records it), after what the journal holds so far."""
    journal.flush()
    record = {"type": "serve_decision", "epoch": epoch, "ts": "2026-12-04T21:00:00.000000Z", **fields}
    with open(path, "ab") as file:
        file.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")


def asked(journal: tinyacp.JsonlJournal, epoch: int, message: dict[str, Any]) -> None:
    """Record the agent's ``session/request_permission`` line, as the client does (the request, not a decision)."""
    from tinyacp._messages import PermissionParams

    raw = json.dumps(message, separators=(",", ":")).encode()
    params = msgspec.convert(message["params"], PermissionParams)
    request = tinyacp.PermissionRequest(epoch, raw, message["id"], params.session_id, params.tool_call, params.options)
    journal.on_permission_request(request)


def prompt(journal: tinyacp.JsonlJournal, epoch: int, request_id: int, text: str, *, session_id: str) -> None:
    """Record our ``session/prompt`` of ``text`` to ``session_id``."""
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    sent(journal, epoch, {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params})


def crafted_epoch(journal: tinyacp.JsonlJournal) -> int:
    """An epoch with what the demo agent does not send: a notice, a tool call with a ``name`` and a diff, an update
    kind no version knows, hostile text in each; the prompt is answered ``end_turn``."""
    epoch = journal.begin_epoch()
    prompt = {"type": "text", "text": "crafted: " + HOSTILE}
    sent(journal, epoch, {"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"prompt": [prompt]}})
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": "Model fallback " + HOSTILE}
    update(journal, epoch, 1, {**notice, "description": "javascript:alert(1) " + HOSTILE})
    diff = {"type": "diff", "path": "javascript:alert(1)", "oldText": "a\nold line\nz", "newText": "a\nnew line\nz"}
    tool = {"sessionUpdate": "tool_call", "toolCallId": "edit_1", "name": "edit_file", "kind": "edit"}
    update(journal, epoch, 2, {**tool, "title": "Edit " + HOSTILE, "status": "completed", "content": [diff]})
    update(journal, epoch, 3, {"sessionUpdate": "hologram_update", "beam": HOSTILE})
    chunk = {"type": "text", "text": "crafted reply " + HOSTILE}
    update(journal, epoch, 4, {"sessionUpdate": "agent_message_chunk", "content": chunk})
    received(journal, epoch, {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}, "session/prompt")
    journal.flush()
    return epoch


def _demo_options(journal: tinyacp.JsonlJournal, **more: Any) -> tinyacp.Options:
    """The demo agent in a new epoch of ``journal``, its reads allowed."""
    policy = tinyacp.PermissionPolicy(["read"])
    command = [sys.executable, "-m", "tinyacp.demo"]
    return tinyacp.Options(command=command, epoch=journal.begin_epoch(), observer=journal, policy=policy, **more)


def hostile_journal(path: Path, work: Path) -> Path:
    """A journal of a real run of the demo agent whose prompt and directory carry hostile text (its read is
    allowed, so the directory's listing is in the tool call), then a crafted epoch (see :func:`crafted_epoch`)."""
    work.mkdir(exist_ok=True)
    (work / HOSTILE_FILE).write_text("x", encoding="utf-8")
    journal = tinyacp.JsonlJournal(path)
    try:
        with tinyacp.Client(_demo_options(journal)) as client:
            client.initialize(timeout=30)
            session = client.new_session(work, timeout=30)
            client.prompt(session.id, HOSTILE, timeout=30)
        crafted_epoch(journal)
    finally:
        journal.close()
    return path


EVERYTHING = tinyacp.ClientFeatures(
    notices=True, compaction=True, plan_operations=True, subagents=True, elicitation=True
)
"""All five newer parts of ACP, as the command opts in to them."""

NEWER_PROMPT = "with-notice with-compaction with-question with-subagent What is in this folder?"
"""A prompt that has the demo agent use each of them: a notice, a compaction, a question, a child session."""
ANSWER = {"name": "Ada <b>", "style": "short", "lines": 3}
"""What the person answers the demo agent's question (a form)."""


class _Answering(tinyacp.JsonlJournal):
    """A journal whose observer answers the agent's questions, as a person would."""

    def on_elicitation(self, request: tinyacp.ElicitationRequest) -> tinyacp.ElicitationReply:
        return tinyacp.ElicitationReply.accept(ANSWER)


def newer_batch(out: Path, work: Path) -> Path:
    """A batch of the demo agent with all five features on: a turn with a notice, a compaction, a plan by id, a
    question (declined: nobody answers in a batch) and a subagent that reads the folder (allowed by the policy);
    then an item whose agent crashes, retried, so that two rows share its id. Returns ``out``."""
    work.mkdir(exist_ok=True)
    (work / "notes.txt").write_text("some notes\n", encoding="utf-8")
    items = [{"id": "newer-1", "prompt": NEWER_PROMPT}]
    run_batch(
        items, out, agent="demo", cwd=work, policy=tinyacp.PermissionPolicy(["read"]), timeout=60, features=EVERYTHING
    )
    again = [{"id": "again", "prompt": "hello", "agent": [sys.executable, "-c", CRASH]}]
    run_batch(again, out, cwd=work, timeout=60)
    run_batch(again, out, cwd=work, timeout=60, retry_failed=True)
    return out


def newer_journal(path: Path, work: Path) -> Path:
    """A journal of a real run of the demo agent with all five features on and its question answered by the
    observer, a mode sent with ``force=True`` that the agent refuses, a fork after the turn, then a crafted epoch
    of the newer kinds carrying hostile text (see :func:`crafted_newer_epoch`)."""
    work.mkdir(exist_ok=True)
    (work / "notes.txt").write_text("some notes\n", encoding="utf-8")
    journal = _Answering(path)
    try:
        with tinyacp.Client(_demo_options(journal, features=EVERYTHING)) as client:
            client.initialize(timeout=30)
            session = client.new_session(work, timeout=30)
            with contextlib.suppress(tinyacp.RequestError):  # the agent refuses the mode it did not list
                client.set_mode(session.id, "turbo", force=True, timeout=30)
            client.prompt(session.id, NEWER_PROMPT, timeout=30)
            client.fork_session(session.id, work, timeout=30)  # a session of ours, not a child
        crafted_newer_epoch(journal)
    finally:
        journal.close()
    return path


def crafted_newer_epoch(journal: tinyacp.JsonlJournal) -> int:
    """An epoch of the newer kinds as an agent might send them with hostile text in every field: a compaction
    that fails, a plan given as markdown then as a file, a subagent with an update of its own and a question, a
    URL question; the prompt is answered ``end_turn``."""
    epoch = journal.begin_epoch()
    prompt(journal, epoch, 7, "newer", session_id="s")
    text = {"type": "text", "text": "summary " + HOSTILE}
    steps: list[dict[str, Any]] = [
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c<1>", "content": text},
        {"sessionUpdate": "compaction_update", "compactionId": "c<1>", "status": "failed", "error": HOSTILE},
        {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p1", "content": "# " + HOSTILE}},
        {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "p1", "uri": "javascript:alert(1)"}},
        {"sessionUpdate": "subagent_update", "sessionId": "kid", "title": "Kid " + HOSTILE, "description": HOSTILE},
    ]
    for seq, step in enumerate(steps, 1):
        update(journal, epoch, seq, step)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "kid says " + HOSTILE}}
    update(journal, epoch, 6, chunk, session_id="kid")
    url = {"sessionId": "kid", "mode": "url", "message": "Log in " + HOSTILE, "url": "javascript:window.__pwned=6"}
    received(journal, epoch, {"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": url}, None)
    answer = {"jsonrpc": "2.0", "id": "q1", "result": {"action": "decline"}}
    raw = json.dumps(answer, separators=(",", ":")).encode()
    journal.on_send(tinyacp.OutgoingMessage(epoch, raw, None, "q1", decided_by="default-decline"))
    received(journal, epoch, {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}, "session/prompt")
    journal.flush()
    return epoch


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
