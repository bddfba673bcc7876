"""One ``tinyacp prompt`` run: the observer that journals, shows and asks; Ctrl-C; the JSON events; the outcome.

The observer records first (the journal), then shows (the display, or the JSON events on stdout), then, for a
permission request the policy does not allow, asks the person on the terminal. Its pieces stay separate:
the journal is a :class:`~tinyacp.JsonlJournal` anyone can use alone.
"""

from __future__ import annotations

import base64
import contextlib
import json
import mimetypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO, TextIO

import msgspec

from .._client import Client
from .._errors import (
    RequestError,
    TinyAcpError,
)
from .._journal import JsonlJournal
from .._limits import TransferLimits
from .._messages import (
    AgentMessageChunk,
    Initialize,
    PromptBlobResource,
    PromptCapabilities,
    PromptContent,
    PromptMedia,
    PromptResourceLink,
    PromptText,
    PromptTextResource,
    StopReason,
    UsageUpdate,
)
from .._observer import BaseObserver
from .._options import Options
from .._permissions import DecisionSource, PermissionPolicy, PermissionReply, PermissionRequest
from .._records import AgentMessage, MessageKind, OutgoingMessage, PromptResult, Update
from ..reader import ReaderLimits
from ._agents import AgentSpec
from ._display import Display, one_line, tool_output_lines
from ._exit import OUTCOME_WORDS, Exit
from ._explain import SettingUnavailable, StartupWatch, explain, stderr_lines
from ._index import SessionIndex
from ._mcp import check_transports
from ._session import SessionPlan, apply_settings, open_session, raw_auth_methods

__all__ = ["Attachment", "Exit", "PromptSettings", "run_prompt"]


@dataclass(frozen=True)
class Attachment:
    """A file given with ``--file`` or ``--image``, read before the agent starts."""

    path: Path
    data: bytes
    mime_type: str | None
    image: bool

    @property
    def uri(self) -> str:
        """The file's absolute ``file://`` URI."""
        return self.path.resolve().as_uri()


@dataclass(frozen=True)
class PromptSettings:
    """Everything ``tinyacp prompt`` was asked to do, checked and read."""

    agent: AgentSpec
    text: str
    cwd: Path
    attachments: tuple[Attachment, ...] = ()
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    ask: bool = False
    no_ask_reason: str = "there is no terminal to ask"
    """Why requests the policy does not allow are rejected without asking, when ``ask`` is False."""
    json: bool = False
    quiet: bool = False
    timeout: float | None = None
    cancel_grace: float = 5.0
    kill_grace: float = 2.0
    journal: Path | None = None
    sync_journal: bool = False
    reader_limits: ReaderLimits = field(default_factory=ReaderLimits)
    transfer_limits: TransferLimits = field(default_factory=TransferLimits)
    agent_log: Path | None = None
    plan: SessionPlan = field(default_factory=lambda: SessionPlan(Path.cwd()))
    """How to open the session (new or continued, MCP servers, login) and the settings to apply in it."""
    index: SessionIndex | None = None
    """Where the session is noted for ``--continue`` (None: nowhere)."""
    agent_key: str = ""
    """The agent's name in the index of sessions (its command line when it has no name)."""
    startup_timeout: float | None = 120.0
    """The deadline of ``initialize``: an ``npx`` cold start downloads the adapter first."""
    fail_on_reject: bool = False


@dataclass
class Outcome:
    """How the run ended."""

    code: int
    result: PromptResult | None = None
    error: str | None = None
    error_type: str | None = None
    hint: str | None = None
    error_data: Any = None
    """The ``data`` of the agent's error answer, as the agent sent it."""


# --------------------------------------------------------------------------------------------------------------
# JSON events on stdout.


def _json_line(event: dict[str, Any]) -> bytes:
    # ASCII only: no C1 control, bidi override or lone surrogate from the agent reaches a terminal raw, and the
    # bytes are valid UTF-8 whatever the agent sent.
    return (json.dumps(event, separators=(",", ":")) + "\n").encode("ascii")


class JsonEvents:
    """``--format json``: one JSON object per line on stdout; see the README for the schema."""

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

    def session(self, init: Initialize, session_id: str, cwd: Path, pid: int, journal: Path | None) -> None:
        """The first event: who the agent is and where the run is recorded."""
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

    def permission(self, request: PermissionRequest, seq: int, decided_by: str, rule: str) -> None:
        """A permission request with its decision and who made it."""
        tool = request.tool_call
        self.emit(
            {
                "type": "permission",
                "epoch": request.epoch,
                "seq": seq,
                "session_id": request.session_id,
                "request_id": request.request_id,
                "tool_call": {"tool_call_id": tool.tool_call_id, "title": tool.title, "kind": tool.kind},
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


# --------------------------------------------------------------------------------------------------------------
# Asking the person.


class Asker:
    """Asks the person on the terminal whether a tool call may run; Ctrl-C while asking cancels the turn."""

    def __init__(self, display: Display, in_fd: int, wake_fd: int, interrupted: Callable[[], bool]) -> None:
        self._display = display
        self._in_fd = in_fd
        self._wake_fd = wake_fd
        self._interrupted = interrupted

    def ask(self, request: PermissionRequest, remember: str) -> str:
        """Returns ``once``, ``run`` (allow such requests for the rest of this run), ``reject`` or ``interrupted``."""
        tool = request.tool_call
        kind = f" [{one_line(tool.kind, 20)}]" if tool.kind else ""
        lines = [f"? the agent asks to run: {one_line(tool.title or tool.tool_call_id, 400)}{kind}"]
        if tool.locations:
            paths = [one_line(str(loc.get("path", "")), 200) for loc in tool.locations if isinstance(loc, dict)]
            lines.append(f"  on: {', '.join(path for path in paths if path)}")
        lines += tool_output_lines(tool.content)
        if tool.raw_input is not None:
            lines.append(f"  input: {one_line(json.dumps(tool.raw_input, ensure_ascii=False, default=str), 300)}")
        self._display.pause(lines)
        try:
            while True:
                self._display.prompt_text(f"  allow? [y] once  [a] {remember} for this run  [N] reject: ")
                answer = self._read()
                if answer is None:
                    return "interrupted"
                if answer in ("y", "yes"):
                    return "once"
                if answer in ("a", "all", "always"):
                    return "run"
                if answer in ("", "n", "no", "eof"):
                    return "reject"
        finally:
            self._display.resume()

    def _read(self) -> str | None:
        while True:
            readable, _, _ = select.select([self._in_fd, self._wake_fd], [], [])
            if self._wake_fd in readable:
                # A signal came. Its handler has run by now (Python runs it as soon as select returns): it says
                # whether this turn is interrupted. A byte left by an earlier signal (Ctrl-C at a chat's input
                # line) is only taken.
                _drain(self._wake_fd)
                if self._interrupted():
                    return None
                continue
            if self._in_fd in readable:
                data = os.read(self._in_fd, 4096)
                if not data:
                    return "eof"
                return data.decode("utf-8", "replace").strip().lower()


def _drain(fd: int) -> None:
    """Take every byte waiting in the (non-blocking) wake pipe."""
    with contextlib.suppress(OSError):  # BlockingIOError: empty
        while os.read(fd, 4096):
            pass


# --------------------------------------------------------------------------------------------------------------
# Ctrl-C, SIGTERM, SIGHUP.


class Interrupts:
    """Signal handlers for the run: the first Ctrl-C during the turn cancels it, the next one (or any Ctrl-C
    outside the turn, or SIGTERM/SIGHUP) kills the agent's group. Only signal-safe calls are made here:
    ``Client.cancel`` and ``Client.kill`` are, by design; the display only gets a note in a deque.

    A handler runs in the main thread between two bytecodes, so it cannot itself wake a wait: a signal that lands
    after the interpreter last looked for one and before ``select`` sleeps would wait for the next key. So
    ``wake_w`` is the process's wake-up fd (:func:`signal.set_wakeup_fd`): a byte is written the moment the
    signal arrives, and the :class:`Asker` waiting on its other end returns and looks at :attr:`interrupted`."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, display: Display, wake_w: int) -> None:
        self.display = display
        self.wake_w = wake_w
        self.client: Client | None = None
        self.session_id: str | None = None
        self.in_turn = False
        self.presses = 0
        self.cancelled = False
        self.killed = False
        self.terminated_by: int | None = None
        self._previous: dict[int, Any] = {}
        self._previous_wakeup: int | None = None

    def install(self) -> None:
        """Take over the signals. Outside the main thread (an embedding program) Python allows no handler: the
        program's own handling stays, and the client still tears the agent down when the run unwinds."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        """Give the signals back (and the wake-up fd, before the run closes ``wake_w``)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._previous_wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            self._previous_wakeup = None

    @property
    def interrupted(self) -> bool:
        """Whether a signal cancelled this turn or is stopping the agent."""
        return self.cancelled or self.killed

    def attach(self, client: Client) -> None:
        """The client exists: a kill asked for while it was being started happens now."""
        self.client = client
        if self.killed:
            client.kill()

    @property
    def code(self) -> int | None:
        """The exit status a signal imposes, if one does."""
        if self.terminated_by is not None:
            return 128 + self.terminated_by
        if self.cancelled or self.killed:
            return int(Exit.CANCELLED)
        return None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        client = self.client
        if signum == signal.SIGINT:
            self.presses += 1
        else:
            self.terminated_by = signum
        if signum == signal.SIGINT and self.presses == 1 and self.in_turn and client and self.session_id:
            self.cancelled = True
            with contextlib.suppress(TinyAcpError, OSError):
                client.cancel(self.session_id)
            self.display.note_from_signal("Ctrl-C: cancelling the turn (press Ctrl-C again to stop the agent)")
        else:
            self.killed = True
            if client is not None:
                client.kill()
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self.display.note_from_signal(f"{name}: stopping the agent")


# --------------------------------------------------------------------------------------------------------------
# The observer.


class RunObserver(BaseObserver):
    """Journal first, then the display or the JSON events, then (for permissions) the policy or the person."""

    def __init__(
        self,
        *,
        journal: JsonlJournal | None,
        display: Display,
        events: JsonEvents | None,
        policy: PermissionPolicy,
        asker: Asker | None,
        limits: TransferLimits,
        interrupts: Interrupts,
        no_ask_reason: str = "there is no terminal to ask",
    ) -> None:
        self.journal = journal
        self.no_ask_reason = no_ask_reason
        self.display = display
        self.events = events
        self.policy = policy
        self.asker = asker
        self.interrupts = interrupts
        self.session_id: str | None = None
        self.in_turn = False
        self.last_seq = 0
        self.allowed = 0
        self.rejected = 0
        self.unasked = 0
        self._remembered: set[tuple[str, str]] = set()
        self._why: dict[int, tuple[str, str, str]] = {}  # id(request) -> (decided_by, rule, words)
        self._max_bytes = limits.max_reply_bytes
        self._max_chunks = limits.max_reply_chunks
        self._kept_bytes = 0
        self._kept_chunks = 0
        self._overflowed = False
        self.watch = StartupWatch()
        self.initialize_answer = b""
        """The agent's answer to ``initialize`` as it sent it (auth methods carry fields the client does not keep)."""
        self.usage: UsageUpdate | None = None
        """The agent's last ``usage_update``: context used, and the session's cost when it reports one."""

    def new_turn(self) -> None:
        """Count the next turn's permissions and reply afresh (a chat has many turns)."""
        self.allowed = self.rejected = self.unasked = 0
        self._kept_bytes = self._kept_chunks = 0
        self._overflowed = False

    def on_update(self, update: Update) -> None:
        if self.journal is not None:
            self.journal.on_update(update)
        self.watch.seen(update.raw)
        self.last_seq = update.seq
        if isinstance(update.payload, UsageUpdate):
            self.usage = update.payload
        if self.events is not None:
            self.events.update(update)
        payload = update.payload
        if isinstance(payload, AgentMessageChunk):
            if self.in_turn and update.session_id == self.session_id and self.events is None:
                self._reply(payload)
            return
        self.display.update(update)

    def _reply(self, payload: AgentMessageChunk) -> None:
        text = payload.content.text
        if text is None:
            self.display.lines([f"(the agent sent a {one_line(payload.content.type, 40)} block)"], "2")
            return
        if self._overflowed:
            return
        # The client keeps the reply within the reply limits; stdout shows exactly what it keeps.
        size = len(text.encode("utf-8", "surrogatepass"))
        if self._kept_chunks >= self._max_chunks or self._kept_bytes + size > self._max_bytes:
            self._overflowed = True
            self.display.lines(["reply limit reached: the rest of the reply is left out (see --max-reply-*)"], "33")
            return
        self._kept_bytes += size
        self._kept_chunks += 1
        self.display.reply(text)

    def on_permission_request(self, request: PermissionRequest) -> PermissionReply | None:
        if self.journal is not None:
            self.journal.on_permission_request(request)
        decided_by, rule, words, reply = self._decide(request)
        self._why[id(request)] = (decided_by, rule, words)
        return reply

    def _decide(self, request: PermissionRequest) -> tuple[str, str, str, PermissionReply | None]:  # noqa: PLR0911  one return per rule, in the order the rules apply
        """Who decides, by which rule, in words for the display, and the reply (None: leave it to the policy)."""
        if self.interrupts.interrupted:
            return "cancelled", "turn cancelled", "Ctrl-C: the turn is being cancelled", PermissionReply.cancelled()
        tool = request.tool_call
        rule = _policy_rule(self.policy, tool.kind, tool.title)
        if rule is not None:
            return "policy", rule, f"by the policy: {rule}", None
        key = _remember_key(tool.kind, tool.title)
        for_run = f"by you, for all {_describe(key)} in this run"
        if key in self._remembered:
            return "person", "earlier answer", for_run, PermissionReply.allow()
        if self.asker is None:
            self.unasked += 1
            return "default-reject", "not asked", f"no rule allows it and {self.no_ask_reason}", None
        answer = self.asker.ask(request, _describe(key))
        if answer == "interrupted":
            return "person", "interrupted", "Ctrl-C while asking", PermissionReply.cancelled()
        if answer == "reject":
            return "person", "asked", "by you", PermissionReply.reject()
        if answer == "run":
            self._remembered.add(key)
            return "person", "asked", for_run, PermissionReply.allow()
        return "person", "asked", "by you", PermissionReply.allow()

    def on_permission_decision(self, request: PermissionRequest) -> None:
        if self.journal is not None:
            self.journal.on_permission_decision(request)
        decided_by, rule, words = self._why.pop(id(request), ("", "", ""))
        if request.decided_by == DecisionSource.CANCELLED:
            decided_by, rule, words = "cancelled", "turn cancelled", "the turn was cancelled"
        elif request.decided_by == DecisionSource.DEFAULT_REJECT and decided_by != "default-reject":
            decided_by, rule, words = "default-reject", "no rule", "no rule allows it"
        elif not decided_by:
            decided_by = str(request.decided_by)
        if request.allowed:
            self.allowed += 1
        else:
            self.rejected += 1
        if self.events is not None:
            self.events.permission(request, self.last_seq, decided_by, rule)
        self.display.permission(request, words or decided_by)

    def on_message(self, message: AgentMessage) -> None:
        if self.journal is not None:
            self.journal.on_message(message)
        self.watch.seen(message.raw, message)
        if message.kind == MessageKind.RESPONSE and message.method == "initialize":
            self.initialize_answer = message.raw

    def on_send(self, message: OutgoingMessage) -> None:
        if self.journal is not None:
            self.journal.on_send(message)

    def flush(self) -> None:
        """The client's flush point: the journal writes what it recorded since the last one."""
        if self.journal is not None:
            self.journal.flush()


def _policy_rule(policy: PermissionPolicy, kind: str | None, title: str | None) -> str | None:
    """Which flag of the policy allows a tool call, in the words of the command line; None if none does."""
    if policy.allow_all:
        return "--yes"
    if kind is not None and kind in policy.kinds:
        return f"--allow-kind {kind}"
    for prefix in policy.title_prefixes:
        if (title or "").startswith(prefix):
            return f"--allow-title {json.dumps(prefix, ensure_ascii=False)}"
    return None


def _remember_key(kind: str | None, title: str | None) -> tuple[str, str]:
    """ "Allow for this run" covers every later request of the same kind; a request with no kind, the same title."""
    return ("kind", kind) if kind else ("title", title or "")


def _describe(key: tuple[str, str]) -> str:
    what, value = key
    return f"{one_line(value, 20)!r} requests" if what == "kind" else f"requests titled {one_line(value, 60)!r}"


# --------------------------------------------------------------------------------------------------------------
# Prompt blocks.


def prompt_with_attachments(
    text: str, attachments: tuple[Attachment, ...], capabilities: PromptCapabilities
) -> tuple[list[PromptContent], list[str]]:
    """The prompt: the text, then each attachment as the richest block the agent accepts; plus notes for
    attachments sent as a mere link because the agent does not accept them embedded."""
    blocks: list[PromptContent] = [PromptText(text)]
    notes = []
    for item in attachments:
        if item.image and capabilities.image:
            blocks.append(
                PromptMedia.image(base64.b64encode(item.data).decode("ascii"), item.mime_type or "", item.uri)
            )
            continue
        if not item.image and capabilities.embedded_context:
            try:
                blocks.append(PromptTextResource(item.uri, item.data.decode("utf-8"), item.mime_type))
            except UnicodeDecodeError:
                blocks.append(PromptBlobResource(item.uri, base64.b64encode(item.data).decode("ascii"), item.mime_type))
            continue
        what = "images" if item.image else "embedded files"
        notes.append(f"the agent does not accept {what}: {item.path} is sent as a link")
        blocks.append(PromptResourceLink(item.uri, item.path.name, item.mime_type, size=len(item.data)))
    return blocks, notes


def read_attachment(path: str, *, image: bool) -> Attachment:
    """Read a ``--file`` or ``--image`` now, so a missing file is a usage error before anything starts.

    Raises:
        OSError: the file cannot be read.
        ValueError: an ``--image`` that is not an image type.
    """
    file = Path(path)
    data = file.read_bytes()
    mime_type = mimetypes.guess_type(file.name)[0]
    if image and (mime_type is None or not mime_type.startswith("image/")):
        raise ValueError(f"--image {path}: not an image file (by its name: {mime_type or 'unknown type'})")
    return Attachment(file, data, mime_type, image)


# --------------------------------------------------------------------------------------------------------------
# The run.


def _outcome_of_result(result: PromptResult) -> Outcome:
    reason = str(result.stop_reason)
    if result.timed_out:
        code = Exit.TIMEOUT
    elif result.overflow is not None:
        code = Exit.LIMIT
    elif reason == StopReason.END_TURN:
        code = Exit.OK
    elif reason == StopReason.REFUSAL:
        code = Exit.REFUSAL
    elif reason == StopReason.CANCELLED:
        code = Exit.CANCELLED
    else:
        code = Exit.INCOMPLETE
    return Outcome(int(code), result)


class PromptRun:
    """One run of ``tinyacp prompt``."""

    interrupts_class: type[Interrupts] = Interrupts

    def __init__(self, settings: PromptSettings, *, stdin_fd: int, stdout: BinaryIO, stderr: TextIO) -> None:
        self.settings = settings
        self.stdin_fd = stdin_fd
        self.stdout = stdout
        self.display = Display(stderr, None if settings.json else stdout, quiet=settings.quiet)
        self.journal: JsonlJournal | None = None
        self.events: JsonEvents | None = None
        self.epoch = 1
        self.agent_pid: int | None = None
        self.client: Client | None = None
        self.init: Initialize | None = None
        self.startup: float | None = None
        """``--startup-timeout`` while ``initialize`` waits under it (it came before ``--timeout``)."""

    def run(self) -> int:
        """Run and return the exit status."""
        settings = self.settings
        if settings.journal is not None:
            try:
                self.journal = JsonlJournal(settings.journal, sync=settings.sync_journal)
                self.epoch = self.journal.begin_epoch()
            except OSError as exc:
                if self.journal is not None:
                    self.journal.close()
                self.display.error(
                    f"cannot write the journal {settings.journal}: {exc.strerror or exc}",
                    ["(choose another file with --journal PATH, or run with --no-journal)"],
                )
                return int(Exit.USAGE)
        if settings.json:
            self.events = JsonEvents(self.stdout, self.epoch, self.display)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        interrupts = self.interrupts_class(self.display, wake_w)
        asker = Asker(self.display, self.stdin_fd, wake_r, lambda: interrupts.interrupted) if settings.ask else None
        observer = RunObserver(
            journal=self.journal,
            display=self.display,
            events=self.events,
            policy=settings.policy,
            asker=asker,
            limits=settings.transfer_limits,
            interrupts=interrupts,
            no_ask_reason=settings.no_ask_reason,
        )
        self.display.start()
        self.display.info(f"starting {settings.agent.name}: {settings.agent.display_command()}")
        interrupts.install()
        journal_error: OSError | None = None
        try:
            outcome = self._converse(observer, interrupts)
        finally:
            interrupts.restore()
            self.display.stop()
            os.close(wake_r)
            os.close(wake_w)
            if self.journal is not None:
                try:
                    self.journal.close()
                except OSError as exc:  # the last records could not be written
                    journal_error = exc
        if journal_error is not None and outcome.code == Exit.OK:
            outcome = self._failed(journal_error, observer)
        forced = interrupts.code
        if forced is not None:  # the person (or the system) stopped the run, whatever the agent answered
            outcome.code = forced
        elif settings.fail_on_reject and outcome.code == Exit.OK and observer.rejected:
            outcome.code = int(Exit.REJECTED)
        self._report(outcome, observer)
        return outcome.code

    def _converse(self, observer: RunObserver, interrupts: Interrupts) -> Outcome:
        settings = self.settings
        deadline = _Deadline(settings.timeout)
        try:
            with contextlib.ExitStack() as stack:
                client = self._open(stack, observer, interrupts, deadline)
                assert self.init is not None and observer.session_id is not None
                blocks, notes = prompt_with_attachments(
                    settings.text, settings.attachments, self.init.prompt_capabilities
                )
                self.display.lines(notes, "33")
                result = self._turn(client, observer, interrupts, blocks, deadline.left())
        except (TinyAcpError, OSError, SettingUnavailable) as exc:
            return self._failed(exc, observer)
        return _outcome_of_result(result)

    def _open(
        self, stack: contextlib.ExitStack, observer: RunObserver, interrupts: Interrupts, deadline: _Deadline
    ) -> Client:
        """Start the agent, ``initialize`` it (within ``--startup-timeout``) and open the session."""
        settings = self.settings
        client = self.client = stack.enter_context(self._start(stack, observer))
        self.agent_pid = client.pid
        interrupts.attach(client)
        self.startup, left = deadline.first(settings.startup_timeout)
        init = self.init = client.initialize(timeout=left)
        self.startup = None
        problem = check_transports(list(settings.plan.mcp_servers), init.agent_capabilities.mcp_capabilities)
        if problem is not None:
            raise SettingUnavailable(problem)
        opened = open_session(
            client,
            init,
            settings.agent,
            settings.plan,
            index=settings.index,
            raw_methods=raw_auth_methods(observer.initialize_answer),
            say=self.display.info,
            timeout=deadline.left,
        )
        session = opened.session
        self._ready(init, session.id, client.pid)
        if opened.how != "new":
            replayed = f" ({opened.replayed} updates replayed)" if opened.how == "loaded" else ""
            self.display.info(f"continuing session {one_line(session.id, 80)}: {opened.how}{replayed}")
        observer.session_id = interrupts.session_id = session.id
        apply_settings(client, session.id, settings.plan, self.display.info, deadline.left())
        self._remember(session.id)
        return client

    def _remember(self, session_id: str) -> None:
        """Note the session in the index of sessions this machine ran (for ``--continue``); a failure only warns."""
        settings = self.settings
        if settings.index is None:
            return
        try:
            settings.index.record(settings.agent_key, settings.cwd, session_id, settings.journal, settings.text)
        except OSError as exc:
            self.display.lines([f"could not note the session for --continue: {exc}"], "33")

    def _turn(
        self,
        client: Client,
        observer: RunObserver,
        interrupts: Interrupts,
        blocks: str | list[PromptContent],
        timeout: float | None,
    ) -> PromptResult:
        """One prompt turn in the open session; Ctrl-C cancels it."""
        assert observer.session_id is not None
        self.display.activity("waiting for the agent")
        observer.in_turn = interrupts.in_turn = True
        try:
            return client.prompt(observer.session_id, blocks, timeout=timeout)
        finally:
            observer.in_turn = interrupts.in_turn = False

    def _start(self, stack: contextlib.ExitStack, observer: RunObserver) -> Client:
        """Start the agent (its stderr kept as a tail for error messages, or appended to ``--agent-log``)."""
        settings = self.settings
        stderr: Any = "tail"
        if settings.agent_log is not None:
            fd = os.open(settings.agent_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            stack.callback(os.close, fd)
            stderr = fd
        env = {**os.environ, **settings.agent.env} if settings.agent.env else None
        options = Options(
            command=settings.agent.command,
            cwd=settings.cwd,
            env=env,
            epoch=self.epoch,
            observer=observer,
            policy=settings.policy,
            reader_limits=settings.reader_limits,
            transfer_limits=settings.transfer_limits,
            stderr=stderr,
            kill_grace=settings.kill_grace,
            cancel_grace=settings.cancel_grace,
        )
        return Client(options)

    def _failed(self, exc: BaseException, observer: RunObserver) -> Outcome:
        """The outcome of an error: what happened, the agent's words about it, the tail of its stderr."""
        client = self.client
        why = explain(
            exc,
            self.settings.agent,
            self.init,
            first_line=observer.watch.first_line,
            startup_timeout=self.startup,
            raw_methods=raw_auth_methods(observer.initialize_answer),
        )
        tail = getattr(exc, "stderr_tail", None) or (client.stderr_tail() if client is not None else None)
        log = str(self.settings.agent_log) if self.settings.agent_log is not None else None
        hint = [*why.hint, *stderr_lines(tail, log if client is not None else None)]
        data = exc.data if isinstance(exc, RequestError) else None
        return Outcome(int(why.code), None, why.message, type(exc).__name__, "\n".join(hint) or None, data)

    def _ready(self, init: Initialize, session_id: str, pid: int) -> None:
        info = init.agent_info
        name = f"{info.name} {info.version}" if info is not None else "the agent"
        self.display.info(
            f"{one_line(name, 80)} (ACP v{init.protocol_version}) · session {one_line(session_id, 80)} · "
            f"{self.settings.cwd}"
        )
        if self.events is not None:
            self.events.session(init, session_id, self.settings.cwd, pid, self.settings.journal)

    def _report(self, outcome: Outcome, observer: RunObserver) -> None:
        display = self.display
        display.end_reply()
        display.final_plan()
        result = outcome.result
        elapsed = display.elapsed
        if outcome.error is not None:
            display.error(outcome.error, outcome.hint.splitlines() if outcome.hint else ())
        elif result is not None:
            code = "32" if outcome.code == Exit.OK else "33"
            display.lines([self._done_line(result, observer, elapsed)], code)
        if observer.unasked:
            n = observer.unasked
            display.lines(
                [
                    f"{n} permission request{'s were' if n != 1 else ' was'} rejected: no rule allowed "
                    f"{'them' if n != 1 else 'it'} and {self.settings.no_ask_reason}. Allow with --allow-kind KIND, "
                    "--allow-title PREFIX or --yes."
                ],
                "33",
            )
        if self.settings.journal is not None:
            display.info(f"journal: {self.settings.journal}")
        if self.events is not None:
            self.events.emit(self._result_event(outcome, observer, elapsed))

    def _done_line(self, result: PromptResult, observer: RunObserver, elapsed: float) -> str:
        """How the turn ended: stop reason, time, updates, permissions, the reply's cut, tokens and cost."""
        permissions = observer.allowed + observer.rejected
        parts = [
            f"{result.stop_reason}" + (" (timed out)" if result.timed_out else ""),
            f"{elapsed:.1f}s",
            f"{result.update_count} updates",
            f"{permissions} permission{'s' if permissions != 1 else ''}"
            + (f" ({observer.allowed} allowed, {observer.rejected} rejected)" if permissions else ""),
        ]
        if result.overflow is not None:
            parts.append(f"reply cut at {result.overflow.kept_bytes} bytes ({result.overflow.kind})")
        parts += usage_words(_usage(result), observer.usage)
        return f"done: {' · '.join(parts)}"

    def _result_event(self, outcome: Outcome, observer: RunObserver, elapsed: float) -> dict[str, Any]:
        result = outcome.result
        overflow = result.overflow if result is not None else None
        words = OUTCOME_WORDS.get(outcome.code, "terminated")  # IntEnum keys: an int finds its member
        return {
            "type": "result",
            "epoch": self.epoch,
            "seq": observer.last_seq,
            "session_id": observer.session_id,
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
                "permissions": observer.allowed + observer.rejected,
                "allowed": observer.allowed,
                "rejected": observer.rejected,
            },
            "elapsed": round(elapsed, 3),
            "meta": result.meta if result is not None else None,
            "usage": _usage(result) if result is not None else None,
            "cost": _cost(observer.usage),
            "error": None
            if outcome.error is None
            else {"type": outcome.error_type, "message": outcome.error, "data": outcome.error_data},
            "journal": str(self.settings.journal) if self.settings.journal is not None else None,
        }


def _usage(result: PromptResult) -> dict[str, Any] | None:
    """The token usage the agent reported with its answer to the prompt (Claude's and OpenCode's do)."""
    if result.usage is not None:  # read by the client: the token counts as the agent named them
        counts = msgspec.to_builtins(result.usage)
        return {key: counts[key] for key in _TOKEN_KEYS if counts.get(key) is not None} or None
    usage = (result.meta or {}).get("usage")
    return usage if isinstance(usage, dict) else None


_TOKEN_KEYS = ("inputTokens", "outputTokens", "totalTokens", "thoughtTokens", "cachedReadTokens", "cachedWriteTokens")


def _cost(update: UsageUpdate | None) -> dict[str, Any] | None:
    if update is None or update.cost is None:
        return None
    return {"amount": update.cost.amount, "currency": update.cost.currency}


def usage_words(usage: dict[str, Any] | None, update: UsageUpdate | None) -> list[str]:
    """The ``done`` line's words for tokens and cost, when the agent reported them."""
    words = []
    if usage:
        counts = [
            f"{value:,} {label}"
            for key, label in (("inputTokens", "in"), ("outputTokens", "out"), ("thoughtTokens", "thought"))
            if isinstance(value := usage.get(key), int)
        ]
        total = usage.get("totalTokens")
        if counts:
            words.append("tokens " + ", ".join(counts))
        elif isinstance(total, int):
            words.append(f"{total:,} tokens")
    if update is not None and update.size > 0:
        words.append(f"context {100 * update.used // update.size}%")
    if update is not None and update.cost is not None:
        amount, currency = update.cost.amount, one_line(update.cost.currency, 8)
        words.append(f"cost ${amount:.4f}" if currency == "USD" else f"cost {amount:.4f} {currency}")
    return words


class _Deadline:
    """``--timeout`` covers the whole run: each call gets what is left."""

    def __init__(self, timeout: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = None if timeout is None else self._clock() + timeout

    def left(self) -> float | None:
        if self._end is None:
            return None
        return max(0.0, self._end - self._clock())

    def first(self, limit: float | None) -> tuple[float | None, float | None]:
        """The timeout of a call that also has a deadline of its own (``--startup-timeout``): (that deadline
        when it comes first, else None; the timeout to use)."""
        left = self.left()
        if limit is not None and (left is None or limit < left):
            return limit, limit
        return None, left


def run_prompt(settings: PromptSettings) -> int:
    """Run ``tinyacp prompt`` on this process's stdin, stdout and stderr; returns the exit status."""
    return PromptRun(settings, stdin_fd=sys.stdin.fileno(), stdout=sys.stdout.buffer, stderr=sys.stderr).run()
