"""The asyncio client: the same conversation as :class:`~tinyacp.Client`, for programs that run many agents.

It keeps every promise of the sync client with the same core, the same call driver, the same rules
(:mod:`tinyacp._shell`) and the same calls (written once, in :mod:`tinyacp._calls`; :func:`awaitable` makes each a
coroutine method); only holding the client (a flag), waiting (the event loop's readers and writers) and tearing
down (on the loop, the blocking part in a thread) differ. The agent's output is read into the same fixed line
buffer, and only while a call (or an :class:`AsyncPromptStream` consumer) asks for the next message: nothing is
queued, so a slow consumer slows the agent down instead of growing memory. One client has no task of its own;
observer methods may be coroutine functions and are awaited in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import select
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _calls
from ._calls import method_of, streaming
from ._driver import WaitFor
from ._errors import ClientBusy
from ._log import CLIENT as _log
from ._options import Options
from ._process import AgentProcess
from ._records import Update
from ._requests import Meta
from ._shell import CallSpec, ShellBase, Steps, StreamBase

__all__ = ["AsyncClient", "AsyncPromptStream"]

P = ParamSpec("P")
T = TypeVar("T")

_ABANDON_WRITE = 0.5
"""Seconds a cancelled prompt gives its ``session/cancel`` to reach the agent before the teardown."""


def awaitable(
    call: Callable[Concatenate[ShellBase, P], CallSpec[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """``call`` as a coroutine method of :class:`AsyncClient`: awaiting it awaits the answer."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._answer(await self._run(self._calling(call(self, *args, **kwargs))))

    return method_of("AsyncClient", call, method)


class AsyncPromptStream(StreamBase["AsyncClient"]):
    """The updates of one prompt turn, as they arrive; then :attr:`result`.

    ``async with client.prompt_stream(session_id, text) as stream: async for update in stream: ...`` yields each
    update of the turn's session after the observer recorded it. Buffering is one update: the agent is not read
    while the consumer is busy. The stream runs the same call as :meth:`AsyncClient.prompt` and holds the client
    until the turn ends. Leaving the ``async with`` block early (or :meth:`aclose`) cancels the turn.
    """

    def __aiter__(self) -> AsyncPromptStream:
        return self

    async def __anext__(self) -> Update:
        """The next update of the turn's session.

        Raises:
            StopAsyncIteration: the turn ended (:attr:`result` holds it).
            AgentTimeout: as :meth:`AsyncClient.prompt_stream` says, and every error listed there.
        """
        update = await self._next_update()
        if update is None:
            raise StopAsyncIteration
        return update

    async def aclose(self) -> None:
        """Stop early: send ``session/cancel`` and read on (recording everything) until the turn ends, for at
        most ``cancel_grace``; past it the agent is torn down. A no-op once the turn ended."""
        await self._leave_turn()

    async def __aenter__(self) -> AsyncPromptStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AsyncClient(ShellBase):
    """A conversation with one agent process, for asyncio. Use ``async with AsyncClient(options) as client``.

    The agent starts in the constructor, as with :class:`~tinyacp.Client`; the methods, their arguments, results
    and exceptions are the same, and awaiting a call waits for its answer. ``cancel`` and ``close`` are coroutines
    too; ``kill`` is a plain method, safe from any thread or signal handler. Cancelling the task that awaits a call
    tears the agent down (a prompt first sends ``session/cancel``) and re-raises :class:`asyncio.CancelledError`.
    Its constructor raises what :class:`~tinyacp.Client`'s does.
    """

    def __init__(self, options: Options) -> None:
        # Built in a running event loop, the loop reads the agent's stderr (with stderr="tail"): no thread per agent.
        loop = _running_loop()
        super().__init__(options, cooperative=True, tail_thread=loop is None)
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._abandoning = False
        """A cancelled task's call is being abandoned: a cancel meanwhile does not abandon it again."""
        self._exit_seen = False
        self._reaping: asyncio.Future[None] | None = None
        self._watch = _Watch()
        tail_fd = self._proc.tail_fd
        if loop is not None and tail_fd is not None:
            try:
                self._watch.keep_reading(loop, tail_fd, self._proc.read_stderr)
            except BaseException:
                self._proc.terminate(0)
                raise

    # ----------------------------------------------------------------------------------------------------------
    # The calls (each written once, in :mod:`tinyacp._calls`), and what only this shell has.

    initialize = awaitable(_calls.initialize)
    authenticate = awaitable(_calls.authenticate)
    logout = awaitable(_calls.logout)
    new_session = awaitable(_calls.new_session)
    load_session = awaitable(_calls.load_session)
    resume_session = awaitable(_calls.resume_session)
    fork_session = awaitable(_calls.fork_session)
    close_session = awaitable(_calls.close_session)
    delete_session = awaitable(_calls.delete_session)
    list_sessions = awaitable(_calls.list_sessions)
    set_mode = awaitable(_calls.set_mode)
    set_config_option = awaitable(_calls.set_config_option)
    set_model = awaitable(_calls.set_model)
    prompt = awaitable(_calls.prompt)
    prompt_stream = streaming("AsyncClient", AsyncPromptStream, _calls.prompt_stream)
    request = awaitable(_calls.request)
    notify = awaitable(_calls.notify)

    async def cancel(self, session_id: str, *, meta: Meta | None = None) -> None:
        """Ask the agent to stop the turn: one ``session/cancel`` (``meta`` as ``_meta``). Safe from any task.

        While a call is in flight, the call writes it (in order with everything else it writes).

        Raises:
            TransferLimitExceeded: the notification would be longer than ``max_message_bytes`` (not sent).
            TypeError: ``meta`` is not a dict (not sent).
            ClientClosed: the client is closed.
            AgentExited: writing it failed (the agent is torn down).
            ObserverError: recording it failed (the agent is torn down).
        """
        self._queue_cancel(session_id, meta)
        if self._busy:
            return
        self._hold()
        try:
            await self._run(self._cancelling())
        finally:
            self._release()

    async def close(self) -> None:
        """Tear down: record what the agent already sent (up to 1 MiB), then stop its whole group and reap it.

        Idempotent. From another task while a call is in flight, it kills the agent and waits for the call. The
        blocking part of the teardown runs in a worker thread, and a close always waits for the reap: one that was
        itself cancelled leaves the reap running, and the next ``close()`` waits for it.

        Raises:
            ObserverError: recording a last message failed (the teardown still happened).
            ClientBusy: awaited from inside an observer method of this client (use ``kill()`` there).
        """
        self._refuse_reentry()
        self._abandon_idle_stream()
        if self._busy:
            self.kill()
            await self._idle.wait()
        if self._closed:
            await self._reaped()
            return
        self._hold()
        try:
            await self._run(self._closing())
        finally:
            self._release()

    async def __aenter__(self) -> AsyncClient:
        return self

    def __del__(self) -> None:
        # Dropped without close(): the fds are closed here, so they must first leave the loop that watches them
        # (see _Watch). From a thread other than the one running that loop, the loop's selector is not ours to
        # touch: the group is killed now and the loop closes the rest.
        watch = getattr(self, "_watch", None)
        loop = watch.loop if watch is not None else None
        if watch is not None and loop is not None and watch.fds:
            if loop.is_running() and not loop.is_closed() and _running_loop() is not loop:
                proc = self._proc
                with contextlib.suppress(Exception):
                    if self._services is not None:
                        self._services.begin_close()
                    proc.signal_group(signal.SIGKILL)
                try:
                    loop.call_soon_threadsafe(_forget_and_terminate, watch, proc)
                    return
                except RuntimeError:  # closed meanwhile: nothing is watched any more
                    pass
            watch.forget()
        super().__del__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------------------------------------------------
    # The shell: hold the client, wait with the event loop, await the observer.

    def _hold(self) -> None:
        if self._busy:
            raise ClientBusy("another call is in flight on this client")
        self._busy = True
        self._idle.clear()

    def _release(self) -> None:
        self._busy = False
        self._idle.set()

    def _current(self) -> object:
        return asyncio.current_task()

    async def _await(self, awaitable: Awaitable[Any]) -> Any:
        return await awaitable

    async def _tear_down(self) -> None:
        await self._teardown_async()

    async def _checkpoint(self) -> None:
        await asyncio.sleep(0)

    async def _interrupted(self, steps: Steps[Any], exc: BaseException) -> bool:
        """A cancelled task asks the agent to stop the turn, then tears it down (shielded) and re-raises; any
        other failure is thrown into the call."""
        if not isinstance(exc, asyncio.CancelledError):
            return False
        if self._abandoning or self._closed:  # the teardown began already: the reap goes on
            steps.close()
        else:
            await self._abandon(steps)
        return True

    async def _wait(self, wait: WaitFor) -> bool:
        """Wait until what ``wait`` asks for is ready, someone wakes us or the agent exits; at most until the
        deadline. True when the agent's exit was seen."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[int | None] = loop.create_future()
        proc = self._proc
        wanted = [proc.wake_fd] if proc.wake_fd is not None else []
        if wait.read:
            wanted.append(proc.stdout_fd)
        if not self._exit_seen and proc.exit_fd is not None:
            wanted.append(proc.exit_fd)
        watch = self._watch
        watch.wait_for(loop, wanted, ready)
        wake = watch.wake
        if wait.write:
            loop.add_writer(proc.stdin_fd, wake, proc.stdin_fd)
        remaining = wait.deadline - time.monotonic()
        timer = None if remaining == math.inf else loop.call_later(max(0.0, remaining), wake, None)
        try:
            woken_by = await ready
        finally:
            watch.waiter = None
            if timer is not None:
                timer.cancel()
            if wait.write:
                loop.remove_writer(proc.stdin_fd)
        if woken_by is not None and woken_by == proc.wake_fd:
            proc.drain_wake()
        elif woken_by is not None and woken_by == proc.exit_fd:
            self._exit_seen = True
            return True
        return False

    async def _abandon(self, steps: Steps[Any]) -> None:
        """The awaiting task was cancelled: ask the agent to stop the turn, if one is in flight, then tear it down
        whatever happens."""
        self._abandoning = True
        cancel = self._core.cancel_turn_once()
        _log.info(
            "the awaiting task was cancelled: %sthe agent (pid %d) is torn down",
            "session/cancel, then " if cancel else "",
            self.pid,
        )
        try:
            await asyncio.shield(self._run(self._driver.flushed()))  # what the call recorded, before any act
            if cancel is not None:
                sent = self._driver.send_now(cancel, time.monotonic() + _ABANDON_WRITE)
                await asyncio.shield(self._run(sent))
        except BaseException:  # the teardown below is what matters now
            pass
        finally:
            self._abandoning = False
            self._failure = self._failure or asyncio.CancelledError()
            try:
                await self._teardown_async()
            finally:
                steps.close()  # the call ends, and lets go of the client, only once the agent is torn down

    async def _teardown_async(self) -> None:
        """The teardown; it goes on if this task is cancelled, and :meth:`_reaped` waits."""
        self._closed = True
        self._core.end_call()
        services = self._services
        if services is not None:
            services.begin_close()
        if self._reaping is None and not self._proc.closed:
            self._reaping = asyncio.ensure_future(self._terminate())
        await self._reaped()
        if services is not None:
            await asyncio.to_thread(services.close)
        self._trace_exit()

    async def _terminate(self) -> None:
        """``terminate()`` with the wait for the agent's exit on the event loop (which reads its stderr meanwhile):
        close stdin, SIGTERM the group, wait up to ``kill_grace`` for the exit. Only what would block (a group that
        outlives the agent, a kill timer, no pidfd) goes on in a worker thread."""
        proc, grace = self._proc, self.options.kill_grace
        deadline = time.monotonic() + grace
        try:
            if proc.exit_fd is not None:
                proc.begin_terminate()
                await self._watch.readable(asyncio.get_running_loop(), proc.exit_fd, grace)
        except BaseException:  # cancelled (the loop is shutting down): the teardown is done here, blocking
            self._watch.forget()
            proc.terminate(max(0.0, deadline - time.monotonic()))
            raise
        self._watch.forget()  # before the fds close: a number reused later must not look watched
        if not proc.terminate_if_gone():
            await asyncio.to_thread(proc.terminate, max(0.0, deadline - time.monotonic()))

    async def _reaped(self) -> None:
        reaping = self._reaping
        if reaping is not None and not reaping.done():
            await asyncio.shield(reaping)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _readable(fd: int) -> bool:
    """Whether ``fd`` is readable (or at its end, or failed) right now: one ``poll`` that does not wait."""
    probe = select.poll()
    probe.register(fd, select.POLLIN)
    return bool(probe.poll(0))


def _forget_and_terminate(watch: _Watch, proc: AgentProcess) -> None:
    """A dropped client's last step, on the loop that watched its fds."""
    watch.forget()
    proc.terminate(0)


class _Watch:
    """The agent's fds a client watches on the event loop, registered at the first wait that needs each and kept
    registered between waits (adding and removing 2-3 readers per wait cost about 40 us).

    Readers are level-triggered: one that fires while nobody waits for it (the agent wrote between two calls, or
    exited) is removed, and the next wait that needs it adds it again. :meth:`forget` removes every reader; the
    client calls it before its fds are closed, since a closed number reused by the next ``open`` would otherwise
    look registered to the loop and its own reader would never fire. The loop's handles reference this object,
    never the client, so a client dropped without ``close()`` is still collected (see ``AsyncClient.__del__``).

    A level-triggered reader also reports the fd that woke the waiter once more, in the loop's next iteration: the
    loop polled before the woken task ran and read the fd dry, and it runs that report after the task, which is
    waiting again by then. :meth:`ready` checks that one report with a poll of the fd before it wakes anyone: a wake
    for nothing costs a task step and a failed read, and came with every line an agent wrote while the loop slept.
    """

    __slots__ = ("fds", "loop", "read_tail", "stale", "tail", "waiter", "wanted")

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.fds: set[int] = set()
        """The fds registered on ``loop`` now."""
        self.waiter: asyncio.Future[int | None] | None = None
        self.wanted: list[int] = []
        """The fds the waiter waits for."""
        self.tail = -1
        """The agent's stderr, read whenever it is readable, waiter or not (-1: none)."""
        self.read_tail: Callable[[], bool] = bool
        self.stale = -1
        """The fd that woke the waiter last: its reports are checked until one finds it read dry."""

    def keep_reading(self, loop: asyncio.AbstractEventLoop, fd: int, read: Callable[[], bool]) -> None:
        """Call ``read`` whenever ``fd`` is readable, until it returns False (EOF) or :meth:`forget`."""
        self.tail, self.read_tail = fd, read
        self._move(loop)

    def _move(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self.loop:
            self._remove_all()
            self.loop = loop
            if self.tail >= 0:
                loop.add_reader(self.tail, self.ready, self.tail)
                self.fds.add(self.tail)

    def wait_for(self, loop: asyncio.AbstractEventLoop, fds: list[int], waiter: asyncio.Future[int | None]) -> None:
        """Make ``waiter`` the one woken when one of ``fds`` is readable, registering those not registered yet."""
        self._move(loop)
        registered = self.fds
        for fd in fds:
            if fd not in registered:
                loop.add_reader(fd, self.ready, fd)
                registered.add(fd)
        self.wanted = fds
        self.waiter = waiter

    def ready(self, fd: int) -> None:
        """The loop's callback: ``fd`` is readable."""
        if fd == self.tail:
            if not self.read_tail():  # EOF: readable for good
                self.tail = -1
                self._remove(fd)
            return
        if fd == self.stale and not _readable(fd):  # polled before the task it woke read it dry
            self.stale = -1
            return
        waiter = self.waiter
        if waiter is not None and fd in self.wanted:
            if not waiter.done():
                waiter.set_result(fd)
                self.stale = fd
        else:  # nobody waits for it: it would fire on every iteration of the loop
            self._remove(fd)

    def _remove(self, fd: int) -> None:
        if self.loop is not None:
            self.loop.remove_reader(fd)
        self.fds.discard(fd)

    async def readable(self, loop: asyncio.AbstractEventLoop, fd: int, timeout: float) -> None:
        """Wait until ``fd`` is readable, at most ``timeout`` seconds."""
        waiter: asyncio.Future[int | None] = loop.create_future()
        self.wait_for(loop, [fd], waiter)
        timer = loop.call_later(timeout, self.wake, None)
        try:
            await waiter
        finally:
            self.waiter = None
            timer.cancel()

    def wake(self, fd: int | None) -> None:
        """Wake the waiter (the writer's callback and the deadline's)."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(fd)

    def forget(self) -> None:
        """Remove every reader for good (a no-op on a closed loop, whose selector is gone)."""
        self.tail = -1
        self._remove_all()
        self.loop = None

    def _remove_all(self) -> None:
        loop, fds = self.loop, self.fds
        if loop is not None:
            for fd in fds:
                loop.remove_reader(fd)
        fds.clear()
