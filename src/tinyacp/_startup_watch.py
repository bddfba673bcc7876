"""The lines an agent writes on stdout before it answers ``initialize``, watched for a program that is no ACP agent.

A program that does not speak ACP on stdout (``gemini`` without ``--acp``, kimi-cli 1.52's "no longer maintained")
is caught at its first line: the line is kept, and the program is given :data:`STARTUP_GRACE` seconds to exit on
its own (so that how it ended is told too) before it is stopped, long before any deadline of the caller's. The
command (``tinyacp prompt``, ``probe``, ``agents --check``) and a batch turn watch the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._errors import ObserverError
from ._launch_failures import NOT_ACP_WORDS, Said
from ._records import AgentMessage, MessageKind

__all__ = ["SAID_LINES", "STARTUP_GRACE", "NotAcp", "StartupWatch", "said_of"]

STARTUP_GRACE = 2.0
"""How long a program whose first line on stdout is not JSON-RPC may go on before it is stopped: long enough for
one that prints a line and exits (kimi-cli 1.52's "no longer maintained") to exit on its own, so that its exit
status and its other lines are shown (a machine busy for a moment must not turn an exit into a stop); short
enough that one that waits for a person (``gemini`` without ``--acp``) is named long before ``--startup-timeout``."""
SAID_LINES = 3
"""How many of the lines that are not JSON-RPC are kept and shown."""


class NotAcp(Exception):
    """The agent's first line on stdout is not a JSON-RPC message (raised by the observer to stop the run)."""

    def __init__(self, line: bytes) -> None:
        super().__init__(f"this program {NOT_ACP_WORDS}: its first line is not JSON-RPC")
        self.line = line


class StartupWatch:
    """Watches the lines the agent writes on stdout before it answers ``initialize``.

    When the first line is not JSON-RPC, the program does not speak ACP. Unarmed, the watch refuses that line at
    once (it raises :class:`NotAcp`). Armed with a way to stop the agent (:meth:`arm`), it keeps the lines that
    follow and gives the program :data:`STARTUP_GRACE` seconds to exit on its own before it stops it; a JSON-RPC
    message after such a line is refused (:class:`NotAcp`), unless the watch is ``tolerant``: then the lines were
    a banner, and the program, which speaks JSON-RPC after all, is left to go on. Call :meth:`seen` from the
    observer's ``on_message`` and ``on_update``, after recording the line, and :meth:`disarm` when the run is over.
    """

    def __init__(self, grace: float = STARTUP_GRACE, *, tolerant: bool = False) -> None:
        self.first_line: bytes | None = None
        self.said: list[bytes] = []
        """The first :data:`SAID_LINES` lines that are not JSON-RPC, from the first line on."""
        self.said_count = 0
        """How many lines that are not JSON-RPC came, from the first line on."""
        self.grace = grace
        self.tolerant = tolerant
        self.stopped = False
        """Whether the watch stopped the agent (it was still running ``grace`` seconds after its first line)."""
        self._stop: Callable[[], None] | None = None
        self._timer: threading.Timer | None = None

    def arm(self, stop: Callable[[], None]) -> None:
        """Let the watch stop the agent by calling ``stop`` (:meth:`tinyacp.Client.kill`, safe from any thread)."""
        self._stop = stop

    def disarm(self) -> None:
        """Cancel a stop not yet made (the run is over)."""
        self._stop = None
        if self._timer is not None:
            self._timer.cancel()

    def seen(self, raw: bytes, message: AgentMessage | None = None) -> None:
        """A line the agent sent (``message`` None: a session update, which is JSON-RPC).

        Raises:
            NotAcp: the first line is not JSON-RPC (unarmed), or a JSON-RPC message came after such a line (unless
                tolerant).
        """
        invalid = message is not None and message.kind == MessageKind.INVALID
        if self.first_line is None:
            self.first_line = raw
            if not invalid:
                return
            self._said(raw)
            if self._stop is None:
                raise NotAcp(raw)
            self._timer = threading.Timer(self.grace, self._stop_now)
            self._timer.daemon = True
            self._timer.start()
        elif self.said_count:
            if invalid:
                self._said(raw)
            elif self.tolerant:
                self.disarm()
            else:
                raise NotAcp(self.first_line)

    def _said(self, raw: bytes) -> None:
        self.said_count += 1
        if len(self.said) < SAID_LINES:
            self.said.append(raw)

    def _stop_now(self) -> None:
        stop = self._stop
        if stop is not None:
            self.stopped = True
            stop()


def said_of(watch: StartupWatch | None, exc: BaseException) -> Said | None:
    """The lines that are not JSON-RPC the program wrote, from the run's watch (or from the :class:`NotAcp` an
    unarmed watch raised through the observer); None when it wrote none."""
    if watch is not None and watch.said_count:
        return Said(tuple(watch.said), watch.said_count, watch.stopped, watch.grace)
    if isinstance(exc, ObserverError) and isinstance(exc.__cause__, NotAcp):
        return Said((exc.__cause__.line,), 1)
    return None
