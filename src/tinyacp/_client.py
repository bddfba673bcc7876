"""The synchronous client: one agent process, one conversation, one call at a time.

The call driver (:mod:`tinyacp._driver`) does the work, and every public call is written once, in
:mod:`tinyacp._calls`; this shell only waits (``select.poll`` on the agent's pipes, its exit and the wake-up pipe,
bounded by the call's deadline) and calls the observer plainly. :func:`blocking` makes each call a method of
:class:`Client` that waits for the answer.
"""

from __future__ import annotations

import math
import select
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _calls
from ._calls import CallSpec, method_of
from ._driver import Driven, Wait
from ._errors import ClientBusy, ObserverError
from ._options import Options
from ._shell import ShellBase

__all__ = ["Client"]

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


class Client(ShellBase):
    """A conversation with one agent process, which the client starts at once and owns until ``close()``.

    Every call may also raise, besides what its own ``Raises`` says:

    - :class:`AgentExited`: the agent exited, closed its input or output, or ``kill()`` stopped it (what it wrote
      before is recorded first; the agent is torn down);
    - :class:`AgentTimeout`: the deadline passed (a call other than a prompt sends ``$/cancel_request`` for it,
      best effort, and leaves the client usable);
    - :class:`ObserverError`: an observer method, or its ``flush``, raised (the agent is torn down);
    - :class:`ReaderExhaustion`: a line passed the reader's limit (the agent is torn down);
    - :class:`TransferLimitExceeded`: an update passed ``max_update_bytes`` or ``max_updates``;
    - :class:`ProtocolViolation`: the answer cannot be used (the client stays usable);
    - :class:`ClientBusy`: another call is in flight, or the call is made from inside an observer method;
    - :class:`ClientClosed`: the client is closed;
    - :class:`ValueError`: ``timeout`` is not a finite, non-negative number (nothing is written).

    Args:
        options: what to start and how.

    Raises:
        MissingDurableObserver: ``options.observer`` is None (nothing is started; the message says what to pass).
        SpawnError: the agent's program could not be started.
        ValueError: ``max_update_bytes`` exceeds the reader's line limit.
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
    close_session = blocking(_calls.close_session)
    delete_session = blocking(_calls.delete_session)
    list_sessions = blocking(_calls.list_sessions)
    set_mode = blocking(_calls.set_mode)
    set_config_option = blocking(_calls.set_config_option)
    set_model = blocking(_calls.set_model)
    prompt = blocking(_calls.prompt)

    def cancel(self, session_id: str) -> None:
        """Ask the agent to stop the turn: one ``session/cancel``. Safe from another thread.

        After it, permission requests of that turn are answered ``cancelled``, and ``prompt`` returns the
        agent's final response.

        Raises:
            TransferLimitExceeded: the notification would be longer than ``max_message_bytes`` (not sent).
            ClientClosed: the client is closed.
            AgentExited, ObserverError: with no call in flight, writing or recording it failed (the agent is
                torn down).
        """
        self._queue_cancel(session_id)
        self._flush_if_idle()

    def close(self) -> None:
        """Tear down: record what the agent already sent (up to 1 MiB), then stop its whole group and reap it.

        Idempotent. From another thread while a call is in flight, it kills the agent and waits for the call.

        Raises:
            ObserverError: recording a last message failed (the teardown still happened).
            ClientBusy: called from inside an observer method of this client (nothing is done: the call in
                flight goes on; use ``kill()`` to stop it from there).
        """
        if self._reentered():
            raise ClientBusy("close() from inside an observer method would wait for itself; use kill()")
        if not self._lock.acquire(blocking=False):
            self.kill()
            self._lock.acquire()
        self._owner = threading.get_ident()
        try:
            if self._closed:
                return
            try:
                self._run(self._driver.drain())
            except ObserverError:
                raise
            except Exception as exc:  # the agent's last words broke a rule: we are closing anyway
                self._failure = exc
            finally:
                self._teardown()
        finally:
            self._owner = None
            self._lock.release()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------------------------
    # The shell: hold the client, wait, call the observer plainly.

    def _call(self, spec: CallSpec[T]) -> T:
        """Run one request through the driver and return its decoded answer."""
        self._hold()
        try:
            self._ensure_open()
            deadline = self._deadline(spec.timeout)
            return self._guarded(self._driver.call(spec.build(), deadline, prompt=spec.prompt), spec.prompt)
        finally:
            self._release()
            self._flush_if_idle()

    def _hold(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise ClientBusy("another call is in flight on this client")
        self._owner = threading.get_ident()

    def _release(self) -> None:
        self._owner = None
        self._lock.release()

    def _guarded(self, driven: Driven[T], prompt: bool) -> T:
        """Run ``driven``; on failure tear down as the failure requires."""
        try:
            return self._run(driven)
        except BaseException as exc:
            error, teardown = self._settle(exc, prompt)
            if teardown:
                self._teardown()
            raised = self._raised(error)
            if raised is exc:
                raise
            raise raised from None

    def _run(self, driven: Driven[T]) -> T:
        """Run a driver generator to its end, waiting as it asks."""
        wait = self._driver.wait
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    action = driven.send(value) if error is None else driven.throw(error)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]  # the generator returns T
                value = error = None
                if action is wait:
                    value = self._wait(wait)
                else:
                    error = _refused(action)
        finally:
            driven.close()

    def _wait(self, wait: Wait) -> bool:
        """Block until what ``wait`` asks for is ready, someone wakes us or the agent exits; at most until the
        deadline. True when the agent's exit was seen."""
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
        if not self._driver.cancels or not self._lock.acquire(blocking=False):
            return
        self._owner = threading.get_ident()
        try:
            if self._closed:
                self._driver.cancels.clear()
                return
            self._guarded(self._driver.send_cancels(time.monotonic() + self.options.cancel_grace), False)
        finally:
            self._release()


def _refused(awaitable: object) -> ObserverError:
    """An observer method gave the sync client an awaitable: close it unawaited and refuse it."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
    return ObserverError(
        "an observer method returned an awaitable (a coroutine function?); the sync Client cannot await it "
        "(use AsyncClient)"
    )
