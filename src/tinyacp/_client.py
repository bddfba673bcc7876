"""The synchronous client: one agent process, one conversation, one call at a time.

The call driver (:mod:`tinyacp._driver`) does the work; this shell only waits (``select.poll`` on the agent's
pipes, its exit and the wake-up pipe, bounded by the call's deadline) and calls the observer plainly.
"""

from __future__ import annotations

import math
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from ._conversation import Call, Meta
from ._driver import Driven, Wait
from ._errors import ClientBusy, ObserverError
from ._messages import (
    AnyMcpServer,
    ConfigOption,
    Initialize,
    LoadedSession,
    PromptContent,
    Session,
    SessionPage,
    SystemPrompt,
)
from ._options import Options
from ._records import PromptResult
from ._shell import ShellBase

__all__ = ["Client"]

T = TypeVar("T")


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
    - :class:`MissingDurableObserver`: an update or a permission request arrived and there is no observer;
    - :class:`ProtocolViolation`: the answer cannot be used (the client stays usable);
    - :class:`ClientBusy`: another call is in flight, or the call is made from inside an observer method;
    - :class:`ClientClosed`: the client is closed;
    - :class:`ValueError`: ``timeout`` is not a finite, non-negative number (nothing is written).

    Args:
        options: what to start and how.

    Raises:
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
    # The calls.

    def initialize(self, *, meta: Meta | None = None, timeout: float | None = None) -> Initialize:
        """Introduce ourselves: protocol version 1, our client info and capabilities (``meta`` as ``_meta``).

        Raises:
            UnsupportedProtocolVersion: the agent speaks another version (it is torn down).
            RequestError: the agent answered with an error (AuthRequired for -32000).
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        return self._call(lambda: self._core.initialize(meta), timeout)

    def authenticate(self, method_id: str, *, meta: Meta | None = None, timeout: float | None = None) -> None:
        """Log in with one of the methods the agent offered at ``initialize`` (``meta`` may hold Secrets).

        Raises:
            NotAdvertised: the agent did not offer ``method_id``, or it is a ``terminal`` method (nothing written).
            RequestError: the agent refused (the client stays usable).
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        self._call(lambda: self._core.authenticate(method_id, meta), timeout)

    def logout(self, *, timeout: float | None = None) -> None:
        """Log out (only if the agent advertised ``auth.logout``).

        Raises:
            NotAdvertised: the agent did not advertise logout (nothing written).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        self._call(self._core.logout, timeout)

    def new_session(
        self,
        cwd: str | os.PathLike[str],
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] = (),
        timeout: float | None = None,
    ) -> Session:
        """Open a session whose working directory is ``cwd`` (made absolute).

        Raises:
            NotAdvertised: a system prompt or additional directories the agent did not advertise (nothing written).
            AuthRequired: the agent wants ``authenticate`` first (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        build = self._setup(
            self._core.new_session,
            (),
            cwd,
            mcp_servers=mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
        )
        return self._call(build, timeout)

    def load_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str],
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] = (),
        timeout: float | None = None,
    ) -> LoadedSession:
        """Load an earlier session: the agent replays its history as updates (each to ``on_update``, each
        counted against ``TransferLimits``), then answers.

        Raises:
            NotAdvertised: the agent did not advertise ``loadSession`` (or the extras asked for); nothing written.
            SessionNotFound: the agent does not know the session (the client stays usable).
            AuthRequired: the agent wants `authenticate` first (the client stays usable).
            RequestError: the agent answered with an error.
            TransferLimitExceeded: a message broke a transfer limit.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            MissingDurableObserver: an update or permission request came and there is no observer.
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        build = self._setup(
            self._core.load_session,
            (session_id,),
            cwd,
            mcp_servers=mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
        )
        return self._call(build, timeout)

    def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str],
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] = (),
        timeout: float | None = None,
    ) -> Session:
        """Resume an earlier session without a replay of its history.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.resume`` (or the extras asked for);
                nothing written.
            SessionNotFound: the agent does not know the session (the client stays usable).
            AuthRequired: the agent wants `authenticate` first (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        build = self._setup(
            self._core.resume_session,
            (session_id,),
            cwd,
            mcp_servers=mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
        )
        return self._call(build, timeout)

    def close_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """Ask the agent to close a session (free what it holds for it).

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.close`` (nothing written).
            SessionNotFound: the agent does not know the session (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        self._call(lambda: self._core.close_session(session_id), timeout)

    def delete_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """Ask the agent to delete a session from its list.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.delete`` (nothing written).
            SessionNotFound: the agent does not know the session (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        self._call(lambda: self._core.delete_session(session_id), timeout)

    def list_sessions(
        self, cwd: str | os.PathLike[str] | None = None, cursor: str | None = None, *, timeout: float | None = None
    ) -> SessionPage:
        """One page of the agent's sessions, those in ``cwd`` only when given; pass ``next_cursor`` for more.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.list`` (nothing written).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        path = None if cwd is None else self._absolute(cwd)
        return self._call(lambda: self._core.list_sessions(path, cursor), timeout)

    def set_mode(
        self,
        session_id: str,
        mode_id: str,
        *,
        meta: Meta | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Switch the session's mode; ``force=True`` sends a mode the session did not list (recorded as forced).

        Raises:
            NotAdvertised: ``mode_id`` is not among the session's available modes (nothing written).
            SessionNotFound: the agent does not know the session (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        self._call(lambda: self._core.set_mode(session_id, mode_id, meta=meta, force=force), timeout)

    def set_config_option(
        self,
        session_id: str,
        config_id: str,
        value: str | bool,
        *,
        meta: Meta | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> tuple[ConfigOption, ...]:
        """Set a config option (a value id for a select option, a bool for a boolean one); returns all options.

        Raises:
            NotAdvertised: an unknown ``config_id``, an option of an unknown type, or a value the option does
                not offer (nothing written; ``force=True`` sends it anyway).
            TypeError: ``value`` is neither a str nor a bool.
            SessionNotFound: the agent does not know the session (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        return self._call(
            lambda: self._core.set_config_option(session_id, config_id, value, meta=meta, force=force), timeout
        )

    def set_model(
        self,
        session_id: str,
        model_id: str,
        *,
        meta: Meta | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Choose the session's model: through its ``model`` config option, else the legacy ``session/set_model``
        (only for a model the session listed in ``models``).

        Raises:
            NotAdvertised: the session offers no such model (nothing written; ``force=True`` sends it anyway).
            SessionNotFound: the agent does not know the session (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            AgentTimeout: the deadline passed.
            ObserverError: the observer raised (the agent is torn down).
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
            TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
            MissingDurableObserver: an update or permission request came and there is no observer.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        self._call(lambda: self._core.set_model(session_id, model_id, meta=meta, force=force), timeout)

    def prompt(
        self,
        session_id: str,
        content: str | Sequence[PromptContent],
        *,
        meta: Meta | None = None,
        timeout: float | None = None,
    ) -> PromptResult:
        """Send a prompt and handle the turn until the agent's final response.

        At the deadline the client sends one ``session/cancel`` and waits up to ``Options.cancel_grace`` for
        the agent's answer; the result then has ``timed_out=True``. A reply that reaches a reply limit is cut
        there (``result.overflow``) and the turn cancelled the same way. ``result.usage`` holds what the turn
        used, when the agent said.

        Raises:
            UnsupportedContent: a block the agent did not advertise (nothing is written).
            TransferLimitExceeded: the prompt is too long (nothing is written), or an update broke a limit.
            AgentTimeout: no answer even after the cancel (the agent is torn down).
            AuthRequired: the agent wants `authenticate` first (the client stays usable).
            SessionNotFound: the agent does not know the session (the client stays usable).
            RequestError: the agent answered with an error.
            AgentExited: the agent exited or stopped reading its input (it is torn down).
            ReaderExhaustion: the agent sent a line longer than the reader's limit (it is torn down).
            ObserverError: the observer raised (the agent is torn down).
            MissingDurableObserver: an update or permission request came and there is no observer.
            ClientBusy: another call is in flight.
            ClientClosed: the client was closed or torn down.
            ProtocolViolation: the answer cannot be used (the client stays usable).
            ValueError: ``timeout`` is not a finite, non-negative number (nothing is written).
        """
        return self._call(lambda: self._core.prompt(session_id, content, meta), timeout, prompt=True)

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

    def kill(self) -> None:
        """The hard stop: SIGTERM to the agent's whole group now, SIGKILL after ``kill_grace``.

        Safe from any thread and from a signal handler. A call in flight raises :class:`AgentExited`.
        """
        self._request_kill()

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
            self._request_kill()
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

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<tinyacp.Client pid={self.pid} epoch={self.epoch} {state}>"

    # ----------------------------------------------------------------------------------------------------------
    # The shell: hold the client, wait, call the observer plainly.

    def _call(self, build: Callable[[], Call[T]], timeout: float | None, *, prompt: bool = False) -> T:
        """Run one request through the driver and return its decoded answer."""
        self._hold()
        try:
            self._ensure_open()
            deadline = self._deadline(timeout)
            return self._guarded(self._driver.call(build(), deadline, prompt=prompt), prompt)
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
        remaining = wait.deadline - time.monotonic()
        timeout = None if remaining == math.inf else max(0, math.ceil(remaining * 1000))
        proc = self._proc
        gone = False
        for fd, _ in self._polls[wait.read, wait.write].poll(timeout):
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
