"""The supervisor behind ``Options(supervise=True)``: a parent for the agent that no descendant outlives (Linux).

A process group is not a container. A tool that calls ``setsid`` (a daemonising tool, a double fork into a new
session) leaves the agent's group, and no group signal reaches it again. The supervisor closes that gap with the
one mechanism Linux gives an unprivileged process: it makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so an orphan anywhere below it is re-parented to it rather than to init,
and every descendant, escaped or not, is found by walking the parent links in /proc.

The client starts ``python -I -S <this file> --grace G --parent PID --status-fd FD -- ARGV...`` in the agent's
place, as the leader of the new process group. The supervisor starts ARGV as its child in that same group, with
the same stdin, stdout and stderr and the environment the client passed, and then:

- tells the client on FD whether the agent started (``ok``) or why not (``exec <errno>``), so a missing program
  is still a :class:`~tinyacp.SpawnError` in the client's constructor; it keeps no copy of the agent's stdin or
  stdout (the client still sees the agent close its output), and never writes to stdout;
- while the agent runs, only reaps the orphans that die;
- when the agent exits, or the client process is gone: SIGTERM (and SIGCONT) to every descendant left, SIGKILL
  after half of ``--grace`` to those still there, and reaps until it has no child; then it exits as the agent
  did: the same exit code, or the same signal raised on itself (with core dumps off), so the client's
  ``returncode`` and :class:`~tinyacp.AgentExited` read as they would without it;
- on SIGTERM, SIGINT or SIGHUP (the client's teardown signals the whole group, so the agent and the tools in the
  group get theirs from the client): SIGTERM to every descendant *outside* the group at once, and SIGKILL to
  those after half the grace, then at every sweep (every 20 ms) until the agent is gone. Half, because the
  client sends SIGKILL to the group after the whole grace, and that ends the supervisor too.

A pid read from /proc is signalled only through a pidfd opened on it and checked against the start time read
with it, so a pid reused meanwhile by an unrelated process is never signalled.

This file is run as a script with ``-I -S`` and imports nothing of tinyacp's (only the standard library), so
neither the agent's environment nor its working directory can stop it from starting.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing: 4.2 ms more per supervised agent's start, on a 7.5 ms import (benchmarks/RESULTS.md)
    from collections.abc import Sequence
    from typing import NoReturn

__all__ = ["available", "command", "read_status"]

_PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# What subprocess's restore_signals resets: Python ignores these, and an ignored disposition survives exec.
_RESTORE_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
# While stopping, look for new descendants this often: the window in which a process that escapes the group
# during the grace could still be missed when the client's SIGKILL ends the supervisor.
_SWEEP = 0.02
# After SIGKILL, how long to wait for the last descendants to be reaped; only a process stuck in the kernel
# (uninterruptible sleep) takes longer, and then the supervisor exits rather than hang the client's teardown.
_KILL_WAIT = 5.0


# ----------------------------------------------------------------------------------------------------------------
# The client's side.


def available() -> str | None:
    """Why ``supervise=True`` cannot work here, or None when it can (Linux, /proc, a Python executable)."""
    if not sys.platform.startswith("linux"):
        return f"supervise=True needs Linux (PR_SET_CHILD_SUBREAPER and /proc); this is {sys.platform}"
    if not os.path.exists("/proc/self/stat"):
        return "supervise=True needs /proc, which is not mounted"
    if not sys.executable:
        return "supervise=True needs a Python executable to run the supervisor, and sys.executable is empty"
    return None


def command(argv: Sequence[str], *, grace: float, status_fd: int) -> list[str]:
    """The supervisor's argv, which starts ``argv`` under it."""
    return [
        sys.executable,
        "-I",  # no PYTHON* variables, no user site, no script directory on sys.path: the agent's env is not ours
        "-S",  # no site: faster, and nothing of the environment's packages is imported
        os.path.abspath(__file__),
        "--grace",
        repr(float(grace)),
        "--parent",
        str(os.getpid()),
        "--status-fd",
        str(status_fd),
        "--",
        *argv,
    ]


def read_status(fd: int) -> OSError | None:
    """Wait for the supervisor to start the agent: None if it did, else the error that stopped it.

    ``fd`` is the blocking read end of the status pipe. The supervisor writes ``ok`` once the agent runs, or
    what failed; EOF with neither means it ended before it could say (a crash, or a stop signal).
    """
    data = b""
    while chunk := os.read(fd, 256):
        data += chunk
    if data == b"ok":
        return None
    if not data:
        return OSError(errno.EIO, "the supervisor ended before it started the agent (its error is on stderr)")
    stage, _, number = data.decode("ascii", "replace").partition(" ")
    try:
        code = int(number)
    except ValueError:
        return OSError(errno.EIO, f"the supervisor failed: {data[:200]!r}")
    if stage == "exec":
        return OSError(code, os.strerror(code))
    return OSError(code, f"the supervisor could not become a subreaper: {os.strerror(code)}")


# ----------------------------------------------------------------------------------------------------------------
# The supervisor process.


class _Supervisor:
    def __init__(self, argv: list[str], *, grace: float, parent: int, status_fd: int) -> None:
        self.argv = argv
        self.grace = grace
        self.parent = parent
        self.status_fd = status_fd
        self.pid = os.getpid()
        self.pgrp = os.getpgrp()
        self.agent = -1
        self.agent_status: int | None = None
        self.stop_signal: int | None = None  # the first stop signal we got
        self.parent_gone = False
        self.deadline: float | None = None  # when the descendants we stop get SIGKILL
        self.termed: set[tuple[int, int]] = set()  # (pid, start time) sent SIGTERM by us
        self.parent_fd: int | None = None
        self.wake_r, self.wake_w = os.pipe()

    def run(self) -> NoReturn:
        os.set_inheritable(self.status_fd, False)
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        for sig in _STOP_SIGNALS:
            signal.signal(sig, self._on_stop_signal)
        signal.signal(signal.SIGCHLD, lambda sig, frame: None)  # a handler, so the wake-up fd hears of it
        self._watch_parent()
        try:
            _become_subreaper()
        except OSError as exc:
            self._fail("subreaper", exc)
        if self.stop_signal is not None or self.parent_gone:
            _exit_like(self.stop_signal or signal.SIGTERM)  # stopped before the agent existed: nothing to do
        try:
            self.agent = os.posix_spawnp(
                self.argv[0], self.argv, _original_environment(), setsigdef=(*_RESTORE_SIGNALS, *_STOP_SIGNALS)
            )
        except OSError as exc:
            self._fail("exec", exc)
        os.write(self.status_fd, b"ok")
        os.close(self.status_fd)
        # Keep no copy of the agent's stdin and stdout: the client must see the agent close its output, and
        # the agent must see EOF when the client closes its input.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        try:
            self._loop()
        except BaseException:
            self._kill_everything()
            raise
        assert self.agent_status is not None
        _exit_as(self.agent_status)

    def _fail(self, stage: str, exc: OSError) -> NoReturn:
        os.write(self.status_fd, f"{stage} {exc.errno or errno.EIO}".encode())
        os._exit(127)

    def _on_stop_signal(self, sig: int, frame: object) -> None:
        if self.stop_signal is None:
            self.stop_signal = sig

    def _watch_parent(self) -> None:
        try:
            self.parent_fd = os.pidfd_open(self.parent)
        except ProcessLookupError:
            self.parent_gone = True
            return
        except OSError:  # no pidfd (Linux < 5.3): the client's death is then noticed only through the agent
            return
        if os.getppid() != self.parent:  # the client died before the pidfd was open; its pid may be reused
            self.parent_gone = True

    def _loop(self) -> None:
        poller = select.poll()
        poller.register(self.wake_r, select.POLLIN)
        if self.parent_fd is not None:
            poller.register(self.parent_fd, select.POLLIN)
        while True:
            self._reap()
            stopping = self._stopping()
            if stopping and self.agent_status is not None and not self._has_children():
                return
            if stopping:
                self._sweep()
                # Sweep every _SWEEP, and once more right at the deadline (where SIGKILL starts).
                until_deadline = -1.0 if self.deadline is None else self.deadline - time.monotonic()
                wait = min(_SWEEP, until_deadline) if until_deadline > 0 else _SWEEP
                timeout_ms: int | None = int(wait * 1000) + 1
            else:
                timeout_ms = None
            for fd, _ in poller.poll(timeout_ms):
                if fd == self.wake_r:
                    _drain(self.wake_r)
                elif fd == self.parent_fd:
                    self.parent_gone = True
                    poller.unregister(fd)

    def _stopping(self) -> bool:
        """Whether a stop began; starts the grace clock on the first call that sees one."""
        if self.agent_status is None and self.stop_signal is None and not self.parent_gone:
            return False
        if self.deadline is None:
            self.deadline = time.monotonic() + self.grace / 2
        return True

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.agent:
                self.agent_status = status

    def _has_children(self) -> bool:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == self.agent:
            self.agent_status = status
        return True

    def _sweep(self) -> None:
        """Signal the descendants this stop is about: SIGTERM once each, SIGKILL from the deadline on."""
        whole_tree = self.agent_status is not None or self.parent_gone
        # A stop signal reached the group (the client signals the group), so its members have had their SIGTERM.
        group_termed = self.stop_signal is not None
        kill = self.deadline is not None and time.monotonic() >= self.deadline
        for pid, pgrp, start in _descendants(self.pid):
            in_group = pgrp == self.pgrp
            if in_group and not whole_tree:
                continue  # the agent and its group are the client's to stop, with the whole grace
            if kill:
                _send(pid, start, signal.SIGKILL)
            elif (pid, start) not in self.termed:
                self.termed.add((pid, start))
                if not (in_group and group_termed):
                    _send(pid, start, signal.SIGTERM)
                    _send(pid, start, signal.SIGCONT)
        if kill and whole_tree:
            self._wait_for_the_last()

    def _wait_for_the_last(self) -> None:
        """Everything left got SIGKILL: reap until no child is left (orphans of the killed come to us too)."""
        give_up = time.monotonic() + _KILL_WAIT
        while self._has_children() and time.monotonic() < give_up:
            for pid, _, start in _descendants(self.pid):
                _send(pid, start, signal.SIGKILL)
            self._reap()
            time.sleep(0.001)
        self._reap()

    def _kill_everything(self) -> None:
        """The supervisor itself failed: leave nothing behind."""
        for pid, _, start in _descendants(self.pid):
            _send(pid, start, signal.SIGKILL)


def _become_subreaper() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _original_environment() -> dict[bytes, bytes]:
    """The environment the client passed, as the kernel keeps it.

    Not ``os.environ``: Python may have added to it at start-up (``LC_CTYPE=C.UTF-8`` under the C locale,
    PEP 538), and the agent must get exactly what the client asked for.
    """
    with open("/proc/self/environ", "rb") as environ:
        data = environ.read()
    env: dict[bytes, bytes] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env.setdefault(name, value)  # the first of duplicates, as getenv() finds it
    return env


def _stat(pid: int) -> tuple[bytes, int, int, int] | None:
    """(state, ppid, process group, start time) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold anything: count from the last ')'.
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _descendants(root: int) -> list[tuple[int, int, int]]:
    """(pid, process group, start time) of every live process below ``root`` (zombies left out)."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[bytes, int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None:
            continue
        state, ppid, pgrp, start = stat
        children.setdefault(ppid, []).append(pid)
        info[pid] = (state, pgrp, start)
    found = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            stack.append(child)
            state, pgrp, start = info[child]
            if state not in (b"Z", b"X"):
                found.append((child, pgrp, start))
    return found


def _send(pid: int, start: int, sig: int) -> None:
    """Signal the process ``pid`` only if it is still the one that started at ``start``."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfd: check and signal by pid, which leaves a tiny window for a reused pid
        stat = _stat(pid)
        if stat is not None and stat[3] == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return
    try:
        stat = _stat(pid)
        if stat is not None and stat[3] == start:
            signal.pidfd_send_signal(pidfd, sig)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _exit_as(status: int) -> NoReturn:
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    _exit_like(-code)


def _exit_like(sig: int) -> NoReturn:
    """End by ``sig``, as the agent did: the client then reads the same returncode as without a supervisor."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the agent's crash is not ours to dump
    signal.set_wakeup_fd(-1)
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two have no handler to reset, and cannot be blocked
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)  # a signal whose default is not to end a process (none that ends an agent)


def _parse(args: list[str]) -> tuple[float, int, int, list[str]]:
    options: dict[str, str] = {}
    while args and args[0] != "--":
        if len(args) < 2 or args[0] not in ("--grace", "--parent", "--status-fd"):
            raise SystemExit(f"usage: {__file__} --grace G --parent PID --status-fd FD -- ARGV...")
        options[args[0]] = args[1]
        args = args[2:]
    argv = args[1:]
    if not argv or len(options) != 3:
        raise SystemExit(f"usage: {__file__} --grace G --parent PID --status-fd FD -- ARGV...")
    return float(options["--grace"]), int(options["--parent"]), int(options["--status-fd"]), argv


def main() -> NoReturn:
    grace, parent, status_fd, argv = _parse(sys.argv[1:])
    _Supervisor(argv, grace=grace, parent=parent, status_fd=status_fd).run()


if __name__ == "__main__":
    main()
