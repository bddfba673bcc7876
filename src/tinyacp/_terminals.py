"""The terminals the client serves: commands run for the agent, each in a process group of its own (the I/O of
``terminal/*``).

A command is started the way the agent itself is (:class:`~tinyacp._process.AgentProcess`): its argv run without
a shell, in a new process group, torn down escalating (SIGTERM to the group, SIGKILL after the grace) and always
reaped; on Linux under the supervisor (:mod:`tinyacp._supervisor`), so a process that leaves the group (``setsid``,
a daemonising double fork) is stopped too: when the command exits, whatever it left running is stopped with it.
Its stdin is closed at once (it reads EOF); its stdout and stderr go to two pipes that one thread per terminal
reads into a buffer of at most the output limit, dropping the oldest bytes (``truncated``), and the answer starts
at a character boundary. Memory stays bounded whatever the command prints.

A command sent as one whole line with no args (kimi-cli sends ``command: "ls -la | head"``) is run with
``/bin/sh -c LINE`` when it holds a character a shell gives a meaning to, since only a shell can run it; the rules
decided on that exact line. The environment is explicit: a minimal base taken from the client's (``PATH``,
``HOME``, ``USER``, ``LOGNAME``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TZ``, ``TMPDIR``; never anything else, so
no token of the client's reaches the command), ``TERM=dumb``, then the agent's ``env`` entries.

Every terminal is stopped and reaped when it is released, when its session is closed, and when the client is
closed or torn down; at most ``max_terminals`` (counting released ones still being stopped) exist at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Final

from ._errors import SandboxUnavailable, SpawnError
from ._log import PROCESS as _log
from ._process import AgentProcess, signals_blocked
from ._serve import FAILED, REFUSED, ExitStatus, Failure, Serve, ServeRequest, TerminalOutput

__all__ = ["Terminal", "Terminals"]

BASE_ENV: Final = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
"""The client's variables a command gets: what programs need to run and to print text, nothing else."""

_SHELL_CHARS: Final = frozenset(" \t\n|&;<>()$`\\\"'*?[]#~={}%!")
_CHUNK: Final = 64 * 1024
_NO_PIDFD_NAP_MS: Final = 50
"""Without a pidfd (not Linux), how often the reader looks whether the command exited."""
_LEFTOVER_DRAIN: Final = 0.5
"""Seconds the reader keeps reading after the command exited while something it left holds the pipes open
(without the supervisor): then the group is stopped."""
_JOIN: Final = 10.0
"""A terminal's thread ends once its command is reaped: at most the grace and the kill wait of the teardown."""


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {name: os.environ[name] for name in BASE_ENV if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env["TERM"] = "dumb"
    env.update(extra)
    return env


def argv_of(command: str, args: tuple[str, ...]) -> list[str]:
    """What runs: ``command`` and ``args``, or ``/bin/sh -c LINE`` for a whole line sent as the command."""
    if not args and any(char in _SHELL_CHARS for char in command) and not os.path.isfile(command):
        return ["/bin/sh", "-c", command]
    return [command, *args]


def _status(returncode: int) -> ExitStatus:
    if returncode >= 0:
        return ExitStatus(exit_code=returncode)
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"SIG{-returncode}"
    return ExitStatus(signal=name)


def _text(data: bytes, *, truncated: bool, running: bool) -> str:
    """The kept bytes as text: from the first character boundary when the start was dropped; without a trailing
    character not complete yet while the command runs."""
    start = 0
    if truncated:
        while start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:
            start += 1
    end = len(data)
    if running:
        for back in range(1, min(4, end - start) + 1):
            byte = data[end - back]
            if byte < 0x80:
                break
            if byte >= 0xC0:  # a lead byte: complete only with its continuation bytes
                need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                if back < need:
                    end -= back
                break
    return data[start:end].decode("utf-8", "replace")


class Terminal:
    """One command, its output buffer and the thread that reads it."""

    def __init__(
        self,
        terminal_id: str,
        session_id: str,
        proc: AgentProcess,
        err_fd: int,
        *,
        limit: int,
        timeout: float | None,
        grace: float,
        on_exit: Callable[[Terminal], None],
    ) -> None:
        self.id = terminal_id
        self.session_id = session_id
        self.proc = proc
        self.limit = limit
        self.released = False
        self.exit: ExitStatus | None = None
        self.finished = threading.Event()
        self._err_fd = err_fd
        self._timeout = timeout
        self._grace = grace
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._truncated = False
        with signals_blocked():  # the reader never takes Ctrl-C meant for the caller's thread
            self._thread = threading.Thread(target=self._run, name=f"tinyacp-{terminal_id}", daemon=True)
            self._thread.start()

    # What the agent asks.

    def output(self) -> TerminalOutput:
        """The output kept so far, and the exit status once the command ended."""
        with self._lock:
            data = bytes(self._buffer)
            truncated = self._truncated
            exit = self.exit
        return TerminalOutput(_text(data, truncated=truncated, running=exit is None), truncated, exit)

    def kill(self) -> None:
        """Stop the command's group: SIGTERM now, SIGKILL after the grace (the reader reaps it)."""
        if not self.finished.is_set():
            with contextlib.suppress(Exception):
                self.proc.start_kill(self._grace)

    def join(self, timeout: float) -> None:
        """Wait until the command is reaped and the reader ended."""
        self._thread.join(timeout)

    # The reader.

    def _keep(self, data: bytes) -> None:
        with self._lock:
            buffer = self._buffer
            buffer += data
            excess = len(buffer) - self.limit
            if excess > 0:
                del buffer[:excess]
                self._truncated = True

    def _run(self) -> None:
        try:
            self._pump()
        except Exception:  # a bug here must not leave the command running: it is stopped below all the same
            _log.exception("the reader of terminal %s failed", self.id)
        finally:
            returncode = self.proc.terminate(self._grace)  # stops what is left of the group, reaps, closes fds
            with contextlib.suppress(OSError):
                os.close(self._err_fd)
            status = _status(returncode)
            with self._lock:
                self.exit = status
            self.finished.set()
            _log.info("terminal %s ended (%s)", self.id, status.signal or f"exit {status.exit_code}")
            self._on_exit(self)

    def _pump(self) -> None:  # noqa: C901, PLR0912  one loop over the two pipes, the exit, the timeout, the drain
        proc = self.proc
        poller = select.poll()
        pipes = {proc.stdout_fd, self._err_fd}
        for fd in pipes:
            poller.register(fd, select.POLLIN)
        if proc.exit_fd is not None:
            poller.register(proc.exit_fd, select.POLLIN)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        exited_at: float | None = None
        while pipes:
            now = time.monotonic()
            if exited_at is None and deadline is not None and now >= deadline:
                _log.info("terminal %s passed its command_timeout: its group is stopped", self.id)
                self.kill()
                deadline = None
            if exited_at is not None and now - exited_at > _LEFTOVER_DRAIN:
                return  # something the command left holds the pipes: the teardown stops it
            wait = _NO_PIDFD_NAP_MS if proc.exit_fd is None or exited_at is not None else -1
            if deadline is not None:
                left = max(0, int((deadline - now) * 1000) + 1)
                wait = left if wait < 0 else min(wait, left)
            for fd, _ in poller.poll(wait):
                if fd == proc.exit_fd:
                    poller.unregister(fd)
                    continue
                try:
                    data = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    self._keep(data)
                else:
                    poller.unregister(fd)
                    pipes.discard(fd)
            if exited_at is None and proc.poll() is not None:
                exited_at = time.monotonic()


class Terminals:
    """The terminals of one client: created, asked about, stopped, and all reaped at the end.

    Args:
        serve: the limits (``max_terminals``, ``output_limit``, ``command_timeout``).
        grace: seconds between SIGTERM and SIGKILL to a command's group.
        wake: called (from a reader thread) when a command ended, so the client answers ``wait_for_exit``.
    """

    def __init__(self, serve: Serve, grace: float, wake: Callable[[], None]) -> None:
        self._serve = serve
        self._grace = grace
        self._wake = wake
        self._lock = threading.Lock()
        self._terminals: dict[str, Terminal] = {}
        """Every terminal not both released and reaped: what ``max_terminals`` counts."""
        self._exits: deque[Terminal] = deque()
        self._count = 0
        self._closed = False

    def room(self) -> Failure | None:
        """Why one more terminal cannot be created now (None: it can)."""
        with self._lock:
            if len(self._terminals) >= self._serve.max_terminals:
                return Failure(
                    REFUSED,
                    f"refused by the client's rules: at most {self._serve.max_terminals} terminals at once "
                    "(release one first)",
                    confinement=True,
                )
        return None

    def create(self, request: ServeRequest, roots: tuple[str, ...] = ()) -> str | Failure:
        """Start ``request``'s command (its ``resolved`` cwd, its ``env``) and return the new terminal's id; with
        ``Serve(sandbox=...)``, inside bubblewrap, writable only in the session's ``roots`` and the sandbox's own."""
        assert request.command is not None and request.resolved is not None
        problem = self.room()
        if problem is not None or self._closed:
            return problem or Failure(FAILED, "the client is closing")
        limit = self._serve.output_limit
        if request.output_limit is not None:
            limit = max(0, min(limit, request.output_limit))
        argv = argv_of(request.command, request.args)
        env = _environment(request.env)
        sandbox = None
        if self._serve.sandbox is not None:
            from ._sandbox import plan

            try:  # a served command gets no network unless the sandbox says so
                sandbox = plan(
                    self._serve.sandbox, argv, cwd=request.resolved, env=env, roots=roots, network_default=False
                )
            except (SandboxUnavailable, SpawnError) as exc:
                return Failure(FAILED, f"cannot start the command: {str(exc).removeprefix('cannot start the agent ')}")
        err_r, err_w = os.pipe()
        try:
            os.set_blocking(err_r, False)
            from ._supervisor import available

            proc = AgentProcess.spawn(
                argv,
                cwd=request.resolved,
                env=env,
                stderr=err_w,
                supervise=available() is None,
                kill_grace=self._grace,
                sandbox=sandbox,
            )
        except SpawnError as exc:
            os.close(err_r)
            return Failure(FAILED, f"cannot start the command: {str(exc).removeprefix('cannot start the agent ')}")
        except BaseException:
            os.close(err_r)
            raise
        finally:
            os.close(err_w)
        proc.close_stdin()
        with self._lock:
            self._count += 1
            terminal_id = f"term-{self._count}"
            terminal = Terminal(
                terminal_id,
                request.session_id,
                proc,
                err_r,
                limit=limit,
                timeout=self._serve.command_timeout,
                grace=self._grace,
                on_exit=self._ended,
            )
            self._terminals[terminal_id] = terminal
        _log.info("terminal %s started: pid %d in %s", terminal_id, proc.pid, request.resolved)
        return terminal_id

    def get(self, session_id: str, terminal_id: str) -> Terminal | None:
        """The session's terminal by id, unless released (another session's is unknown here)."""
        with self._lock:
            terminal = self._terminals.get(terminal_id)
        if terminal is None or terminal.released or terminal.session_id != session_id:
            return None
        return terminal

    def release(self, terminal: Terminal) -> None:
        """Kill the command if it runs and forget the terminal (its thread reaps it)."""
        terminal.released = True
        terminal.kill()
        with self._lock:
            if terminal.finished.is_set():
                self._terminals.pop(terminal.id, None)

    def take_exits(self) -> list[Terminal]:
        """The terminals that ended since the last call, in order."""
        exits = []
        while self._exits:
            exits.append(self._exits.popleft())
        return exits

    @property
    def exited(self) -> bool:
        """Whether a terminal ended since :meth:`take_exits` was last called."""
        return bool(self._exits)

    def end_session(self, session_id: str) -> None:
        """The session was closed: every terminal of it is released."""
        with self._lock:
            mine = [terminal for terminal in self._terminals.values() if terminal.session_id == session_id]
        for terminal in mine:
            self.release(terminal)

    def begin_close(self) -> None:
        """Stop every command now (SIGTERM, SIGKILL after the grace); :meth:`close` waits for the reaps."""
        self._closed = True
        with self._lock:
            terminals = list(self._terminals.values())
        for terminal in terminals:
            terminal.released = True
            terminal.kill()

    def close(self) -> None:
        """Stop every command and wait until each is reaped (blocking)."""
        self.begin_close()
        with self._lock:
            terminals = list(self._terminals.values())
        for terminal in terminals:
            terminal.join(self._grace + _JOIN)

    def _ended(self, terminal: Terminal) -> None:
        with self._lock:
            if terminal.released:
                self._terminals.pop(terminal.id, None)
        self._exits.append(terminal)
        self._wake()
