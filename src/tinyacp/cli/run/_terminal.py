"""The terminal side of a run: asking the person whether a tool call may run, and Ctrl-C, SIGTERM, SIGHUP.

Shared by ``tinyacp prompt`` and ``tinyacp chat`` (whose :class:`~tinyacp.cli.run._chat.ChatInterrupts` extends
:class:`Interrupts` for its input line).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from ..._client import Client
from ..._errors import TinyAcpError
from ..._permissions import PermissionRequest
from ..._serve import ServeRequest
from ..shared._display import one_line, tool_output_lines, tool_words
from ..shared._exit import Exit
from ..shared._serving import action_words
from ._display import Display, Styled

__all__ = ["Asker", "Interrupts"]


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
        child = self._display.child_name(request.session_id)
        who = "the agent" if child is None else f"its subagent [{child}]"
        lines = [f"? {who} asks to run: {tool_words(tool, 400)}"]
        if tool.locations:
            paths = [one_line(str(loc.get("path", "")), 200) for loc in tool.locations if isinstance(loc, dict)]
            lines.append(f"  on: {', '.join(path for path in paths if path)}")
        lines += tool_output_lines(tool.content)
        if tool.raw_input is not None:
            lines.append(f"  input: {one_line(json.dumps(tool.raw_input, ensure_ascii=False, default=str), 300)}")
        return self._choose(lines, remember)

    def ask_serve(self, request: ServeRequest, remember: str) -> str:
        """A read, write or command the agent asks the client for (shown sanitised): ``once``, ``run``,
        ``reject`` or ``interrupted``, as :meth:`ask`."""
        child = self._display.child_name(request.session_id)
        who = "the agent" if child is None else f"its subagent [{child}]"
        lines = [f"? {who} asks tinyacp to {action_words(request, 400)}"]
        if request.tool_call is not None:
            lines.append(f"  for: {tool_words(request.tool_call, 200)}")
        return self._choose(lines, remember)

    def _choose(self, lines: list[str], remember: str) -> str:
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
                # Said before asking again: a typo must not look like a question that did not take the answer.
                why = f"  {one_line(answer, 20)!r} is not an answer: y allows once, a allows {remember} for this run,"
                self._display.pause([Styled(why + " n or Enter rejects", "33")])
        finally:
            self._display.resume()

    def _read(self) -> str | None:
        """The answer typed, lower-cased; ``eof`` at the end of input; None when the turn was interrupted."""
        try:
            line = self.read_line()
        except EOFError:
            return "eof"
        return None if line is None else line.lower()

    def read_line(self) -> str | None:
        """The next line typed, without its surrounding white space; None when the turn was interrupted (Ctrl-C).

        Raises:
            EOFError: the input ended (Ctrl-D).
        """
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
                    raise EOFError
                return data.decode("utf-8", "replace").strip()


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
        self.stopped_by: int | None = None
        """The signal that stopped the agent (a second Ctrl-C, Ctrl-C outside the turn, SIGTERM, SIGHUP)."""
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
            if self.stopped_by is None:
                self.stopped_by = signum
            if client is not None:
                client.kill()
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self.display.note_from_signal(f"{name}: stopping the agent")


def stopped_words(signum: int, phase: str) -> str:
    """What the run says when the person (or the system, by SIGTERM or SIGHUP) stopped it: never the agent's fault.

    Args:
        signum: the signal that stopped the agent.
        phase: when, e.g. ``while the agent was starting``.
    """
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    return f"you stopped the run ({name}) {phase}; the agent was stopped"
