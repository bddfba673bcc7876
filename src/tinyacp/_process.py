"""The agent's process: started in a process group of its own, torn down as a group.

tinyacp owns the agent's process. The agent runs in a new process group, so a cancel or a teardown signals
every tool the agent started along with it (agents launched through ``npx`` are themselves a grandchild).
Teardown is unconditional and escalating, as in trio's ``Process`` and anyio's ``Process.aclose``: close stdin
(a blocked agent gets EOF or SIGPIPE), SIGTERM to the group, a grace period, SIGKILL to the group, then reap.

This module never waits for data: the sync and the asyncio shells wait on the fds exposed here themselves
(``select.poll``, ``loop.add_reader``). :meth:`AgentProcess.read_into` and :meth:`AgentProcess.write` never raise
for what a pipe does (nothing to read yet, full, closed): they say it by their value, so the pipes' OS errors are
mapped here, once. :meth:`AgentProcess.terminate` blocks for its grace periods; the asyncio shell starts the
teardown with :meth:`AgentProcess.begin_terminate`, waits for the agent's exit on its event loop, and runs only
what would still block in a worker thread.

Limits:
    A process that left the group on purpose (``setsid``, ``setpgid``, a daemonising tool) is not reached
    by the group's signals and may outlive the agent. Making this process a subreaper, or the agent a cgroup,
    would be a process-wide decision that belongs to the application; ``spawn(supervise=True)`` puts a
    subreaper in a process of its own instead (:mod:`tinyacp._supervisor`, Linux).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's own functions, minus the enums: see signals_blocked
import _thread  # start_new_thread: see start_signal_free_thread
import contextlib
import functools
import logging
import os
import select
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias, TypeVar

from ._bounds import MAX_FD, check_count, check_seconds
from ._errors import SpawnError, describe_returncode
from ._fd_limit import retry_when_out_of_fds
from ._log import PROCESS as _log

if TYPE_CHECKING:
    from ._sandbox import Plan

T = TypeVar("T")

__all__ = ["CLOSED", "STDERR_TAIL_BYTES", "WOULD_BLOCK", "AgentProcess", "StderrTarget"]

WOULD_BLOCK: Final = -1
"""What :meth:`AgentProcess.read_into` and :meth:`AgentProcess.write` return when the pipe is not ready."""

CLOSED: Final = -2
"""What :meth:`AgentProcess.write` returns once the agent's stdin is closed."""

StderrTarget: TypeAlias = Literal["discard", "tail"] | int | IO[Any]
"""Where the agent's stderr goes: ``"discard"`` (or ``subprocess.DEVNULL``), ``"tail"`` (keep the last
:data:`STDERR_TAIL_BYTES` for error messages), or an open file or fd of the caller's."""

STDERR_TAIL_BYTES: Final = 64 * 1024
"""How much of the agent's stderr ``"tail"`` keeps: enough for a stack trace and the log lines before it,
while an agent that logs several KiB per turn for hours costs a fixed amount of memory."""

# SIGKILL takes effect when a process next returns to user space; only one in uninterruptible sleep (a hung
# NFS or FUSE mount, a dying disk) takes longer. For the rest of the group we then stop waiting rather than
# hang the caller; the agent itself is still waited for, since its exit status is what terminate() returns.
_KILL_WAIT: Final = 5.0
# Waiting for the group to die polls /proc: start at 1 ms (a cooperative agent usually dies within a few)
# and back off to 20 ms so a slow one does not cost a busy core.
_NAP_FIRST: Final = 0.001
_NAP_MAX: Final = 0.02
# The helper threads only ever wait on an fd or a lock we release, so they end at once; the bound is a
# guard against a bug, not a wait anyone should see.
_JOIN_TIMEOUT: Final = 2.0
_READ_CHUNK: Final = 64 * 1024
# After the group is dead, drain what is left in the stderr pipe, but no more than this much: a process
# that escaped the group could keep writing for ever.
_FINAL_DRAIN_CHUNKS: Final = 64

_HAVE_PROC: Final = os.path.exists("/proc/self/stat")


class AgentProcess:
    """A running agent, its pipes and its process group. Create it with :meth:`spawn`.

    Attributes:
        pid: The agent's pid.
        pgid: Its process group (equal to ``pid``: the agent leads a new group).
        stdin_fd: Write end of the agent's stdin, non-blocking; -1 once closed.
        stdout_fd: Read end of the agent's stdout, non-blocking; -1 once closed.
        exit_fd: A pidfd that becomes readable when the agent exits (Linux >= 5.3), else None.
        wake_fd: Read end of a self-pipe, non-blocking, readable after :meth:`wake`; -1 once closed.

    The shells must stop using (and unregister) the fds before :meth:`terminate` closes them; a number
    closed here can be reused by the next ``open`` anywhere in the process.
    """

    pid: int
    pgid: int
    stdin_fd: int
    stdout_fd: int
    exit_fd: int | None
    wake_fd: int

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        *,
        argv0: str,
        stdin_fd: int,
        stdout_fd: int,
        exit_fd: int | None,
        wake_fds: tuple[int, int],
        stderr_tail: _StderrTail | None,
        sandboxed: bool = False,
    ) -> None:
        """Take ownership of a started process and its fds; use :meth:`spawn` instead."""
        self._sandboxed = sandboxed
        self._proc = proc
        self._argv0 = argv0
        self.pid = proc.pid
        self.pgid = proc.pid
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.exit_fd = exit_fd
        self.wake_fd, self._wake_w = wake_fds
        self._stderr_tail = stderr_tail
        self._exit_seen = False
        self._lock = threading.Lock()  # one teardown at a time
        self._fd_lock = threading.Lock()  # write() and drain_wake() against terminate() closing their fds
        self._closed = False
        # The kill timer must be startable from a signal handler, which runs in the main thread between two
        # bytecodes, possibly while that thread holds any Python-level lock (ours, or threading's own
        # _active_limbo_lock inside Thread.start). So it uses only primitives that take no such lock:
        # list.pop as a once-flag, plain locks (threading.Lock is _thread's lock) and raw _thread threads.
        self._kill_once: list[None] = [None]
        self._kill_cancel = threading.Lock()
        self._kill_cancel.acquire()  # released = cancelled, for good
        self._kill_done = threading.Lock()
        self._kill_done.acquire()  # released when the timer thread ends

    @classmethod
    @retry_when_out_of_fds
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr: StderrTarget = "discard",
        supervise: bool = False,
        kill_grace: float = 2.0,
        tail_thread: bool = True,
        sandbox: Plan | None = None,
    ) -> AgentProcess:
        """Start the agent in a new process group, with pipes for stdin and stdout.

        The program is executed directly, never through a shell, with no fds but 0, 1 and 2.

        Args:
            argv: The program and its arguments. A bare program name is looked up on the ``PATH`` of
                ``env`` (or of this process when ``env`` is None).
            cwd: The agent's working directory; None keeps ours.
            env: The agent's entire environment; None inherits ours.
            stderr: ``"discard"`` or ``subprocess.DEVNULL`` (the default: nothing to read, nothing to block
                on); ``"tail"`` to have a thread read it continuously and keep the last
                :data:`STDERR_TAIL_BYTES` (see :meth:`stderr_tail`), so a chatty agent never blocks; or an
                open file or an fd >= 0 of the caller's, which the agent writes to directly.
            supervise: Run the agent under :mod:`tinyacp._supervisor` (Linux), which then leads the group
                and is what ``pid`` names; it stops the agent's escaped descendants too, after half of
                ``kill_grace``, and exits as the agent did. Returns once the agent itself was started.
            kill_grace: The grace the supervisor gives escaped descendants (halved); unused without it.
            tail_thread: With ``stderr="tail"``, whether a thread reads the stderr pipe. False: the caller reads it
                (an event loop that watches :attr:`tail_fd` and calls :meth:`read_stderr` when it is readable),
                when the agent's exit can be watched too (``exit_fd``); else a thread reads it all the same.
            sandbox: start ``sandbox.argv`` (bwrap, then ``argv``: :func:`tinyacp._sandbox.plan`) instead of
                ``argv``. bwrap then leads the group and is what ``pid`` names; its PID namespace dies with it.
                It is started from a thread that lives as long as this process (see :func:`_from_keeper`).

        Returns:
            The running agent. Call :meth:`terminate` when done with it.

        Raises:
            SpawnError: The program could not be started (missing, not executable, bad ``cwd``, no file
                descriptor to spare even after raising the soft ``RLIMIT_NOFILE``: see
                :mod:`tinyacp._fd_limit`); the OSError is the ``__cause__``. No fd is left open and no
                process is left running.
            TypeError: ``argv`` is one string rather than a list of arguments.
            ValueError: ``argv`` is empty, or ``stderr`` is not one of the accepted targets.
        """
        args = _argv_list(argv)
        keep_tail, child_stderr = _stderr_target(stderr)
        # Two exit stacks, in the manner of trio's open_process: ``ours`` closes our ends of the pipes again if
        # anything fails before the AgentProcess owns them; ``theirs`` closes the child's ends as soon as Popen
        # returned or failed, since our copies would keep the agent's stdin open and hide its EOF on stdout.
        with contextlib.ExitStack() as ours:
            status = ours.enter_context(contextlib.ExitStack())  # the supervisor's status pipe, read once
            tail_fds = ours.enter_context(contextlib.ExitStack())  # handed to the stderr thread once it runs
            with contextlib.ExitStack() as theirs:
                stdin_r, stdin_w = _pipe(theirs, ours, child="read")
                stdout_r, stdout_w = _pipe(ours, theirs, child="write")
                wake_r, wake_w = _pipe(ours, ours)
                command, status_r = (args if sandbox is None else list(sandbox.argv)), -1
                pass_fds: tuple[int, ...] = ()
                if supervise:
                    from . import _supervisor

                    status_r, status_w = _pipe(status, theirs, child="both")  # blocking: we wait on it once
                    command = _supervisor.command(command, grace=kill_grace, status_fd=status_w)
                    pass_fds = (status_w,)
                if keep_tail:
                    err_r, child_stderr = _pipe(tail_fds, theirs, child="write")
                start = functools.partial(
                    _popen,
                    command,
                    stdin_r,
                    stdout_w,
                    child_stderr,
                    program=args[0],
                    cwd=cwd,
                    env=env,
                    pass_fds=pass_fds,
                )
                proc = start() if sandbox is None or supervise else _from_keeper(start)
            try:
                if supervise:
                    _await_supervisor(status_r, args[0], cwd)
                    status.close()
                exit_fd = _pidfd_open(proc.pid)
                if exit_fd is not None:
                    ours.callback(os.close, exit_fd)
                tail = None
                if keep_tail:
                    tail = _StderrTail(err_r)
                    if tail_thread or exit_fd is None:
                        tail.start()
                    tail_fds.pop_all()  # from here on the tail (its thread, if any) owns err_r
            except BaseException:
                _kill_and_reap(proc)
                raise
            ours.pop_all()  # the AgentProcess owns the rest from here on
        # The program only: its arguments may carry a token.
        how = (" (supervised)" if supervise else "") + (" (in bubblewrap)" if sandbox is not None else "")
        _log.info("started %s as pid %d%s", args[0], proc.pid, how)
        return cls(
            proc,
            argv0=args[0],
            stdin_fd=stdin_w,
            stdout_fd=stdout_r,
            exit_fd=exit_fd,
            wake_fds=(wake_r, wake_w),
            stderr_tail=tail,
            sandboxed=sandbox is not None,
        )

    def __repr__(self) -> str:
        returncode = self._proc.returncode
        state = "running" if returncode is None else describe_returncode(returncode)
        if self._closed:
            state = f"closed, {state}"
        return f"<AgentProcess pid={self.pid} argv0={self._argv0!r} {state}>"

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once reaped (negative: the signal that killed it), else None."""
        return self._proc.returncode

    @property
    def closed(self) -> bool:
        """True once :meth:`terminate` has finished: the agent is reaped and every fd is closed."""
        return self._closed

    def wake(self) -> None:
        """Make ``wake_fd`` readable, so a shell waiting in poll returns. Safe from a signal handler."""
        fd = self._wake_w
        if fd < 0:
            return
        with contextlib.suppress(OSError):  # full (a wake-up is pending already), or closed by terminate()
            os.write(fd, b"\0")

    def drain_wake(self) -> None:
        """Empty the wake pipe, so ``wake_fd`` is readable again only after the next :meth:`wake`."""
        with self._fd_lock, contextlib.suppress(OSError):  # OSError: empty, or closed by terminate()
            while os.read(self.wake_fd, 4096):
                pass

    def read_into(self, view: memoryview) -> int:
        """Read the agent's stdout into ``view`` once, without blocking. What the pipe does is told by the value,
        never raised: this is where the client's reads meet the OS.

        Returns:
            How many bytes were read; 0 at the end of the output (also once :meth:`terminate` closed it, or if
            the read failed); :data:`WOULD_BLOCK` when there is nothing to read yet.
        """
        try:
            return os.readv(self.stdout_fd, [view])
        except BlockingIOError:
            return WOULD_BLOCK
        except OSError:  # EBADF once closed by terminate(), EIO: nothing more will come from this pipe
            return 0

    def write(self, data: bytes | memoryview) -> int:
        """Write to the agent's stdin once, without blocking. What the pipe does is told by the value, never
        raised: this is where the client's writes meet the OS.

        Returns:
            How many bytes were written, which may be fewer than ``len(data)``; :data:`WOULD_BLOCK` when the pipe
            is full (wait until ``stdin_fd`` is writable); :data:`CLOSED` when the agent closed its stdin (it
            exited), :meth:`terminate` closed ours, or the write failed.
        """
        with self._fd_lock:
            if self.stdin_fd < 0:
                return CLOSED
            try:
                return os.write(self.stdin_fd, data)
            except BlockingIOError:
                return WOULD_BLOCK
            except OSError:  # EPIPE, ECONNRESET, EBADF: nothing more reaches the agent through this pipe
                return CLOSED

    def close_stdin(self) -> None:
        """Close our end of the agent's stdin now: it reads EOF (a served terminal's command gets no input)."""
        self._close_stdin()

    def poll(self) -> int | None:
        """Reap the agent if it has exited, without blocking, and return its returncode (None if alive)."""
        return self._proc.poll()

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to every process in the agent's group.

        Nothing is sent once the agent is reaped and its group is empty: the group id is then free, and
        could belong to an unrelated process group.

        Raises:
            PermissionError: No member of the group could be signalled.
        """
        if self._group_gone_for_good():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)

    def start_kill(self, grace: float) -> None:
        """Stop the agent's group now: SIGTERM, then SIGKILL after ``grace`` seconds unless all are gone.

        Returns at once; a timer thread (started once, however often this is called) sends the SIGKILL.
        Also calls :meth:`wake`. Safe from any thread and from a signal handler. :meth:`terminate` is still
        needed to reap the agent and close the fds.

        Raises:
            ValueError: ``grace`` is not a number of seconds from 0 to 1,000,000.
        """
        check_seconds("grace", grace)
        if self._closed:
            return
        self._signal_quietly(signal.SIGTERM)
        # A stopped member would hold the SIGTERM until continued; continue it so it can act on it now.
        self._signal_quietly(signal.SIGCONT)
        self.wake()
        try:
            self._kill_once.pop()
        except IndexError:
            return  # the timer is already running
        try:
            start_signal_free_thread(self._kill_after, (grace,))
        except RuntimeError:  # no thread to be had; terminate() still escalates
            self._kill_done.release()

    def live_group_members(self) -> list[int]:
        """The pids of the processes in the agent's group that are alive (zombies do not count).

        ``killpg(pgid, 0)`` alone would count zombies: a grandchild orphaned by the agent is reparented to
        init, and its zombie stays in the group until init reaps it, which some containers' init does late
        (a second here) or never.
        Without /proc (macOS) only ``killpg`` can be asked, so the list is ``[pgid]`` while the group has
        a signallable member; the agent itself is reaped first so its own zombie does not count.
        """
        if not _HAVE_PROC:
            self._proc.poll()
        return _live_group_members(self.pgid)

    def terminate(self, grace: float) -> int:
        """Stop the agent and everything in its group, reap it and close every fd. Blocks.

        Closes stdin, sends SIGTERM (and SIGCONT) to the group, waits up to ``grace`` seconds for every
        member to exit, sends SIGKILL to the group and waits a few seconds more, then reaps the agent and
        closes our fds. In bubblewrap (``spawn(sandbox=...)``) the grace comes before SIGTERM: bwrap does not
        pass signals on, and its death kills everything inside at once, so the agent gets ``grace`` seconds to
        end on the end of its input instead. Safe to call from several threads (the others wait for the first)
        and more than once. If interrupted (KeyboardInterrupt), it kills the group at once, still reaps and closes, then
        re-raises. Only an agent stuck in the kernel after SIGKILL can keep it waiting longer.

        Args:
            grace: Seconds the group gets to exit after SIGTERM.

        Returns:
            The agent's returncode (negative: the signal that killed it).

        Raises:
            ValueError: ``grace`` is not a number of seconds from 0 to 1,000,000.
        """
        check_seconds("grace", grace)
        with self._lock:
            if self._closed:
                return self._returncode_after_close()
            try:
                self._close_stdin()
                if self._sandboxed:  # the grace goes to the end of input: SIGTERM kills bwrap and all inside
                    self._wait_group_gone(grace)
                    grace = 0.0
                if not self._group_gone_for_good():
                    _log.debug("stopping pid %d: stdin closed, SIGTERM to its group, %.1f s of grace", self.pid, grace)
                    self._signal_quietly(signal.SIGTERM)
                    self._signal_quietly(signal.SIGCONT)
                    if not self._wait_group_gone(grace):
                        _log.warning("the group of pid %d outlived %.1f s after SIGTERM: SIGKILL", self.pid, grace)
                        self._signal_quietly(signal.SIGKILL)
                        self._wait_group_gone(_KILL_WAIT)
            except BaseException:
                self._signal_quietly(signal.SIGKILL)  # interrupted: skip what is left of the grace
                raise
            finally:
                self._stop_kill_timer()
                self._proc.wait()
                if self._stderr_tail is not None:
                    self._stderr_tail.stop(_JOIN_TIMEOUT)
                self._close_fds()
                self._closed = True
                self._log_reaped()
            return self._returncode_after_close()

    def _log_reaped(self) -> None:
        returncode = self._proc.returncode
        if returncode is not None and _log.isEnabledFor(logging.INFO):
            _log.info("pid %d reaped (%s); its fds are closed", self.pid, describe_returncode(returncode))

    def begin_terminate(self) -> None:
        """The first step of :meth:`terminate`, which never blocks: close stdin, and SIGTERM (and SIGCONT) the group
        unless it is gone (in bubblewrap, not yet: see :meth:`terminate`). For a shell that waits for the exit
        itself (``exit_fd``), then calls :meth:`terminate` or :meth:`terminate_if_gone`."""
        if self._closed:
            return
        self._close_stdin()
        if self._sandboxed:
            _log.debug("stopping pid %d: stdin closed (in bubblewrap: SIGTERM only after the grace)", self.pid)
            return
        if not self._group_gone_for_good():
            _log.debug("stopping pid %d: stdin closed, SIGTERM to its group", self.pid)
            self._signal_quietly(signal.SIGTERM)
            self._signal_quietly(signal.SIGCONT)

    def terminate_if_gone(self) -> bool:
        """:meth:`terminate` when it would not block: the agent has exited and nothing is left in its group, no
        kill timer is running and no thread reads the stderr tail. Reaps the agent and closes every fd.

        Returns:
            Whether the process is closed now; False: call :meth:`terminate`.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._closed:
                return True
            tail = self._stderr_tail
            if not self._kill_once or (tail is not None and tail.threaded) or self._proc.poll() is None:
                return False
            if self.live_group_members():
                return False
            self._close_stdin()
            self._stop_kill_timer(wait=False)
            if tail is not None:
                tail.stop(None)
            self._close_fds()
            self._closed = True
            self._log_reaped()
            return True
        finally:
            self._lock.release()

    @property
    def tail_fd(self) -> int | None:
        """The read end of the stderr pipe when the caller reads it (``spawn(tail_thread=False)``), else None.

        Watch it while the agent runs and call :meth:`read_stderr` when it is readable; stop watching it before
        :meth:`terminate` (which reads what is left and closes it).
        """
        tail = self._stderr_tail
        return tail.fd if tail is not None and not tail.threaded and tail.fd >= 0 else None

    def read_stderr(self) -> bool:
        """Read what the agent wrote to stderr into the tail (see :attr:`tail_fd`); False at EOF, when watching
        it is over."""
        tail = self._stderr_tail
        return tail is not None and tail.read()

    def stderr_tail(self) -> bytes | None:
        """The last :data:`STDERR_TAIL_BYTES` of the agent's stderr with ``stderr="tail"``, else None.

        Still available after :meth:`terminate`, which reads what the agent wrote before it died.
        """
        return None if self._stderr_tail is None else self._stderr_tail.tail()

    def __del__(self) -> None:
        # Dropped without terminate(): kill rather than leave an orphan, close rather than leak. No waiting
        # here, so the agent may stay a zombie until subprocess reaps it at the next Popen. The warning comes
        # last: under ``-W error`` it raises, and the cleanup must have happened by then.
        if getattr(self, "_closed", True):
            return
        description = repr(self)
        try:
            self._signal_quietly(signal.SIGKILL)
            self._stop_kill_timer(wait=False)
            if self._stderr_tail is not None:
                self._stderr_tail.stop(None)
            self._close_fds()
        except Exception:  # interpreter shutdown: modules may be half gone
            pass
        warnings.warn(f"{description} was not terminated; its group was killed", ResourceWarning, stacklevel=1)

    def _returncode_after_close(self) -> int:
        returncode = self._proc.returncode
        assert returncode is not None  # closed implies reaped
        return returncode

    def _group_gone_for_good(self) -> bool:
        """True once the agent is reaped and no member is alive: the group id may then be reused."""
        return self._proc.returncode is not None and not self.live_group_members()

    def _signal_quietly(self, sig: int) -> None:
        """signal_group for teardown, which has nothing better to do when the group cannot be signalled."""
        with contextlib.suppress(PermissionError):
            self.signal_group(sig)

    def _kill_after(self, grace: float) -> None:
        """The kill timer thread: SIGKILL after ``grace`` unless cancelled or nobody is left."""
        try:
            if self._kill_cancel.acquire(timeout=grace):
                with contextlib.suppress(RuntimeError):
                    self._kill_cancel.release()  # leave it cancelled
            elif self.live_group_members():
                self._signal_quietly(signal.SIGKILL)
        finally:
            self._kill_done.release()

    def _stop_kill_timer(self, *, wait: bool = True) -> None:
        with contextlib.suppress(RuntimeError):  # RuntimeError: cancelled already
            self._kill_cancel.release()  # stays released, so a timer started later ends at once
        if wait and not self._kill_once and self._kill_done.acquire(timeout=_JOIN_TIMEOUT):
            self._kill_done.release()  # keep it released for the next caller

    def _wait_group_gone(self, timeout: float) -> bool:
        """Wait until no member of the group is alive; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        nap = _NAP_FIRST
        while self._group_alive():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._nap(min(nap, remaining))
            nap = min(nap * 2, _NAP_MAX)
        return True

    def _group_alive(self) -> bool:
        """Whether a member of the agent's group is alive; reaps the agent as soon as it has exited.

        The agent leads its group, so while it runs the group is alive without a look at /proc; once it is
        reaped, a group with no member left answers ``killpg`` with ESRCH, so /proc is read only while
        something else is left in the group (a scan costs a few syscalls per process on the machine).
        """
        if self._proc.poll() is None:
            return True
        return bool(self.live_group_members())

    def _nap(self, seconds: float) -> None:
        """Sleep, but wake early when the agent itself exits (its pidfd becomes readable)."""
        if self.exit_fd is None or self._exit_seen:
            time.sleep(seconds)
            return
        poller = select.poll()
        poller.register(self.exit_fd, select.POLLIN)
        if poller.poll(seconds * 1000):
            self._exit_seen = True  # readable for good now: polling it again would spin

    def _close_stdin(self) -> None:
        with self._fd_lock:
            fd, self.stdin_fd = self.stdin_fd, -1
        if fd >= 0:
            os.close(fd)

    def _close_fds(self) -> None:
        self._close_stdin()
        # Forget each number before closing it, so our own methods cannot reach a number reused meanwhile.
        # wake() takes no lock (a signal handler may call it): it may still write one byte to the old number
        # if it read it just before; that is the same window signal.set_wakeup_fd has.
        with self._fd_lock:
            wake_w, self._wake_w = self._wake_w, -1
            fds = [self.stdout_fd, self.exit_fd, self.wake_fd, wake_w]
            self.stdout_fd = self.wake_fd = -1
            self.exit_fd = None
        for fd in fds:
            if fd is not None and fd >= 0:
                os.close(fd)


class _StderrTail:
    """Reads the agent's stderr as it comes and keeps the last :data:`STDERR_TAIL_BYTES`.

    By default a thread reads it (:meth:`start`), rather than the shells' loops: the sync shell only waits while
    a call is in flight, and an agent that logs between calls would block on the full pipe. The thread owns the
    read end and its stop pipe, and closes both when it ends, so an fd is never closed under a blocked read. A raw
    ``_thread`` thread, as the kill timer: a ``threading.Thread`` (its object, its start handshake, its join)
    costs about 0.2 ms more of CPU per agent, which a batch pays on every turn. Without :meth:`start`, the caller
    (the asyncio shell's event loop, which runs between calls too) calls :meth:`read` whenever the fd is readable,
    and :meth:`stop` reads what is left and closes it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._stop_r = self._stop_w = -1
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._running = threading.Lock()  # held from start() until the thread ends
        self.threaded = False

    def start(self) -> None:
        """Read in a thread of its own from now on.

        Raises:
            OSError: no fd for the stop pipe.
            RuntimeError: no thread could be started.
        """
        self._stop_r, self._stop_w = os.pipe()
        self._running.acquire()
        try:
            start_signal_free_thread(self._main, ())
        except BaseException:
            self._running.release()
            os.close(self._stop_r)
            os.close(self._stop_w)
            self._stop_r = self._stop_w = -1
            raise
        self.threaded = True

    def _main(self) -> None:
        try:
            self._run()
        finally:
            self._running.release()

    def read(self) -> bool:
        """Without a thread: read what is waiting; False at EOF (or once stopped), when watching it is over."""
        if self.threaded or self.fd < 0:
            return False
        return self._read() != 0

    def stop(self, timeout: float | None) -> None:
        """Read what is left and end: the thread (closing the stop pipe wakes it; wait for it), else here.

        Needed because the agent's death alone need not bring EOF: a process that escaped its group can
        hold the pipe open.
        """
        if not self.threaded:
            fd, self.fd = self.fd, -1
            if fd >= 0:
                try:
                    self._drain(fd)
                finally:
                    os.close(fd)
            return
        stop_w, self._stop_w = self._stop_w, -1
        if stop_w >= 0:
            os.close(stop_w)
        if timeout is not None and self._running.acquire(timeout=timeout):
            self._running.release()

    def tail(self) -> bytes:
        with self._lock:
            return bytes(self._buf[-STDERR_TAIL_BYTES:])

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        try:
            while True:
                ready = {fd for fd, _ in poller.poll()}
                if self._stop_r in ready:
                    self._drain(self.fd)
                    return
                if self._read() == 0:
                    return
        finally:
            os.close(self.fd)
            os.close(self._stop_r)

    def _drain(self, fd: int) -> None:
        for _ in range(_FINAL_DRAIN_CHUNKS):
            if self._read(fd) <= 0:
                break

    def _read(self, fd: int | None = None) -> int:
        """Read one chunk into the tail: its size, 0 at EOF, -1 when nothing is waiting."""
        try:
            chunk = os.read(self.fd if fd is None else fd, _READ_CHUNK)
        except BlockingIOError:
            return -1
        with self._lock:
            self._buf += chunk
            # Trim only once twice the size is held, so each byte is moved at most once on average.
            if len(self._buf) > 2 * STDERR_TAIL_BYTES:
                del self._buf[:-STDERR_TAIL_BYTES]
        return len(chunk)


def _live_group_members(pgid: int) -> list[int]:  # noqa: C901  each way a /proc entry can vanish or lie is handled where it is read
    try:
        os.killpg(pgid, 0)  # cheap: no member at all, not even a zombie, means no /proc scan
    except ProcessLookupError:
        return []
    except PermissionError:
        if not _HAVE_PROC:
            return []  # macOS may answer EPERM when only zombies are left
    if not _HAVE_PROC:
        return [pgid]
    live = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
        except OSError:  # gone meanwhile
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        if not data:
            continue
        state, pgrp = _parse_stat(data)
        if pgrp == pgid and state not in (b"Z", b"X"):
            live.append(int(name))
    return live


def _parse_stat(data: bytes) -> tuple[bytes, int]:
    """The state and the process group from a /proc/<pid>/stat line.

    The command name in field 2 is in parentheses and may itself contain spaces and parentheses, so the
    fields are counted from the last ')'.
    """
    fields = data[data.rindex(b")") + 2 :].split(maxsplit=3)
    return fields[0], int(fields[2])


def _stderr_target(stderr: StderrTarget) -> tuple[bool, int]:
    """(keep a tail?, what Popen gets as stderr), checked before any fd is opened."""
    if stderr == "tail":
        return True, subprocess.DEVNULL  # replaced by the pipe's write end
    if stderr in ("discard", subprocess.DEVNULL):
        return False, subprocess.DEVNULL
    if isinstance(stderr, str | bool):  # True would be fd 1, our stdout: surely not meant
        raise ValueError(f"stderr must be 'discard', 'tail', an fd or a file, not {stderr!r}")
    if isinstance(stderr, int):
        # Not PIPE (-1): it would fill with no reader and block the agent; nor STDOUT (-2): it would mix logs into
        # the protocol.
        check_count("stderr (a file descriptor)", stderr, 0, MAX_FD)
        try:
            os.fstat(stderr)
        except OSError:
            raise ValueError(f"stderr is fd {stderr}, which is not open") from None
        return False, stderr
    try:
        return False, stderr.fileno()
    except (AttributeError, OSError) as exc:  # io.UnsupportedOperation is an OSError
        raise ValueError(f"stderr must be a file with a real fd, not {stderr!r}") from exc


def _argv_list(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, str | bytes):
        raise TypeError("argv must be a list of arguments, not one string: tinyacp never runs a shell")
    args = list(argv)
    if not args:
        raise ValueError("argv is empty: it must name the agent's program")
    return args


def _pipe(
    read_to: contextlib.ExitStack,
    write_to: contextlib.ExitStack,
    *,
    child: Literal["read", "write", "both"] | None = None,
) -> tuple[int, int]:
    """A pipe whose ends are closed by the given stacks; ours non-blocking, the ``child`` end(s) blocking.

    The agent uses its end as any stdin or stdout, so it stays blocking; O_NONBLOCK lives in the open file
    description, so setting it on our end does not reach the child's.
    """
    read_end, write_end = os.pipe()  # close-on-exec: no other child of ours inherits it
    read_to.callback(os.close, read_end)
    write_to.callback(os.close, write_end)
    if child not in ("read", "both"):
        os.set_blocking(read_end, False)
    if child not in ("write", "both"):
        os.set_blocking(write_end, False)
    return read_end, write_end


def _popen(
    command: list[str],
    stdin: int,
    stdout: int,
    stderr: int,
    *,
    program: str,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    pass_fds: tuple[int, ...],
) -> subprocess.Popen[bytes]:
    """Start ``command`` leading a new process group, with no fds but 0, 1, 2 and ``pass_fds``; never a shell.

    Raises:
        SpawnError: it could not be started; ``program`` (the agent's, not the supervisor's) names it.
    """
    try:
        return subprocess.Popen(
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            close_fds=True,
            pass_fds=pass_fds,
            process_group=0,
        )
    except OSError as exc:
        raise SpawnError(_spawn_failure(program, cwd, exc)) from exc


def _await_supervisor(status_r: int, program: str, cwd: str | os.PathLike[str] | None) -> None:
    """Wait until the supervisor started the agent; raise SpawnError when it could not."""
    from . import _supervisor

    failure = _supervisor.read_status(status_r)
    if failure is not None:
        raise SpawnError(_spawn_failure(program, cwd, failure)) from failure


class _Keeper:
    """The thread that starts sandboxed agents: it lives as long as the process.

    bwrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the *thread* that forked bwrap ends,
    not the process: an agent started from a worker thread (``asyncio.to_thread``, a pool) would be killed when
    that thread ends. Started from this thread instead, the sandbox dies with our process, and only then.
    """

    lock: ClassVar = threading.Lock()
    pid: ClassVar = -1
    jobs: ClassVar[list[tuple[Callable[[], Any], list[Any], threading.Lock]]] = []
    ready: ClassVar = threading.Semaphore(0)

    @classmethod
    def run(cls, job: Callable[[], T]) -> T:
        done = threading.Lock()
        done.acquire()
        box: list[Any] = []
        with cls.lock:
            if cls.pid != os.getpid():  # first use, or a forked child: the thread is not here
                cls.pid, cls.jobs, cls.ready = os.getpid(), [], threading.Semaphore(0)
                start_signal_free_thread(cls._main, (cls.jobs, cls.ready))
            cls.jobs.append((job, box, done))
            cls.ready.release()
        try:
            done.acquire()
        except BaseException:  # interrupted (Ctrl-C): the start goes on in the keeper; undo it once it is done
            done.acquire()
            if not box[0]:
                cls.undo(box[1])
            raise
        if box[0]:
            raise box[1]
        return box[1]  # type: ignore[no-any-return]

    @staticmethod
    def undo(started: object) -> None:
        if isinstance(started, subprocess.Popen):
            _kill_and_reap(started)

    @staticmethod
    def _main(jobs: list[tuple[Callable[[], Any], list[Any], threading.Lock]], ready: threading.Semaphore) -> None:
        while True:
            ready.acquire()
            with _Keeper.lock:
                job, box, done = jobs.pop(0)
            try:
                box += [False, job()]
            except BaseException as exc:  # handed back to the caller, who raises it
                box += [True, exc]
            done.release()


def _from_keeper(job: Callable[[], T]) -> T:
    """``job()`` run in the keeper thread (:class:`_Keeper`); what it raises is raised here.

    Raises:
        RuntimeError: no thread could be started.
    """
    return _Keeper.run(job)


def _pidfd_open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or no fd to spare: we fall back to sleeping
        return None


def _kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _spawn_failure(program: str, cwd: str | os.PathLike[str] | None, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if cwd is not None and exc.filename is not None and os.fsdecode(exc.filename) == os.fsdecode(cwd):
        return f"cannot start the agent {program!r}: working directory {os.fsdecode(cwd)!r}: {reason}"
    if cwd is not None and os.sep in program and not os.path.isabs(program):
        # The path is looked up from the agent's working directory, not the caller's: say so, or it reads as a lie.
        reason += f" (a relative path: looked up from the agent's working directory {os.fsdecode(cwd)!r})"
    return f"cannot start the agent {program!r}: {reason}"


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Block every signal in this thread meanwhile; a thread started inside inherits the mask and never takes one.

    A signal sent to the process (Ctrl-C from the terminal, SIGTERM) goes to any thread that does not block it. Taken
    by a helper thread, it only marks the Python handler as due: the handler runs in the main thread, and only when
    that thread next runs Python code, so a main thread blocked in ``poll``/``select`` would sleep through it. With
    the helpers blocking every signal, the kernel delivers it to the main thread, whose wait it interrupts.
    """
    # _signal's pthread_sigmask, not signal's: the same call without turning every number of the returned masks
    # into a Signals member. Measured (benchmarks/RESULTS.md, "Private modules"): 1.8 us against about 70 us per
    # block and restore; it runs for each helper thread an agent gets (its stderr reader, its kill timer).
    previous = _signal.pthread_sigmask(signal.SIG_BLOCK, _all_signals())
    try:
        yield
    finally:
        _signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@functools.cache
def _all_signals() -> frozenset[int]:
    return frozenset(_signal.valid_signals())


def start_signal_free_thread(function: Callable[..., object], args: tuple[object, ...]) -> None:
    """Start a raw thread that takes no signal (see :func:`signals_blocked`).

    ``_thread.start_new_thread``, not ``threading.Thread``, for correctness rather than speed: the kill timer is
    started from a signal handler, which may run while the main thread holds threading's own ``_active_limbo_lock``
    (inside ``Thread.start``); a raw thread takes no Python-level lock.

    Raises:
        RuntimeError: no thread could be started.
    """
    with signals_blocked():
        _thread.start_new_thread(function, args)
