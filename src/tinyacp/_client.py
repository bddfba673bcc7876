"""The synchronous client: one agent process, one conversation, one call at a time.

This shell only moves bytes (non-blocking pipes, ``select.poll`` with the call's deadline) and calls the observer;
every decision is the core's (:mod:`tinyacp._conversation`).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from ._conversation import Done, Meta, Record, Step
from ._errors import AgentExited, AgentTimeout, ClientBusy, ObserverError, ProtocolViolation, RequestError
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
from ._records import OutgoingMessage, PromptResult, Update
from ._shell import ShellBase, observer_failed
from .reader import ReaderEvent

__all__ = ["Client"]

T = TypeVar("T")
_POLLIN = select.POLLIN | select.POLLHUP | select.POLLERR
_KEEP_CLIENT = (RequestError, ProtocolViolation)
"""Errors about one answer: the stream is still in step, so the client stays usable."""


class Client(ShellBase):
    """A conversation with one agent process, which the client starts at once and owns until ``close()``.

    Args:
        options: what to start and how.

    Raises:
        SpawnError: the agent's program could not be started.
        ValueError: ``max_update_bytes`` exceeds the reader's line limit.
        TypeError: the observer lacks a required method.
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._lock = threading.Lock()
        proc = self._proc
        self._read_poll = select.poll()
        for fd in (proc.stdout_fd, proc.wake_fd, proc.exit_fd):
            if fd is not None:
                self._read_poll.register(fd, select.POLLIN)
        self._write_poll = select.poll()
        self._write_poll.register(proc.stdin_fd, select.POLLOUT)
        for fd in (proc.wake_fd, proc.exit_fd):
            if fd is not None:
                self._write_poll.register(fd, select.POLLIN)

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
        """
        return self._call(lambda: self._core.initialize(meta), timeout)  # type: ignore[return-value]

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
        """
        path, extra = self._absolute(cwd), self._absolute_all(additional_directories)
        return self._call(  # type: ignore[return-value]
            lambda: self._core.new_session(
                path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
            ),
            timeout,
        )

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
        """
        path, extra = self._absolute(cwd), self._absolute_all(additional_directories)
        return self._call(  # type: ignore[return-value]
            lambda: self._core.load_session(
                session_id, path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
            ),
            timeout,
        )

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
        """
        path, extra = self._absolute(cwd), self._absolute_all(additional_directories)
        return self._call(  # type: ignore[return-value]
            lambda: self._core.resume_session(
                session_id, path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
            ),
            timeout,
        )

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
        """
        path = None if cwd is None else self._absolute(cwd)
        return self._call(lambda: self._core.list_sessions(path, cursor), timeout)  # type: ignore[return-value]

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
        """
        return self._call(  # type: ignore[return-value]
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
        """
        return self._call(lambda: self._core.prompt(session_id, content, meta), timeout, prompt=True)  # type: ignore[return-value]

    def cancel(self, session_id: str) -> None:
        """Ask the agent to stop the turn: one ``session/cancel``. Safe from another thread.

        After it, permission requests of that turn are answered ``cancelled``, and ``prompt`` returns the
        agent's final response.

        Raises:
            TransferLimitExceeded: the notification would be longer than ``max_message_bytes`` (not sent).
            ClientClosed: the client is closed.
        """
        self._queue_cancel(session_id)
        self._flush_if_idle()

    def kill(self) -> None:
        """The hard stop: SIGTERM to the agent's whole group now, SIGKILL after ``kill_grace``.

        Safe from any thread and from a signal handler. A call in flight raises :class:`AgentExited`.
        """
        self._request_kill()

    def close(self) -> None:
        """Tear down: record what the agent already sent, then stop its whole group and reap it. Idempotent.

        Raises:
            ObserverError: recording a last message failed (the teardown still happened).
        """
        if not self._lock.acquire(blocking=False):
            self._request_kill()
            self._lock.acquire()
        try:
            if self._closed:
                return
            try:
                self._drain_available()
            except ObserverError:
                raise
            except Exception as exc:  # the agent's last words broke a rule: we are closing anyway
                self._failure = exc
            finally:
                self._teardown()
        finally:
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
    # The shell.

    def _call(self, build: Callable[[], OutgoingMessage], timeout: float | None, *, prompt: bool = False) -> object:
        if not self._lock.acquire(blocking=False):
            raise ClientBusy("another call is in flight on this client")
        try:
            self._ensure_open()
            deadline = self._deadline(timeout)
            message = build()
            try:
                return self._exchange(message, deadline, prompt)
            except _KEEP_CLIENT:
                raise
            except AgentTimeout as exc:
                if prompt:
                    self._fail(exc)
                raise
            except BaseException as exc:
                self._fail(exc)
                raise
            finally:
                self._core.end_call()
        finally:
            self._lock.release()
            self._flush_if_idle()

    def _exchange(self, message: OutgoingMessage, deadline: float, prompt: bool) -> object:
        self._write(message, deadline)
        return self._pump(deadline, prompt)

    def _pump(self, deadline: float, prompt: bool) -> object:  # noqa: C901  the one place where every kind of line meets the call in flight
        """Handle the agent's lines in order until the call in flight has its answer.

        A prompt whose deadline passed, or whose reply reached a limit, has asked the agent to stop: from then
        on it waits at most ``cancel_grace`` for the agent's final response.
        """
        poll = self._reader.poll
        receive = self._core.receive
        update_recorded = self._core.update_recorded
        on_update = self._on_update
        in_grace = False
        while True:
            line = poll()
            if line.__class__ is not bytes:
                try:
                    line = self._next_line(deadline)
                except AgentTimeout:
                    if not prompt or in_grace:
                        raise
                    in_grace = True
                    deadline = time.monotonic() + self.options.cancel_grace
                    cancel = self._core.deadline_passed()
                    if cancel is not None:
                        self._write(cancel, deadline)
                    continue
            event = receive(line)
            if event.__class__ is Update:
                try:
                    result = on_update(event)
                except Exception as exc:
                    raise observer_failed(on_update, exc) from exc
                if result is not None:
                    self._not_awaitable(on_update, result)
                cancel = update_recorded(event)
                if cancel is not None:
                    self._write(cancel, deadline)
                    if prompt and not in_grace:
                        in_grace = True
                        deadline = min(deadline, time.monotonic() + self.options.cancel_grace)
                continue
            done = self._drive(event, deadline)  # type: ignore[arg-type]
            if done is not None:
                return done.value

    def _drive(self, step: Step, deadline: float) -> Done | None:
        result: Any = None
        try:
            while True:
                effect = step.send(result)
                if effect.__class__ is Record:
                    result = self._record(effect.callback, effect.value)
                else:
                    self._write(effect.message, deadline)  # type: ignore[union-attr]
                    result = None
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _record(self, name: str, value: object) -> Any:
        callback = self._callbacks[name]
        if callback is None:
            return None
        try:
            result = callback(value)
        except Exception as exc:
            raise observer_failed(callback, exc) from exc
        if result is not None:
            self._not_awaitable(callback, result)
        return result

    @staticmethod
    def _not_awaitable(callback: Callable[[Any], Any], result: object) -> None:
        if hasattr(result, "__await__"):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            raise ObserverError(
                f"the observer's {getattr(callback, '__name__', callback)} is a coroutine function; "
                "the sync Client cannot await it (use AsyncClient)"
            )

    # ----------------------------------------------------------------------------------------------------------
    # Bytes in, bytes out.

    def _next_line(self, deadline: float) -> bytes:
        reader = self._reader
        polled = reader.poll()
        while polled.__class__ is not bytes:
            if polled is ReaderEvent.NEED_DATA:
                if self._cancels or self._killed:
                    self._service(deadline)
                try:
                    count = os.readv(self._proc.stdout_fd, [reader.writable()])
                except BlockingIOError:
                    if self._agent_gone:
                        raise self._exited("the agent exited before answering") from None
                    self._wait(deadline)
                else:
                    reader.commit(count)
            elif polled is ReaderEvent.END_OF_INPUT:
                raise self._exited("the agent closed its output before answering")
            else:
                reader.writable()  # raises the ReaderExhaustion that stopped the reader
                raise AssertionError("unreachable")
            polled = reader.poll()
        return polled

    def _wait(self, deadline: float) -> None:
        """Block until the agent's output is readable, it exits, or someone wakes us; at most to the deadline."""
        events = self._read_poll.poll(_poll_ms(deadline, "the agent did not answer in time"))
        self._sort_events(events, deadline)

    def _sort_events(self, events: list[tuple[int, int]], deadline: float) -> None:
        proc = self._proc
        for fd, _ in events:
            if fd == proc.wake_fd:
                proc.drain_wake()
                self._service(deadline)
            elif fd == proc.exit_fd:
                self._agent_gone = True
                self._read_poll.unregister(fd)
                self._write_poll.unregister(fd)

    def _service(self, deadline: float) -> None:
        """Act on what another thread asked for: a kill, or cancels to write (in this thread, in order)."""
        if self._killed:
            raise self._killed_error()
        while self._cancels:
            self._write(self._core.cancel(self._cancels.popleft()), deadline)

    def _write(self, message: OutgoingMessage, deadline: float) -> None:
        """Record the line with ``on_send``, then write it whole (non-blocking, bounded by the deadline)."""
        self._record("on_send", message)
        data = memoryview(message.raw + b"\n")
        proc = self._proc
        while data:
            try:
                written = proc.write(data)
            except BlockingIOError:
                written = 0
            except (BrokenPipeError, ConnectionResetError):
                raise self._exited("the agent closed its input") from None
            data = data[written:]
            if data:
                try:
                    timeout_ms = _poll_ms(deadline, "the agent did not read its input in time")
                except AgentTimeout as error:
                    self._fail(error)  # part of a line may be in the pipe already and cannot be taken back
                    raise
                events = self._write_poll.poll(timeout_ms)
                if self._killed:
                    raise self._killed_error()
                for fd, _ in events:
                    if fd == proc.wake_fd:
                        proc.drain_wake()
                    elif fd == proc.exit_fd:
                        raise self._exited("the agent exited before reading its input")

    def _drain_available(self) -> None:
        """At close: record what the agent already sent (an update may follow the last response)."""
        with contextlib.suppress(AgentTimeout, AgentExited):  # nothing more to read now, or ever
            self._pump(time.monotonic(), prompt=False)

    def _flush_if_idle(self) -> None:
        """Write queued cancels when no call is in flight to do it."""
        if not self._cancels or not self._lock.acquire(blocking=False):
            return
        try:
            if self._closed:
                self._cancels.clear()
                return
            try:
                self._service(time.monotonic() + self.options.cancel_grace)
            except AgentExited:
                raise
            except BaseException as exc:
                self._fail(exc)
                raise
        finally:
            self._lock.release()


def _poll_ms(deadline: float, late: str) -> int | None:
    """The ``poll`` timeout until the deadline, rounded up so that we never wake just before it.

    Raises:
        AgentTimeout: the deadline has passed (with ``late`` as its message).
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise AgentTimeout(late)
    return None if remaining == math.inf else max(1, math.ceil(remaining * 1000))
