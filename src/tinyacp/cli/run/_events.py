"""``--format json``: the run's events, one JSON object per line on stdout (the schema is in docs/command.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from ..._elicitation import ElicitationReply, ElicitationRequest
from ..._messages import Initialize, Notice, UsageUpdate
from ..._permissions import PermissionRequest
from ..._records import Update, usage_fields
from ..shared._exit import OUTCOME_WORDS, Exit
from ._display import Display
from ._outcome import Outcome

__all__ = ["JsonEvents", "usage_result"]


def _json_line(event: dict[str, Any]) -> bytes:
    # ASCII only: no C1 control, bidi override or lone surrogate from the agent reaches a terminal raw, and the
    # bytes are valid UTF-8 whatever the agent sent.
    return (json.dumps(event, separators=(",", ":")) + "\n").encode("ascii")


class JsonEvents:
    """``--format json``: one JSON object per line on stdout (docs/command.md has the schema)."""

    def __init__(self, out: BinaryIO, epoch: int, display: Display | None = None) -> None:
        self._out: BinaryIO | None = out
        self._display = display
        self.epoch = epoch
        self._decode = msgspec.json.Decoder(dict[str, Any]).decode

    def emit(self, event: dict[str, Any]) -> None:
        """Write one event and flush, so a reader sees it at once."""
        if self._out is None:
            return
        try:
            if self._display is not None:  # never inside the status line, when both share a terminal
                self._display.write_beside(self._out, _json_line(event))
            else:
                self._out.write(_json_line(event))
                self._out.flush()
        except OSError:
            self._out = None

    def session(
        self,
        init: Initialize,
        session_id: str,
        cwd: Path,
        pid: int,
        journal: Path | None,
        *,
        sandbox: dict[str, object] | None = None,
    ) -> None:
        """The first event: who the agent is, where the run is recorded, and how it is sandboxed (or null)."""
        info = init.agent_info
        agent = {"name": info.name, "version": info.version, "title": info.title} if info is not None else None
        self.emit(
            {
                "type": "session",
                "epoch": self.epoch,
                "seq": 0,
                "session_id": session_id,
                "agent": agent,
                "protocol_version": init.protocol_version,
                "cwd": str(cwd),
                "pid": pid,
                "journal": str(journal) if journal is not None else None,
                "sandbox": sandbox,
            }
        )

    def update(self, update: Update) -> None:
        """An update, with the agent's own update object."""
        try:
            body = self._decode(update.raw).get("params", {}).get("update")
        except (msgspec.MsgspecError, AttributeError):
            body = None
        event = {"type": "update", "epoch": update.epoch, "seq": update.seq, "session_id": update.session_id}
        event.update(kind=str(update.kind), update=body)
        self.emit(event)
        notice = update.payload
        if isinstance(notice, Notice):  # its own event too: a reader that wants the warnings need not parse updates
            self.emit(
                {
                    "type": "notice",
                    "epoch": update.epoch,
                    "seq": update.seq,
                    "session_id": update.session_id,
                    "severity": notice.severity,
                    "title": notice.title,
                    "description": notice.description,
                }
            )

    def permission(
        self, request: PermissionRequest, seq: int, decided_by: str, rule: str, parent: str | None = None
    ) -> None:
        """A permission request with its decision and who made it; ``parent`` is the session whose child (a
        subagent) asked, when a child did."""
        tool = request.tool_call
        self.emit(
            {
                "type": "permission",
                "epoch": request.epoch,
                "seq": seq,
                "session_id": request.session_id,
                "request_id": request.request_id,
                "parent_session_id": request.parent_session_id or parent,
                "tool_call": {
                    "tool_call_id": tool.tool_call_id,
                    "title": tool.title,
                    "kind": tool.kind,
                    "name": tool.name,
                },
                "options": [
                    {"option_id": option.option_id, "name": option.name, "kind": option.kind}
                    for option in request.options
                ],
                "decision": request.verdict,
                "allowed": request.allowed,
                "selected": request.selected.option_id if request.selected is not None else None,
                "decided_by": decided_by,
                "rule": rule,
                "reason": request.reason,
            }
        )

    def elicitation(self, request: ElicitationRequest, reply: ElicitationReply, words: str, seq: int) -> None:
        """A question of the agent's (``elicitation/create``) and the answer it got."""
        self.emit(
            {
                "type": "elicitation",
                "epoch": request.epoch,
                "seq": seq,
                "session_id": request.session_id,
                "request_id": request.request_id,
                "mode": request.mode,
                "message": request.message,
                "url": request.url,
                "action": reply.action,
                "content": reply.content,
                "reason": words,
            }
        )

    def result(
        self,
        outcome: Outcome,
        *,
        seq: int,
        session_id: str | None,
        allowed: int,
        rejected: int,
        usage: UsageUpdate | None,
        elapsed: float,
        journal: Path | None,
    ) -> None:
        """The last event: how the run ended, the reply, the counts, the usage and the error if there was one."""
        result = outcome.result
        overflow = result.overflow if result is not None else None
        words = OUTCOME_WORDS.get(outcome.code, "terminated")  # IntEnum keys: an int finds its member
        self.emit(
            {
                "type": "result",
                "epoch": self.epoch,
                "seq": seq,
                "session_id": session_id,
                "outcome": words,
                "exit_code": outcome.code,
                "stop_reason": str(result.stop_reason) if result is not None else None,
                "text": result.text if result is not None else "",
                "overflow": None
                if overflow is None
                else {
                    "kind": str(overflow.kind),
                    "kept_bytes": overflow.kept_bytes,
                    "kept_chunks": overflow.kept_chunks,
                    "left_out_seq": overflow.left_out_seq,
                },
                "timed_out": result.timed_out if result is not None else outcome.code == Exit.TIMEOUT,
                "cancelled": result.cancelled if result is not None else outcome.code == Exit.CANCELLED,
                "counts": {
                    "updates": result.update_count if result is not None else 0,
                    "chunks": result.chunk_count if result is not None else 0,
                    "permissions": allowed + rejected,
                    "allowed": allowed,
                    "rejected": rejected,
                },
                "elapsed": round(elapsed, 3),
                "meta": result.meta if result is not None else None,
                "usage": usage_fields(result.usage) if result is not None else None,
                "notices": [
                    {"severity": notice.severity, "title": notice.title, "description": notice.description}
                    for notice in (result.notices if result is not None else ())
                ],
                "subagents": [
                    {"session_id": child.session_id, "title": child.title, "description": child.description}
                    for child in (result.subagents if result is not None else ())
                ],
                "cost": _cost(usage),
                "error": None
                if outcome.error is None
                else {
                    "type": outcome.error_type,
                    "message": outcome.error,
                    "data": outcome.error_data,
                    "hint": list(outcome.advice),
                },
                "journal": str(journal) if journal is not None else None,
            }
        )


def _cost(update: UsageUpdate | None) -> dict[str, Any] | None:
    if update is None or update.cost is None:
        return None
    return {"amount": update.cost.amount, "currency": update.cost.currency}


def usage_result(out: BinaryIO, message: str, epoch: int = 1) -> None:
    """The ``result`` event of a run stopped by a usage error before it began (``outcome`` ``usage_error``, the
    message as its ``error``)."""
    outcome = Outcome(int(Exit.USAGE), error=message, error_type="UsageError")
    events = JsonEvents(out, epoch=epoch)
    events.result(outcome, seq=0, session_id=None, allowed=0, rejected=0, usage=None, elapsed=0.0, journal=None)
