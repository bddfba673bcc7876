"""The synchronous client: one agent process, one conversation, one call at a time.

The call driver (:mod:`tinyacp._driver`) does the work, :mod:`tinyacp._shell` runs it for both clients, and every
public call is written once, in :mod:`tinyacp._calls`. This shell only holds the client (a lock), waits
(``select.poll`` on the agent's pipes, its exit and the wake-up pipe, bounded by the call's deadline, blocking
rather than suspending the shared run loop, which :func:`~tinyacp._shell.run_blocking` runs), tears down blocking,
and refuses an observer method that returns an awaitable. :func:`blocking` makes each call a method of
:class:`Client` that waits for the answer; :class:`PromptStream` iterates a streamed prompt in the caller's thread.
"""

from __future__ import annotations

import math
import select
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _calls
from ._calls import method_of, streaming
from ._driver import WaitFor
from ._errors import ClientBusy, ObserverError
from ._options import Options
from ._records import Update
from ._requests import Meta
from ._shell import CallSpec, ShellBase, Steps, StreamBase, run_blocking

__all__ = ["Client", "PromptStream"]

_SIGNAL_CHECK_MS = 200
"""The longest one ``poll`` sleeps in a wait: a signal that arrives after Python last checked for one and before
``poll`` sleeps cannot interrupt it, and its handler (Ctrl-C's ``KeyboardInterrupt``) runs when ``poll`` returns."""

P = ParamSpec("P")
T = TypeVar("T")


def blocking(call: Callable[Concatenate[ShellBase, P], CallSpec[T]]) -> Callable[Concatenate[Client, P], T]:
    """``call`` as a method of :class:`Client`: it waits for the answer and returns it."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(call(self, *args, **kwargs))

    return method_of("Client", call, method)


class PromptStream(StreamBase["Client"]):
    """The updates of one prompt turn, as they arrive; then :attr:`result`.

    ``with client.prompt_stream(session_id, text) as stream: for update in stream: ...`` yields each update of the
    turn's session after the observer recorded it. Buffering is one update: the agent is not read while the
    consumer is busy. The stream runs the same call as :meth:`Client.prompt`, in the consumer's thread, and holds
    the client until the turn ends. Leaving the ``with`` block early (or :meth:`close`) cancels the turn.
    """

    def __iter__(self) -> PromptStream:
        return self

    def __next__(self) -> Update:
        """The next update of the turn's session.

        Raises:
            StopIteration: the turn ended (:attr:`result` holds it).
            AgentTimeout: as :meth:`Client.prompt_stream` says, and every error listed there.
        """
        update = run_blocking(self._next_update())
        if update is None:
            raise StopIteration
        return update

    def close(self) -> None:
        """Stop early: send ``session/cancel`` and read on (recording everything) until the turn ends, for at
        most ``cancel_grace``; past it the agent is torn down. A no-op once the turn ended."""
        run_blocking(self._leave_turn())

    def __enter__(self) -> PromptStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Client(ShellBase):
    """A conversation with one agent process, which the client starts at once and owns until ``close()``.

    Each call's ``Raises`` lists its own errors, then what any call may raise (the agent gone, the deadline, the
    observer failing, a line past a limit, a busy or closed client, a bad ``timeout``), with what each leaves of
    the client.

    Args:
        options: what to start and how.

    Raises:
        MissingDurableObserver: ``options.observer`` is None (nothing is started; the message says what to pass).
        SpawnError: the agent's program could not be started.
        ValueError: ``max_update_bytes`` exceeds the reader's line limit, or ``stderr`` is a bool, a negative
            int or an fd that is not open (nothing is started).
        TypeError: the observer lacks a required method.
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options, cooperative=False)
        self._lock = threading.Lock()
        proc = self._proc
        always = [fd for fd in (proc.wake_fd, proc.exit_fd) if fd is not None]
        self._polls: dict[tuple[bool, bool], select.poll] = {}
        """One poll object per (read, write) a :class:`Wait` asks for, built once."""
        for read, write in ((True, False), (False, True), (True, True)):
            poll = select.poll()
            if read:
                poll.register(proc.stdout_fd, select.POLLIN)
            if write:
                poll.register(proc.stdin_fd, select.POLLOUT)
            for fd in always:
                poll.register(fd, select.POLLIN)
            self._polls[read, write] = poll

    # ----------------------------------------------------------------------------------------------------------
    # The calls (each written once, in :mod:`tinyacp._calls`), and what only this shell has.

    initialize = blocking(_calls.initialize)
    authenticate = blocking(_calls.authenticate)
    logout = blocking(_calls.logout)
    new_session = blocking(_calls.new_session)
    load_session = blocking(_calls.load_session)
    resume_session = blocking(_calls.resume_session)
    fork_session = blocking(_calls.fork_session)
    close_session = blocking(_calls.close_session)
    delete_session = blocking(_calls.delete_session)
    list_sessions = blocking(_calls.list_sessions)
    set_mode = blocking(_calls.set_mode)
    set_config_option = blocking(_calls.set_config_option)
    set_model = blocking(_calls.set_model)
    prompt = blocking(_calls.prompt)
    prompt_stream = streaming("Client", PromptStream, _calls.prompt_stream)
    request = blocking(_calls.request)
    notify = blocking(_calls.notify)

    def cancel(self, session_id: str, *, meta: Meta | None = None) -> None:
        """Ask the agent to stop the turn: one ``session/cancel`` (``meta`` as ``_meta``). Safe from another
        thread.

        After it, permission requests of that turn are answered ``cancelled``, and ``prompt`` returns the
        agent's final response.

        Raises:
            TransferLimitExceeded: the notification would be longer than ``max_message_bytes`` (not sent).
            TypeError: ``meta`` is not a dict (not sent).
            ClientClosed: the client is closed.
            AgentExited: with no call in flight, writing it failed (the agent is torn down).
            ObserverError: with no call in flight, recording it failed (the agent is torn down).
        """
        self._queue_cancel(session_id, meta)
        self._flush_if_idle()

    def close(self) -> None:
        """Tear down: record what the agent already sent (up to 1 MiB), then stop its whole group and reap it.

        Idempotent. From another thread while a call is in flight, it kills the agent and waits for the call.

        Raises:
            ObserverError: recording a last message failed (the teardown still happened).
            ClientBusy: called from inside an observer method of this client (nothing is done: the call in
                flight goes on; use ``kill()`` to stop it from there).
        """
        self._refuse_reentry()
        self._abandon_idle_stream()
        if not self._lock.acquire(blocking=False):
            self.kill()
            self._lock.acquire()
        try:
            if not self._closed:
                run_blocking(self._run(self._closing()))
        finally:
            self._release()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------------------------
    # The shell: hold the client with a lock, wait with poll, refuse an observer's awaitable.

    def _call(self, spec: CallSpec[T]) -> T:
        """Run one request through the driver and return its decoded answer."""
        try:
            return self._answer(run_blocking(self._run(self._calling(spec))))
        finally:
            self._flush_if_idle()

    def _hold(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise ClientBusy("another call is in flight on this client")

    def _release(self) -> None:
        self._lock.release()

    def _current(self) -> object:
        return threading.get_ident()

    async def _await(self, awaitable: Awaitable[Any]) -> Any:
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()  # never awaited: no "coroutine was never awaited" warning
        raise ObserverError(
            "an observer method returned an awaitable (a coroutine function?); the sync Client cannot await it "
            "(use AsyncClient)"
        )

    async def _tear_down(self) -> None:
        self._teardown()

    async def _checkpoint(self) -> None:
        """Nothing: the sync driver is not cooperative, nothing else runs on this thread."""

    async def _interrupted(self, steps: Steps[Any], exc: BaseException) -> bool:
        return False  # Ctrl-C is thrown into the call, which tears the agent down and raises it

    async def _wait(self, wait: WaitFor) -> bool:
        """Block (never suspending the run) until what ``wait`` asks for is ready, someone wakes us or the agent
        exits; at most until the deadline. True when the agent's exit was seen."""
        wait_for_events = self._polls[wait.read, wait.write].poll
        while True:
            remaining = wait.deadline - time.monotonic()
            timeout = remaining if remaining == math.inf else max(0, math.ceil(remaining * 1000))
            ready = wait_for_events(min(timeout, _SIGNAL_CHECK_MS))
            if ready or timeout <= _SIGNAL_CHECK_MS:
                break
            # Nothing yet: back to Python for a moment, where a signal that landed just before poll() slept (too
            # late to interrupt it) has its handler run, so Ctrl-C raises KeyboardInterrupt within this slice.
        proc = self._proc
        gone = False
        for fd, _ in ready:
            if fd == proc.wake_fd:
                proc.drain_wake()
            elif fd == proc.exit_fd:
                gone = True
                for poll in self._polls.values():
                    poll.unregister(fd)
        return gone

    def _flush_if_idle(self) -> None:
        """Write queued cancels when no call is in flight to do it."""
        if self._driver.cancels and self._lock.acquire(blocking=False):
            try:
                run_blocking(self._run(self._cancelling()))
            finally:
                self._release()
