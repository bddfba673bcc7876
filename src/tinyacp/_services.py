"""The I/O behind the files and terminals the client serves: what the core's :class:`~tinyacp._serve.Act` asks.

The conversation core decides (:mod:`tinyacp._conversation`, with the rules of :mod:`tinyacp._serve`); the call
driver hands each act to :meth:`Services.act` and sends its result back into the core. Reads and writes are done
by :mod:`tinyacp._served_files`, commands by :mod:`tinyacp._terminals`. Nothing here raises for what a file or a
command does: every failure is a :class:`~tinyacp._serve.Failure` the core answers with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _served_files as files
from ._serve import PENDING, Act, ExitStatus, Failure, Serve, ServeRequest, TerminalRef
from ._terminals import Terminals

__all__ = ["Services"]


class Services:
    """The files and terminals of one client.

    Args:
        serve: what is served, and the bounds.
        grace: seconds between SIGTERM and SIGKILL to a command's group.
        wake: wakes the client's wait (called from a reader thread when a command ends).
    """

    def __init__(self, serve: Serve, grace: float, wake: Callable[[], None]) -> None:
        self.serve = serve
        self.terminals = Terminals(serve, grace, wake)

    def act(self, act: Act) -> Any:
        """Do what ``act`` asks; its result (a :class:`~tinyacp._serve.Failure` for what could not be done)."""
        target = act.target
        if isinstance(target, TerminalRef):
            return self._terminal(act.op, target)
        if act.op == "check":
            return self._check(target, act.roots)
        assert target.resolved is not None, "an act on a request that confinement accepted"
        if act.op == "read":
            return files.read_text(target.resolved, target.line_number, target.limit, self.serve.read_limit)
        if act.op == "write":
            return files.write_text(target.resolved, act.content)
        assert act.op == "create"
        return self.terminals.create(target, act.roots)

    def _check(self, request: ServeRequest, roots: tuple[str, ...]) -> Failure | None:
        """Confinement (and the terminal limit): fill in ``resolved`` (and a write's ``prior``), or refuse."""
        if request.kind == "execute":
            room = self.terminals.room()
            if room is not None:
                return room
            assert request.cwd is not None
            resolved = files.confine_dir(request.cwd, roots)
        else:
            assert request.path is not None
            resolved = files.confine(request.path, roots, write=request.kind == "edit")
        if isinstance(resolved, Failure):
            return resolved
        request.resolved = resolved
        if request.kind == "edit":
            prior = files.prior_state(resolved)
            if isinstance(prior, Failure):
                return prior
            request.prior = prior
        return None

    def _terminal(self, op: str, ref: TerminalRef) -> Any:
        terminal = self.terminals.get(ref.session_id, ref.terminal_id)
        if terminal is None:
            return Failure(-32602, f"Invalid params: no terminal {ref.terminal_id!r} in this session (released?)")
        if op == "output":
            return terminal.output()
        if op == "wait":
            exit: ExitStatus | None = terminal.exit
            return PENDING if exit is None else exit
        if op == "kill":
            terminal.kill()
            return None
        assert op == "release"
        self.terminals.release(terminal)
        return None

    def end_session(self, session_id: str) -> None:
        """The session is closed: its terminals are released."""
        self.terminals.end_session(session_id)

    def begin_close(self) -> None:
        """Stop every command now, without waiting."""
        self.terminals.begin_close()

    def close(self) -> None:
        """Stop every command and wait for the reaps (blocking)."""
        self.terminals.close()
