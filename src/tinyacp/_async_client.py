"""The asyncio client: the same conversation as :class:`~tinyacp.Client`, for programs that run many agents.

It keeps every promise of the sync client with the same core; only the waiting differs. The agent's output is
read into the same fixed line buffer, and only while a call (or a :class:`PromptStream` consumer) asks for the
next message: nothing is queued, so a slow consumer slows the agent down instead of growing memory. One client
has no task of its own; observer methods may be coroutine functions and are awaited in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

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

__all__ = ["AsyncClient", "PromptStream"]

_KEEP_CLIENT = (RequestError, ProtocolViolation)


class AsyncClient(ShellBase):
    """A conversation with one agent process, for asyncio. Use ``async with AsyncClient(options) as client``.

    The agent starts in the constructor, as with :class:`~tinyacp.Client`; the methods, results and exceptions
    are the same. ``cancel`` is a coroutine; ``kill`` is a plain method, safe from any thread or signal handler.

    Raises:
        SpawnError: the agent's program could not be started.
        ValueError: ``max_update_bytes`` exceeds the reader's line limit.
        TypeError: the observer lacks a required method.
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._exchange: _Exchange | None = None

    # ----------------------------------------------------------------------------------------------------------
    # The calls.

    async def initialize(self, *, meta: Meta | None = None, timeout: float | None = None) -> Initialize:
        """As :meth:`tinyacp.Client.initialize`."""
        return await self._call(lambda: self._core.initialize(meta), timeout)  # type: ignore[return-value]

    async def authenticate(self, method_id: str, *, meta: Meta | None = None, timeout: float | None = None) -> None:
        """As :meth:`tinyacp.Client.authenticate`."""
        await self._call(lambda: self._core.authenticate(method_id, meta), timeout)

    async def logout(self, *, timeout: float | None = None) -> None:
        """As :meth:`tinyacp.Client.logout`."""
        await self._call(self._core.logout, timeout)

    async def new_session(
        self,
        cwd: str | os.PathLike[str],
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] = (),
        timeout: float | None = None,
    ) -> Session:
        """As :meth:`tinyacp.Client.new_session`."""
        path, extra = self._absolute(cwd), self._absolute_all(additional_directories)
        return await self._call(  # type: ignore[return-value]
            lambda: self._core.new_session(
                path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
            ),
            timeout,
        )

    async def load_session(
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
        """As :meth:`tinyacp.Client.load_session`."""
        path, extra = self._absolute(cwd), self._absolute_all(additional_directories)
        return await self._call(  # type: ignore[return-value]
            lambda: self._core.load_session(
                session_id, path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
            ),
            timeout,
        )

    async def resume_session(
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
        """As :meth:`tinyacp.Client.resume_session`."""
        path, extra = self._absolute(cwd), self._absolute_all(additional_directories)
        return await self._call(  # type: ignore[return-value]
            lambda: self._core.resume_session(
                session_id, path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
            ),
            timeout,
        )

    async def close_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """As :meth:`tinyacp.Client.close_session`."""
        await self._call(lambda: self._core.close_session(session_id), timeout)

    async def delete_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """As :meth:`tinyacp.Client.delete_session`."""
        await self._call(lambda: self._core.delete_session(session_id), timeout)

    async def list_sessions(
        self, cwd: str | os.PathLike[str] | None = None, cursor: str | None = None, *, timeout: float | None = None
    ) -> SessionPage:
        """As :meth:`tinyacp.Client.list_sessions`."""
        path = None if cwd is None else self._absolute(cwd)
        return await self._call(lambda: self._core.list_sessions(path, cursor), timeout)  # type: ignore[return-value]

    async def set_mode(
        self,
        session_id: str,
        mode_id: str,
        *,
        meta: Meta | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> None:
        """As :meth:`tinyacp.Client.set_mode`."""
        await self._call(lambda: self._core.set_mode(session_id, mode_id, meta=meta, force=force), timeout)

    async def set_config_option(
        self,
        session_id: str,
        config_id: str,
        value: str | bool,
        *,
        meta: Meta | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> tuple[ConfigOption, ...]:
        """As :meth:`tinyacp.Client.set_config_option`."""
        return await self._call(  # type: ignore[return-value]
            lambda: self._core.set_config_option(session_id, config_id, value, meta=meta, force=force), timeout
        )

    async def set_model(
        self,
        session_id: str,
        model_id: str,
        *,
        meta: Meta | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> None:
        """As :meth:`tinyacp.Client.set_model`."""
        await self._call(lambda: self._core.set_model(session_id, model_id, meta=meta, force=force), timeout)

    async def prompt(
        self,
        session_id: str,
        content: str | Sequence[PromptContent],
        *,
        meta: Meta | None = None,
        timeout: float | None = None,
    ) -> PromptResult:
        """As :meth:`tinyacp.Client.prompt`. If the awaiting task is cancelled, the client sends
        ``session/cancel``, tears the agent down (shielded) and re-raises :class:`asyncio.CancelledError`."""
        return await self._call(lambda: self._core.prompt(session_id, content, meta), timeout, prompt=True)  # type: ignore[return-value]

    def prompt_stream(
        self,
        session_id: str,
        content: str | Sequence[PromptContent],
        *,
        timeout: float | None = None,
    ) -> PromptStream:
        """Send a prompt and iterate over this turn's updates as they arrive (each after the observer recorded
        it); the :class:`PromptResult` is then ``stream.result``.

        Nothing is sent until the first iteration. While the consumer does not ask for the next update, the
        client does not read from the agent. Leaving an ``async with`` block early cancels the turn politely.
        """
        return PromptStream(self, session_id, content, timeout)

    async def cancel(self, session_id: str) -> None:
        """Ask the agent to stop the turn: one ``session/cancel``. Safe from any task.

        While a call is in flight, the call writes it (in order with everything else it writes).
        """
        self._queue_cancel(session_id)
        if self._busy:
            return
        self._enter()
        try:
            await self._service(time.monotonic() + self.options.cancel_grace)
        except BaseException as exc:
            await self._fail_async(exc)
            raise
        finally:
            self._leave()

    def kill(self) -> None:
        """As :meth:`tinyacp.Client.kill`: safe from any thread, task or signal handler."""
        self._request_kill()

    async def close(self) -> None:
        """As :meth:`tinyacp.Client.close`; the blocking part of the teardown runs in a worker thread."""
        exchange = self._exchange
        if exchange is not None and not exchange.running:
            exchange.abandon_idle()  # a prompt stream its consumer left without closing it
        if self._busy:
            self._request_kill()
            await self._idle.wait()
        if self._closed:
            return
        self._enter()
        try:
            try:
                await self._drain_available()
            except ObserverError:
                raise
            except Exception as exc:  # the agent's last words broke a rule: we are closing anyway
                self._failure = exc
            finally:
                await self._teardown_async()
        finally:
            self._leave()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<tinyacp.AsyncClient pid={self.pid} epoch={self.epoch} {state}>"

    # ----------------------------------------------------------------------------------------------------------
    # The shell.

    def _enter(self) -> None:
        if self._busy:
            raise ClientBusy("another call is in flight on this client")
        self._busy = True
        self._idle.clear()

    def _leave(self) -> None:
        self._busy = False
        self._idle.set()

    async def _call(
        self, build: Callable[[], OutgoingMessage], timeout: float | None, *, prompt: bool = False
    ) -> object:
        exchange = _Exchange(self, build, timeout, prompt)
        while True:
            event = await exchange.next()
            if event.__class__ is Done:
                return event.value

    async def _teardown_async(self) -> None:
        self._closed = True
        self._core.end_call()
        if not self._proc.closed:
            await asyncio.shield(asyncio.to_thread(self._proc.terminate, self.options.kill_grace))

    async def _fail_async(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        await self._teardown_async()

    async def _exited_async(self, what: str) -> AgentExited:
        await self._teardown_async()
        return self._exited(what)

    async def _pump(self, exchange: _Exchange) -> Update | Done:  # noqa: C901  the one place where every kind of line meets the call in flight
        """Handle the agent's lines in order until the call has its answer (or, streaming, the next update).

        A prompt whose deadline passed, or whose reply reached a limit, has asked the agent to stop: from then
        on it waits at most ``cancel_grace`` for the agent's final response.
        """
        poll = self._reader.poll
        receive = self._core.receive
        update_recorded = self._core.update_recorded
        on_update = self._on_update
        while True:
            line = poll()
            if line.__class__ is not bytes:
                try:
                    line = await self._next_line(exchange.deadline)
                except AgentTimeout:
                    if not exchange.prompt or exchange.in_grace:
                        raise
                    exchange.in_grace = True
                    exchange.deadline = time.monotonic() + self.options.cancel_grace
                    cancel = self._core.deadline_passed()
                    if cancel is not None:
                        await self._write(cancel, exchange.deadline)
                    continue
            event = receive(line)
            if event.__class__ is Update:
                try:
                    result = on_update(event)
                    if result is not None and hasattr(result, "__await__"):
                        await result
                except Exception as exc:
                    raise observer_failed(on_update, exc) from exc
                cancel = update_recorded(event)
                if cancel is not None:
                    await self._write(cancel, exchange.deadline)
                    if exchange.prompt and not exchange.in_grace:
                        exchange.in_grace = True
                        exchange.deadline = min(exchange.deadline, time.monotonic() + self.options.cancel_grace)
                if exchange.stream:
                    return event
                continue
            done = await self._drive(event, exchange.deadline)  # type: ignore[arg-type]
            if done is not None:
                return done

    async def _drive(self, step: Step, deadline: float) -> Done | None:
        result: Any = None
        try:
            while True:
                effect = step.send(result)
                if effect.__class__ is Record:
                    result = await self._record(effect.callback, effect.value)
                else:
                    await self._write(effect.message, deadline)  # type: ignore[union-attr]
                    result = None
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def _record(self, name: str, value: object) -> Any:
        callback = self._callbacks[name]
        if callback is None:
            return None
        try:
            result = callback(value)
            if result is not None and hasattr(result, "__await__"):
                result = await result
        except Exception as exc:
            raise observer_failed(callback, exc) from exc
        return result

    # ----------------------------------------------------------------------------------------------------------
    # Bytes in, bytes out.

    async def _next_line(self, deadline: float) -> bytes:
        reader = self._reader
        polled = reader.poll()
        while polled.__class__ is not bytes:
            if polled is ReaderEvent.NEED_DATA:
                if self._cancels or self._killed:
                    await self._service(deadline)
                fd = self._proc.stdout_fd
                try:
                    count = os.readv(fd, [reader.writable()])
                except BlockingIOError:
                    if self._agent_gone:
                        raise await self._exited_async("the agent exited before answering") from None
                    await self._wait((fd,), (), deadline)
                else:
                    reader.commit(count)
            elif polled is ReaderEvent.END_OF_INPUT:
                raise await self._exited_async("the agent closed its output before answering")
            else:
                reader.writable()  # raises the ReaderExhaustion that stopped the reader
                raise AssertionError("unreachable")
            polled = reader.poll()
        return polled

    async def _wait(self, read_fds: tuple[int, ...], write_fds: tuple[int, ...], deadline: float) -> None:  # noqa: C901  one wait over fds, the agent's exit and wake-ups, each with its own cleanup
        """Wait until one of the fds is ready, the agent exits or someone wakes us; at most to the deadline."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AgentTimeout("the agent did not answer in time")
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[int] = loop.create_future()

        def wake(fd: int) -> None:
            if not ready.done():
                ready.set_result(fd)

        proc = self._proc
        watched = [fd for fd in (*read_fds, proc.wake_fd, None if self._agent_gone else proc.exit_fd) if fd is not None]
        for fd in watched:
            loop.add_reader(fd, wake, fd)
        for fd in write_fds:
            loop.add_writer(fd, wake, fd)
        try:
            woken_by = await asyncio.wait_for(ready, None if remaining == float("inf") else remaining)
        except TimeoutError:
            raise AgentTimeout("the agent did not answer in time") from None
        finally:
            for fd in watched:
                loop.remove_reader(fd)
            for fd in write_fds:
                loop.remove_writer(fd)
        if woken_by == proc.wake_fd:
            proc.drain_wake()
            await self._service(deadline)
        elif woken_by == proc.exit_fd:
            self._agent_gone = True

    async def _service(self, deadline: float) -> None:
        if self._killed:
            raise await self._exited_async("the agent was stopped by kill()")
        while self._cancels:
            await self._write(self._core.cancel(self._cancels.popleft()), deadline)

    async def _write(self, message: OutgoingMessage, deadline: float) -> None:
        await self._record("on_send", message)
        data = memoryview(message.raw + b"\n")
        proc = self._proc
        while data:
            try:
                written = proc.write(data)
            except BlockingIOError:
                written = 0
            except (BrokenPipeError, ConnectionResetError):
                raise await self._exited_async("the agent closed its input") from None
            data = data[written:]
            if data:
                if self._agent_gone:
                    raise await self._exited_async("the agent exited before reading its input")
                try:
                    await self._wait((), (proc.stdin_fd,), deadline)
                except AgentTimeout as exc:
                    # Part of a line may be in the pipe already and cannot be taken back: tear down.
                    await self._fail_async(exc)
                    raise

    async def _drain_available(self) -> None:
        """At close: record what the agent already sent (an update may follow the last response)."""
        exchange = _Exchange(self, None, None, prompt=False)
        exchange.deadline = time.monotonic()
        with contextlib.suppress(AgentTimeout, AgentExited):  # nothing more to read now, or ever
            await self._pump(exchange)


class _Exchange:
    """One call in flight: write the request, then hand out updates until the answer (or a failure)."""

    def __init__(
        self,
        client: AsyncClient,
        build: Callable[[], OutgoingMessage] | None,
        timeout: float | None,
        prompt: bool,
        stream: bool = False,
    ) -> None:
        self._client = client
        self._build = build
        self._timeout = timeout
        self.prompt = prompt
        """A prompt turn: its deadline and reply limits lead to a cancel and a grace period."""
        self.stream = stream
        """Hand out each update of the turn as it is recorded (``prompt_stream``)."""
        self.deadline = 0.0
        self.in_grace = False
        """The agent was asked to stop; ``deadline`` is now the end of the grace period."""
        self._started = False
        self._finished = False
        self.running = False
        """Whether a task is inside :meth:`next` right now."""
        self.done: Done | None = None
        """The answer, once it came."""

    @property
    def finished(self) -> bool:
        return self._finished

    async def next(self) -> Update | Done:
        client = self._client
        if not self._started:
            client._enter()
            client._exchange = self
            self._started = True
            try:
                client._ensure_open()
                self.deadline = client._deadline(self._timeout)
                assert self._build is not None, "only a call's exchange is started"
                message = self._build()
            except BaseException:
                self._finish()
                raise
            work = self._first(message)
        else:
            work = self._step()
        self.running = True
        try:
            return await self._guard(work)
        finally:
            self.running = False

    def abandon_idle(self) -> None:
        """The consumer left mid-turn and nobody waits on this exchange: release the client for closing."""
        self._finish()

    async def _first(self, message: OutgoingMessage) -> Update | Done:
        await self._client._write(message, self.deadline)
        return await self._step()

    async def _step(self) -> Update | Done:
        return await self._client._pump(self)

    async def _guard(self, work: Any) -> Update | Done:
        client = self._client
        try:
            event: Update | Done = await work
        except _KEEP_CLIENT:
            self._finish()
            raise
        except AgentTimeout as exc:
            if self.prompt:
                await client._fail_async(exc)
            self._finish()
            raise
        except asyncio.CancelledError:
            await self._abandon()
            raise
        except BaseException as exc:
            await client._fail_async(exc)
            self._finish()
            raise
        if event.__class__ is Done:
            self.done = event
            self._finish()
        return event

    async def _abandon(self) -> None:
        """The awaiting task was cancelled: ask the agent to stop, then tear it down whatever happens."""
        client = self._client
        try:
            cancel = client._core.cancel_turn_once() if self.prompt else None
            if cancel is not None:
                await asyncio.shield(client._write(cancel, time.monotonic() + 0.5))
        except BaseException:  # the teardown below is what matters now
            pass
        finally:
            try:
                await asyncio.shield(client._fail_async(asyncio.CancelledError()))
            finally:
                self._finish()

    async def aclose(self) -> None:
        """Leave early: cancel the turn politely and read on to its answer (bounded by cancel_grace)."""
        if not self._started or self._finished:
            return
        client = self._client
        cancel = client._core.cancel_turn_once()
        try:
            if cancel is not None:
                await self._guard(client._write(cancel, self.deadline))
            self.deadline = min(self.deadline, time.monotonic() + client.options.cancel_grace)
            self.in_grace = True
            while not self._finished:
                await self._guard(self._step())
        except AgentTimeout:
            await client._fail_async(AgentTimeout("the agent did not end the turn after session/cancel"))
            self._finish()

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            client = self._client
            client._core.end_call()
            if client._exchange is self:
                client._exchange = None
            client._leave()


class PromptStream:
    """The updates of one prompt turn, as they arrive; then :attr:`result`.

    ``async for update in client.prompt_stream(session_id, text)`` yields each update of the turn's session
    after the observer recorded it. Buffering is one update: the agent is not read while the consumer is busy.
    """

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        content: str | Sequence[PromptContent],
        timeout: float | None,
    ) -> None:
        self._session_id = session_id
        self._exchange = _Exchange(client, lambda: client._core.prompt(session_id, content), timeout, True, True)
        self._result: PromptResult | None = None

    @property
    def result(self) -> PromptResult:
        """The turn's result, once the iteration ended.

        Raises:
            RuntimeError: the turn has not ended yet.
        """
        if self._result is None:
            raise RuntimeError("the turn has not ended yet: iterate the stream to its end first")
        return self._result

    def __aiter__(self) -> PromptStream:
        return self

    async def __anext__(self) -> Update:
        exchange = self._exchange
        while not exchange.finished:
            event = await exchange.next()
            if event.__class__ is Update and event.session_id == self._session_id:
                return event
        self._take_result()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop early: send ``session/cancel`` and read on (recording everything) until the turn ends."""
        await self._exchange.aclose()
        self._take_result()

    def _take_result(self) -> None:
        done = self._exchange.done
        if done is not None:
            self._result = done.value  # type: ignore[assignment]

    async def __aenter__(self) -> PromptStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
