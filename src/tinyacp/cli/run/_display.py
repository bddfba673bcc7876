"""What ``tinyacp prompt`` and ``chat`` show a person while the agent works, sanitized.

The display writes to stderr; the reply text goes to stdout, so ``tinyacp prompt … > answer.md`` keeps the answer
clean. When both stderr and stdout are a terminal (and the format is text), the display keeps a live region at the
bottom (the plan as a checklist, and a status line with a spinner and the elapsed time) and prints events above
it; anywhere else (a pipe, a file, ``--format json``) it prints plain lines with no animation. Colour follows
:func:`wants_color`: a terminal on stderr, unless ``NO_COLOR`` says no; ``FORCE_COLOR`` says yes or no anywhere.

Nothing the agent sends reaches the terminal unfiltered, whatever the field and its JSON type. The display has one
boundary, :meth:`Display._render`: every line it prints is a sequence of pieces, plain text or :class:`Styled` text,
and every piece's text goes through :func:`sanitize` there, after all formatting, before our own SGR colours and
cursor moves are added. So a value is covered however it was formatted into a line, including fields added later.
:func:`sanitize` removes escape sequences (colours, cursor moves, OSC title, hyperlink and clipboard sequences) and
replaces every other control character but newline and tab, C1 controls and bidirectional overrides, so an agent
cannot rewrite the screen, write to the clipboard or hide text from the person deciding what it may run. The reply
on a terminal goes through it too; the raw bytes stay in the journal.
"""

from __future__ import annotations

import collections
import os
import shutil
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO, NamedTuple, TextIO

from ..._messages import (
    AgentMessageChunk,
    AgentThoughtChunk,
    CompactionSummaryChunk,
    CompactionUpdate,
    CurrentModeUpdate,
    Notice,
    Plan,
    PlanEntry,
    PlanFile,
    PlanItems,
    PlanRemoved,
    PlanUpdate,
    SessionMessage,
    SessionMessageChunk,
    SubagentUpdate,
    ToolCall,
    ToolCallUpdate,
    UsageUpdate,
)
from ..._permissions import PermissionRequest
from ..._process import signals_blocked
from ..._records import Update
from ..._sanitize import one_line, sanitize  # the one sanitizer, the batch's records' too
from ..shared._display import char_width, fit, isatty, plan_lines, same_file, tool_output_lines, tool_words, wants_color

__all__ = ["Display", "Styled", "verdict"]


def verdict(request: PermissionRequest) -> str:
    """What the agent was told, in words."""
    if request.verdict == "cancelled":
        return "answered 'cancelled'"
    return request.verdict.replace("_", " ")


# ----------------------------------------------------------------------------------------------------------------
# The display.

_SPINNER_UNICODE = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_SPINNER_ASCII = "|/-\\"
_TICK = 0.1  # spinner frame period: ten frames a second reads as motion without costing a core
_PLAIN_TICK = 0.25  # without a terminal the ticker only prints what a signal handler left
_WAIT_NOTICE = 10.0  # without a terminal: a line this often while the agent has not answered initialize
_LIVE_PLAN_ROWS = 12  # a longer plan is cut in the live region (all of it is printed at the end)


_MODE = "mode: "


class Styled(NamedTuple):
    """A piece of a display line in one SGR style (``code``, such as ``"1;31"``). Its text is sanitized like any
    other piece when the line is printed: only the style is ours."""

    text: str
    code: str


Piece = str | Styled
"""A piece of a display line: text, or text in a style."""
Line = str | Styled | Sequence[Piece]
"""A display line: one piece or a sequence of pieces, joined without spaces."""


def _pieces(line: Line) -> Sequence[Piece]:
    return (line,) if isinstance(line, str | Styled) else line


class Display:
    """The live view on stderr (and the reply on stdout in text mode).

    Every method is called from the thread that runs the client, except :meth:`note_from_signal` (a signal
    handler: it only appends to a deque) and the ticker thread's redraws. One lock orders all writes.

    Args:
        err: the stream for the display (stderr).
        out: where reply text goes (stdout's binary buffer), or None when stdout carries JSON.
        quiet: show nothing but errors.
        color: None to decide (:func:`wants_color`), or force on/off.
    """

    def __init__(self, err: TextIO, out: BinaryIO | None, *, quiet: bool = False, color: bool | None = None) -> None:
        self._err = err
        self._out = out
        self.quiet = quiet
        term = os.environ.get("TERM", "")
        # A live line only where a person watches both streams: `… | jq` or `… > answer.md` on a terminal must
        # not get an animated line between the records, nor JSON (which goes to stdout) in it.
        self.live = isatty(err) and out is not None and isatty(out) and term != "dumb" and not quiet
        """Whether the display animates (a terminal on stderr and on stdout, text format)."""
        if color is None:
            color = wants_color(err)
        self.color = color
        """Whether lines carry our SGR colours."""
        self.out_tty = out is not None and isatty(out)
        self._shared = self.live and self.out_tty and same_file(err, out)
        encoding = (getattr(err, "encoding", None) or "").lower().replace("-", "")
        self._spinner = _SPINNER_UNICODE if encoding == "utf8" else _SPINNER_ASCII
        self._lock = threading.Lock()
        self._notes: collections.deque[Line] = collections.deque()
        self._start = time.monotonic()
        self._frame = 0
        self._live_height = 0
        self._paused = False
        self._reply_mid_line = False
        self._activity = "starting the agent"
        self._plan: list[PlanEntry] = []
        self._plan_id: str | None = None
        self._usage = ""
        self._thought: list[str] = []
        self._thought_head = "thought: "
        """What the gathered text is, as the line that prints it starts: a thought, a child's reply, a message."""
        self._tools: dict[tuple[str, str], dict[str, Any]] = {}
        self._children: dict[str, str] = {}
        """The child sessions (subagents) announced so far: session id -> how the display names it."""
        self._child_states: dict[str, str] = {}
        self._message_heads: dict[str, str] = {}
        """Messages between sessions: message id -> the head of the line that shows it."""
        self._compaction_text: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._mode_line: str | None = None
        self._wait: tuple[str, float | None] | None = None
        """While the agent has not answered ``initialize``: what the run waits on, and for how long at most."""
        self._next_notice = _WAIT_NOTICE

    # ------------------------------------------------------------------------------------------------------------
    # Life cycle.

    def start(self) -> None:
        """Start the clock (and the spinner, on a terminal)."""
        self._start = time.monotonic()
        self._stop.clear()  # a chat starts the display again for each turn
        if self.quiet:
            return
        self._ticker = threading.Thread(target=self._tick, name="tinyacp-display", daemon=True)
        with signals_blocked():  # Ctrl-C must reach the main thread
            self._ticker.start()

    def stop(self) -> None:
        """Stop the spinner and clear the live region. Idempotent."""
        self._stop.set()
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.join(timeout=2.0)
        with self._lock:
            self._flush_thought()
            self._drain_notes()
            self._write_err(self._clear_live())
            self._live_height = 0

    @property
    def elapsed(self) -> float:
        """Seconds since :meth:`start`."""
        return time.monotonic() - self._start

    # ------------------------------------------------------------------------------------------------------------
    # Events.

    def info(self, text: str) -> None:
        """A line about the run, dimmed on a terminal (sanitized like every line: it may quote the agent)."""
        if text.startswith(_MODE) and not self._new_mode(text):
            return
        self._emit([Styled(text, "2")])

    def _new_mode(self, line: str) -> bool:
        """Whether ``line`` (``mode: ID``) says something new. A mode set with ``--mode`` or ``/mode`` is reported
        twice, by the agent's ``current_mode_update`` and by the answer to ``session/set_mode``: shown once."""
        if line == self._mode_line:
            return False
        self._mode_line = line
        return True

    def note_from_signal(self, text: str) -> None:
        """A line to print soon; safe in a signal handler (no lock, no I/O)."""
        self._notes.append(Styled(text, "1;33"))

    def waiting(self, what: str, limit: float | None) -> None:
        """The agent has not answered ``initialize``, until :meth:`done_waiting`: the live line says what the run
        waits on and for how long at most (``what``: "npx may be fetching PKG"); without a terminal, a line on
        stderr every ten seconds says how long it has waited, of how long."""
        with self._lock:
            self._wait = (what, limit)
            self._next_notice = self.elapsed + _WAIT_NOTICE
            most = f" (up to {limit:g} s)" if limit is not None else ""
            self._activity = f"waiting for initialize{most}: {what}"

    def done_waiting(self) -> None:
        """The agent answered ``initialize`` (or the start failed): no more lines about it."""
        with self._lock:
            self._wait = None

    def _wait_notice(self) -> None:
        """The line every ten seconds of a start without a terminal (called with the lock held)."""
        if self._wait is None or self.live or self.elapsed < self._next_notice:
            return
        what, limit = self._wait
        self._next_notice += _WAIT_NOTICE
        of = f" of {limit:g} s" if limit is not None else ""
        self._permanent([Styled(f"still waiting for initialize: {self.elapsed:.0f} s{of} ({what})", "2")])

    def activity(self, text: str) -> None:
        """What the status line says the agent is doing."""
        self._activity = text

    def update(self, update: Update) -> None:
        """Show one update: thoughts, tool calls, the plan, mode changes, usage, notices, compaction, the child
        sessions (subagents) and their messages. The reply text of the session itself goes to :meth:`reply`;
        what a child session says is shown here, under the child's name."""
        payload = update.payload
        child = self._children.get(update.session_id)
        prefix = f"[{child}] " if child is not None else ""
        head = _gathered_head(payload, prefix, self._message_heads)
        if head is None or head != self._thought_head:
            self._flush_thought_locked()
        if head is not None:
            self._gather(head, payload)
        else:
            self._show(update.session_id, prefix, payload)

    def _gather(self, head: str, payload: Any) -> None:
        """A chunk of a thought, of a child's reply or of a message: gathered into one line."""
        self._thought_head = head
        text = payload.content.text
        if text:
            self._thought.append(text)
            if isinstance(payload, AgentThoughtChunk):
                thinking = head.removesuffix("thought: ") + "thinking: "  # "[child] thinking: " for a child's
                self._activity = thinking + one_line("".join(self._thought)[-80:], 80)

    def _show(self, session_id: str, prefix: str, payload: Any) -> None:
        if isinstance(payload, ToolCall | ToolCallUpdate):
            self._tool(session_id, prefix, payload)
        elif isinstance(payload, Plan):
            self._show_plan(payload.entries)
        elif isinstance(payload, PlanUpdate | PlanRemoved):
            self._plan_operation(prefix, payload)
        elif isinstance(payload, CurrentModeUpdate):
            self.info(prefix + _MODE + one_line(payload.current_mode_id, 80))  # a child's is never deduplicated
        elif isinstance(payload, UsageUpdate) and payload.size > 0 and not prefix:
            self._usage = f"context {100 * payload.used // payload.size}%"
        elif isinstance(payload, Notice):
            self.notice(payload, prefix)
        elif isinstance(payload, CompactionUpdate | CompactionSummaryChunk):
            self._compaction(prefix, payload)
        elif isinstance(payload, SubagentUpdate):
            self._subagent(payload)
        elif isinstance(payload, SessionMessage):
            self._session_message(payload)

    def notice(self, notice: Notice, prefix: str = "") -> None:
        """A notice on a line of its own: ``notice (warning): Model fallback — …``. Warnings and errors are shown
        even with ``--quiet``: they may say that the answer is not what was asked for (another model gave it)."""
        description = f" — {one_line(notice.description, 400)}" if notice.description else ""
        severity = one_line(notice.severity, 20)
        line: list[Piece] = [Styled(f"{prefix}notice ({severity}): ", _SEVERITY_STYLES.get(notice.severity, "2"))]
        line.append(f"{one_line(notice.title, 200)}{description}")
        if notice.severity in ("warning", "error") and self.quiet:
            with self._lock:
                self._write_err(self._clear_live() + self._render([line]))
                self._live_height = 0
            return
        self._emit([line])

    def child_name(self, session_id: str) -> str | None:
        """How the display names a child session (a subagent) of this run; None for any other session."""
        return self._children.get(session_id)

    def reply(self, text: str) -> None:
        """Write reply text to stdout as it arrives (sanitized when stdout is a terminal)."""
        out = self._out
        if out is None or not text:
            return
        self._flush_thought_locked()
        self._activity = "writing the reply"
        with self._lock:
            if self._shared:
                self._write_err(self._clear_live())
                self._live_height = 0
            data = sanitize(text) if self.out_tty else text
            try:
                out.write(data.encode("utf-8", "replace"))
                out.flush()
            except OSError:
                self._out = None  # the reader went away (`| head`): the run goes on, the journal keeps all
                return
            if data:
                self._reply_mid_line = not data.endswith("\n")

    def write_beside(self, stream: BinaryIO, data: bytes) -> None:
        """Write ``data`` to ``stream`` (JSON events on stdout) out of the live region's way: when the stream is
        the terminal the display draws on, the status line is cleared first and drawn again after.

        Raises:
            OSError: the stream cannot be written.
        """
        with self._lock:
            shared = self.live and same_file(self._err, stream)
            if shared:
                self._write_err(self._clear_live())
                self._live_height = 0
            stream.write(data)
            stream.flush()
            if shared:
                self._redraw()

    def end_reply(self) -> None:
        """End the reply with a newline on a terminal, so the shell's prompt starts on a line of its own."""
        with self._lock:
            if self.out_tty and self._reply_mid_line and self._out is not None:
                try:
                    self._out.write(b"\n")
                    self._out.flush()
                except OSError:
                    self._out = None
                self._reply_mid_line = False

    def permission(self, request: PermissionRequest, who: str) -> None:
        """Show a permission decision and who made it (a child session's request under the child's name)."""
        child = self._children.get(request.session_id)
        prefix = f"[{child}] " if child is not None else ""
        said = verdict(request)
        code = "32" if request.allowed else "31"
        what = f"{prefix}permission: {tool_words(request.tool_call)}: "
        self._emit([(what, Styled(said, code), f" ({who})")])

    def lines(self, lines: Sequence[Line], code: str = "", *, always: bool = False) -> None:
        """Permanent lines, optionally in one SGR style; ``always``: even when quiet (how a failed turn ended)."""
        self._emit([Styled(line, code) if code and isinstance(line, str) else line for line in lines], always=always)

    def error(self, text: str, more: Sequence[Line] = ()) -> None:
        """An error line, and lines that help with it; shown even when quiet."""
        with self._lock:
            body = self._render([(Styled("tinyacp: error: ", "1;31"), text), *more])
            self._write_err(self._clear_live() + body)
            self._live_height = 0
            self._redraw()

    def final_plan(self) -> None:
        """Print the last plan as permanent lines (on a terminal it lived in the live region)."""
        if self.live and self._plan:
            self._emit(["plan:", *self._plan_lines()])

    # ------------------------------------------------------------------------------------------------------------
    # Asking the person (the prompt itself is the caller's; the display steps aside meanwhile).

    def pause(self, lines: Sequence[Line]) -> None:
        """Stop redrawing, clear the live region and print ``lines`` (the question)."""
        with self._lock:
            self._paused = True
            prefix = "\n" if self._shared and self._reply_mid_line else ""
            self._reply_mid_line = False
            self._write_err(self._clear_live() + prefix + self._render(lines))
            self._live_height = 0

    def prompt_text(self, text: str) -> None:
        """Write the input prompt (no newline)."""
        with self._lock:
            self._write_err(self._piece(Styled(text, "1")))

    def resume(self) -> None:
        """Redraw again after :meth:`pause`."""
        with self._lock:
            self._paused = False
            self._redraw()

    # ------------------------------------------------------------------------------------------------------------
    # Internals.

    def _tool(self, session_id: str, prefix: str, payload: ToolCall | ToolCallUpdate) -> None:
        key = (session_id, payload.tool_call_id)  # two sessions (a parent and its child) may use the same id
        state = self._tools.setdefault(key, {"title": "", "kind": "", "status": "", "content": None})
        before = (state["title"], state["status"])
        if payload.title is not None:
            state["title"] = payload.title
        if payload.tool_kind is not None:
            state["kind"] = payload.tool_kind
        if payload.content is not None:
            state["content"] = payload.content
        if payload.status is not None:
            state["status"] = payload.status
        elif isinstance(payload, ToolCall):
            state["status"] = "pending"
        status = state["status"]
        if status == "in_progress":
            self._activity = prefix + "running: " + one_line(state["title"], 120)
        elif status in ("completed", "failed"):
            self._activity = "waiting for the agent"
        if (state["title"], status) == before:
            return
        kind = f" [{one_line(state['kind'], 20)}]" if state["kind"] else ""
        code = {"completed": "32", "failed": "31", "in_progress": "33"}.get(status, "2")
        lines: list[Line] = [
            (
                f"{prefix}tool {one_line(payload.tool_call_id, 60)}{kind} {one_line(state['title'])}: ",
                Styled(status, code),
            )
        ]
        if status in ("completed", "failed"):
            lines += [Styled(line, "2") for line in tool_output_lines(state["content"])]
        self._emit(lines)

    def _plan_operation(self, prefix: str, payload: PlanUpdate | PlanRemoved) -> None:
        """A plan by id: its entries become the plan shown; a markdown or file plan is printed; a removed plan
        leaves the live region (printed there for the last time)."""
        if isinstance(payload, PlanRemoved):
            if payload.plan_id == self._plan_id and self._plan:
                if self.live:
                    self._emit(["plan:", *self._plan_lines()])
                self._plan, self._plan_id = [], None
                with self._lock:
                    self._redraw()
            return
        plan = payload.plan
        if isinstance(plan, PlanItems):
            self._plan_id = plan.plan_id
            self._show_plan(plan.entries)
        elif isinstance(plan, PlanFile):
            self._emit([Styled(f"{prefix}plan: {one_line(plan.uri, 300)}", "2")])
        else:
            lines = sanitize(plan.content).splitlines()
            shown = [Styled(f"  {one_line(line, 200)}", "2") for line in lines[:_LIVE_PLAN_ROWS]]
            if len(lines) > _LIVE_PLAN_ROWS:
                shown.append(Styled(f"  … {len(lines) - _LIVE_PLAN_ROWS} more lines", "2"))
            self._emit([f"{prefix}plan:", *shown])

    def _compaction(self, prefix: str, payload: CompactionUpdate | CompactionSummaryChunk) -> None:
        """Compaction as status lines: started, then completed with its summary (or failed with its error)."""
        gathered = self._compaction_text.setdefault(payload.compaction_id, [])
        if isinstance(payload, CompactionSummaryChunk):
            gathered.append(payload.content.text or "")
            return
        status = one_line(payload.status, 40)
        if payload.status == "in_progress":
            self._activity = prefix + "compacting the context"
        else:
            self._activity = "waiting for the agent"
        if payload.summary:
            detail = " ".join(_block_texts(payload.summary))
        elif payload.error:
            detail = payload.error
        else:
            detail = "".join(gathered)
        if payload.status != "in_progress":
            self._compaction_text.pop(payload.compaction_id, None)
        detail = f" — {one_line(detail, 300)}" if detail and payload.status != "in_progress" else ""
        code = {"completed": "32", "failed": "31", "cancelled": "33"}.get(payload.status, "2")
        self._emit([(f"{prefix}compaction: ", Styled(status, code), detail)])

    def _subagent(self, payload: SubagentUpdate) -> None:
        """A child session announced or changed: its name (its title, else its id), what it is for, its state."""
        session_id = payload.session_id
        new = session_id not in self._children
        if isinstance(payload.title, str) and payload.title.strip():
            self._children[session_id] = one_line(payload.title, 60)
        elif new or payload.title is None:
            self._children[session_id] = one_line(session_id, 60)
        name = self._children[session_id]
        state = payload.state.get("state") if isinstance(payload.state, dict) else None
        words = one_line(state, 40) if isinstance(state, str) else ""
        if isinstance(payload.state, dict) and isinstance(payload.state.get("stopReason"), str):
            words += f" ({one_line(payload.state['stopReason'], 40)})"
        if new:
            about = f": {one_line(payload.description, 200)}" if isinstance(payload.description, str) else ""
            state_words = Styled(f" ({words})" if words else "", "33")
            self._emit([(f"subagent [{name}] started{about}", state_words)])
        elif words and words != self._child_states.get(session_id):
            code = "32" if state == "idle" else "33"
            self._emit([(f"subagent [{name}]: ", Styled(words, code))])
        if words:
            self._child_states[session_id] = words
        if state == "running":
            self._activity = f"subagent [{name}] at work"

    def _session_message(self, payload: SessionMessage) -> None:
        """A message between sessions: its line names who sends it to whom; its chunks are gathered to it."""
        sender = self._session_name(payload.sender_session_id)
        recipient = self._session_name(payload.recipient_session_id)
        if payload.message_id not in self._message_heads or sender or recipient:
            parts = [f"from {sender}" if sender else "", f"to {recipient}" if recipient else ""]
            self._message_heads[payload.message_id] = f"message {' '.join(part for part in parts if part)}: "
        if payload.content:
            self._thought_head = self._message_heads[payload.message_id]
            self._thought.append(" ".join(_block_texts(payload.content)))

    def _session_name(self, session_id: str | None) -> str:
        """A session in a message's line: a child by its name, any other (the session itself) as "the agent"."""
        if session_id is None:
            return ""
        child = self._children.get(session_id)
        return f"[{child}]" if child is not None else "the agent"

    def _show_plan(self, entries: list[PlanEntry]) -> None:
        if entries == self._plan:
            return
        self._plan = list(entries)
        if self.live:
            with self._lock:
                self._redraw()
        else:
            self._emit(["plan:", *self._plan_lines()])

    def _plan_lines(self, limit: int | None = None) -> list[Line]:
        entries = self._plan if limit is None or len(self._plan) <= limit else self._plan[: limit - 1]
        lines: list[Line] = []
        for line in plan_lines(entries):
            mark = line[2:5]
            code = {"[x]": "32", "[~]": "33"}.get(mark, "2")
            lines.append(("  ", Styled(mark, code), line[5:]))
        if len(entries) < len(self._plan):
            lines.append(Styled(f"  … {len(self._plan) - len(entries)} more", "2"))
        return lines

    def _flush_thought_locked(self) -> None:
        if self._thought:
            with self._lock:
                self._flush_thought()

    def _flush_thought(self) -> None:
        """Print the thought gathered so far as one line (called with the lock held)."""
        if not self._thought:
            return
        text = one_line("".join(self._thought), 200)
        self._thought.clear()
        if text and not self.quiet:
            self._permanent([Styled(f"{self._thought_head}{text}", "2")])

    def _emit(self, lines: Sequence[Line], *, always: bool = False) -> None:
        if self.quiet and not always:
            return
        with self._lock:
            self._drain_notes()
            self._permanent(lines)

    def _permanent(self, lines: Sequence[Line]) -> None:
        """Print lines above the live region (called with the lock held)."""
        prefix = "\n" if self._shared and self._reply_mid_line else ""
        self._reply_mid_line = False
        self._write_err(self._clear_live() + prefix + self._render(lines))
        self._live_height = 0
        self._redraw()

    def _drain_notes(self) -> None:
        while self._notes:
            line = self._notes.popleft()
            prefix = "\n" if self._shared and self._reply_mid_line else ""
            self._reply_mid_line = False
            self._write_err(self._clear_live() + prefix + self._render([line]))
            self._live_height = 0

    def _redraw(self) -> None:
        """Draw the live region (called with the lock held)."""
        if not self.live or self._paused or self._stop.is_set():
            return
        if self._shared and self._reply_mid_line:
            return  # the cursor is inside the reply's last line: drawing now would split it
        width = self._columns()
        spinner = self._spinner[self._frame % len(self._spinner)]
        parts = [f"{self.elapsed:.1f}s", self._activity]
        if self._plan:
            done = sum(entry.status == "completed" for entry in self._plan)
            parts.append(f"plan {done}/{len(self._plan)}")
        if self._usage:
            parts.append(self._usage)
        rows = self._plan_lines(_LIVE_PLAN_ROWS) if self._plan else []
        rows.append((Styled(spinner, "36"), " ", " · ".join(parts)))
        self._write_err(self._clear_live() + "\n".join(self._row(row, width) for row in rows))
        self._live_height = len(rows)

    # ------------------------------------------------------------------------------------------------------------
    # The boundary: every character this display prints passes here (or is one of our cursor moves).

    def _render(self, lines: Sequence[Line]) -> str:
        """Permanent lines as terminal text: each piece sanitized, then styled; one newline after each line."""
        return "".join("".join(map(self._piece, _pieces(line))) + "\n" for line in lines)

    def _piece(self, piece: Piece) -> str:
        if isinstance(piece, Styled):
            text = sanitize(piece.text)
            return f"\x1b[{piece.code}m{text}\x1b[0m" if self.color and text else text
        return sanitize(piece)

    def _row(self, line: Line, width: int) -> str:
        """A live-region row: sanitized, on one line, cut to the terminal width so the region never wraps."""
        pieces = [
            Styled(_flat(piece.text), piece.code) if isinstance(piece, Styled) else _flat(piece)
            for piece in _pieces(line)
        ]
        plain = "".join(piece.text if isinstance(piece, Styled) else piece for piece in pieces)
        if sum(map(char_width, plain)) < width:
            return "".join(map(self._piece, pieces))
        return fit(plain, width - 1)

    def _clear_live(self) -> str:
        if not self._live_height:
            return ""
        up = self._live_height - 1
        return "\r" + (f"\x1b[{up}A" if up else "") + "\x1b[J"

    def _columns(self) -> int:
        try:
            columns = os.get_terminal_size(self._err.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        if columns <= 0:  # a terminal that reports no size (a fresh pty): $COLUMNS, else 80
            columns = shutil.get_terminal_size().columns
        return max(20, columns)

    def _tick(self) -> None:
        period = _TICK if self.live else _PLAIN_TICK
        while not self._stop.wait(period):
            with self._lock:
                self._drain_notes()
                self._frame += 1
                self._redraw()
                self._wait_notice()

    def _write_err(self, text: str) -> None:
        if not text:
            return
        try:
            self._err.write(text)
            self._err.flush()
        except (OSError, ValueError):
            pass  # nobody reads the display any more (a closed pipe, a hung-up terminal); the run goes on


_SEVERITY_STYLES = {"error": "1;31", "warning": "1;33", "info": "2"}


def _gathered_head(payload: object, prefix: str, message_heads: dict[str, str]) -> str | None:
    """The head of the line that gathers this update's text (the display prints it as one line once something
    else arrives), or None for an update that is not gathered."""
    if isinstance(payload, AgentThoughtChunk):
        return f"{prefix}thought: "
    if isinstance(payload, AgentMessageChunk):  # only a child's reply reaches the display
        return f"{prefix}says: "
    if isinstance(payload, SessionMessageChunk):
        return message_heads.get(payload.message_id, "message: ")
    return None


def _block_texts(blocks: Iterable[Any]) -> list[str]:
    """The texts of content blocks kept as decoded JSON (a summary, a message's content)."""
    return [block["text"] for block in blocks if isinstance(block, dict) and isinstance(block.get("text"), str)]


def _flat(text: str) -> str:
    return sanitize(text).replace("\n", " ").replace("\t", " ")
