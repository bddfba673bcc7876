"""What the sync and the asyncio client share, so that each shell shows only how it waits.

:class:`ShellBase` builds the core, the reader, the process and the call driver (:mod:`tinyacp._driver`), and
holds everything both shells do alike: the one run loop (:meth:`ShellBase._run`, which matches the driver's steps
exhaustively and does each the shell's way), a call from holding the client to releasing it, what a failed call
raises and whether it tears the agent down, what a close records before the teardown, and where a cancel asked
for between calls goes. :class:`StreamBase` is what both prompt streams share. The public calls themselves are
written once, in :mod:`tinyacp._calls`, each as the :class:`CallSpec` that a shell runs.

The run loop is a coroutine. The asyncio shell awaits it; the sync shell's waits block instead of suspending it,
so :func:`run_blocking` runs it to its end in one step. What differs between the shells is only how they wait
(``select.poll`` or the event loop's readers), hold the client (a lock or a flag), await an observer's awaitable
(or refuse it) and tear down (blocking, or on the loop with the blocking part in a thread).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar, assert_never, cast

from ._bounds import check_timeout
from ._conversation import (
    ON_ELICITATION,
    ON_MESSAGE,
    ON_PERMISSION_DECISION,
    ON_PERMISSION_REQUEST,
    ON_SEND,
    ON_SERVE,
    ON_SERVE_DECISION,
    ON_UPDATE,
    Call,
    Conversation,
)
from ._driver import ON_FLUSH, Await, CallDriver, Checkpoint, Driven, Gone, Step, WaitFor
from ._errors import (
    AgentExited,
    AgentTimeout,
    ClientBusy,
    ClientClosed,
    ObserverError,
    ProtocolViolation,
    RequestError,
    UsageError,
)
from ._log import CLIENT as _log
from ._messages import Initialize, SessionState
from ._options import Options, require_observer
from ._process import AgentProcess
from ._records import PromptResult, Update
from ._requests import Meta
from ._trace_context import agent_env, process_context, request_tracer
from .reader import LineReader

if TYPE_CHECKING:
    from ._services import Services

T = TypeVar("T")

REQUIRED_CALLBACKS = (ON_UPDATE, ON_PERMISSION_REQUEST, ON_PERMISSION_DECISION)
OPTIONAL_CALLBACKS = (ON_MESSAGE, ON_SEND, ON_FLUSH, ON_ELICITATION, ON_SERVE, ON_SERVE_DECISION)

_KEEP_CLIENT = (RequestError, ProtocolViolation)
"""Errors about one answer: the stream is still in step, so the client stays usable."""


class TearDown:
    """Tear the agent down, the shell's way (blocking, or on the event loop); send back nothing."""

    __slots__ = ()


TEARDOWN: Final = TearDown()

ShellStep: TypeAlias = Step | TearDown
"""What the shell's own generators yield: the driver's steps, and the teardown."""

Steps: TypeAlias = Generator[ShellStep, Any, T]
"""A generator a shell runs: a driver generator, or one of :class:`ShellBase`'s around one."""


class Finished(Generic[T]):
    """What a driver generator returned, told apart from a streamed update."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


class CallSpec(Generic[T]):
    """One public call, as both shells run it: built in the core once the client is held, then driven.

    Made when the call is made, so a bad ``timeout`` is refused there, before the client is held or anything is
    written (a prompt stream's too, before it is iterated).

    Raises:
        ValueError: ``timeout`` is not None nor a number of seconds from 0 to ``MAX_SECONDS``.
    """

    __slots__ = ("build", "notification", "prompt", "timeout")

    def __init__(
        self,
        build: Callable[[], Call[T]],
        timeout: float | None,
        *,
        prompt: bool = False,
        notification: bool = False,
    ) -> None:
        self.build = build
        self.timeout = check_timeout("timeout", timeout)
        self.prompt = prompt
        self.notification = notification
        """The call is a notification: written (within ``cancel_grace``), with no answer to wait for."""


def resolve_callbacks(observer: object | None) -> dict[str, Callable[..., Any] | None]:
    """The observer's methods, looked up once. The three core methods are required; the rest optional."""
    if observer is None:
        return dict.fromkeys(REQUIRED_CALLBACKS + OPTIONAL_CALLBACKS)
    missing = [name for name in REQUIRED_CALLBACKS if not callable(getattr(observer, name, None))]
    if missing:
        raise TypeError(f"the observer lacks {', '.join(missing)}; subclass tinyacp.BaseObserver to get no-op defaults")
    found = {name: getattr(observer, name, None) for name in REQUIRED_CALLBACKS + OPTIONAL_CALLBACKS}
    return {name: method if callable(method) else None for name, method in found.items()}


class ShellBase:
    """State and rules shared by :class:`~tinyacp.Client` and :class:`~tinyacp.AsyncClient`."""

    def __init__(self, options: Options, *, cooperative: bool, tail_thread: bool = True) -> None:
        if not isinstance(options, Options):
            raise TypeError(f"a client is built from tinyacp.Options, not {type(options).__name__}")
        self.options = options
        callbacks = resolve_callbacks(require_observer(options))
        plan = None
        if options.sandbox is not None:  # checked before anything starts: never an unsandboxed run
            from ._sandbox import plan as sandbox_plan

            plan = sandbox_plan(options.sandbox, options.command, cwd=options.cwd, env=options.env)
        served = options.serve.sandbox
        if served is not None:  # the served commands' sandbox, checked as the agent's is
            from ._sandbox import check_available, network_on

            check_available(network=network_on(served, False))
        self._core = Conversation(
            epoch=options.epoch,
            transfer_limits=options.transfer_limits,
            reader_limits=options.reader_limits,
            policy=options.policy,
            client_info=options.client_info,
            features=options.features,
            has_observer=options.observer is not None,
            sandbox_roots=None if plan is None else plan.allowed,
            serve=options.serve if options.serve.methods else None,
        )
        self._core.trace = request_tracer(options.trace_context, getattr(options.observer, "trace_request", None))
        # The line buffer exists before the agent does: memory is budgeted first.
        reader = LineReader(None, options.reader_limits)
        self._closed = False
        self._failure: BaseException | None = None
        self._proc = AgentProcess.spawn(
            options.command,
            cwd=options.cwd,
            env=agent_env(options.env, process_context(options.trace_context, options.observer, options.command)),
            stderr=options.stderr,
            supervise=options.supervise,
            kill_grace=options.kill_grace,
            tail_thread=tail_thread,
            sandbox=plan,
        )
        self._services: Services | None = None
        if options.serve.methods:
            from ._services import Services

            self._services = Services(options.serve, options.kill_grace, self._proc.wake)
        self._driver = CallDriver(
            self._core,
            reader,
            read_into=self._proc.read_into,
            write=self._proc.write,
            callbacks=callbacks,
            cancel_grace=options.cancel_grace,
            cooperative=cooperative,
            services=self._services,
        )
        self._runner: object | None = None
        """The thread or task running a call (or a close) now, so that a re-entrant close is refused."""
        self._stream: StreamBase[Any] | None = None
        """A streamed prompt that holds the client between two of its consumer's requests."""

    def __del__(self) -> None:
        # A client dropped without close() must not leave its agent behind: kill the group at once.
        services = getattr(self, "_services", None)
        if services is not None:
            with contextlib.suppress(Exception):
                services.begin_close()
        proc = getattr(self, "_proc", None)
        if proc is not None and not proc.closed:
            with contextlib.suppress(Exception):
                proc.terminate(0)

    # ----------------------------------------------------------------------------------------------------------
    # What the caller can read.

    @property
    def pid(self) -> int:
        """The agent's process id (also its process group id)."""
        return self._proc.pid

    @property
    def epoch(self) -> int:
        """The transport epoch every record of this client carries."""
        return self.options.epoch

    @property
    def last_seq(self) -> int:
        """The seq of the last update received (0 before the first).

        The client decodes the updates of one read before it records them, so inside ``on_update`` this may be
        ahead of the update being recorded: use ``update.seq`` there."""
        return self._core.seq

    @property
    def agent(self) -> Initialize | None:
        """The agent's answer to ``initialize``, once it came."""
        return self._core.agent

    @property
    def closed(self) -> bool:
        """Whether the client was closed or torn down after a failure."""
        return self._closed

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it was reaped (negative: the signal that ended it)."""
        return self._proc.returncode

    def stderr_tail(self) -> bytes | None:
        """The last 64 KiB of the agent's stderr, when ``Options(stderr="tail")``."""
        return self._proc.stderr_tail()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<tinyacp.{type(self).__name__} pid={self.pid} epoch={self.epoch} {state}>"

    # ----------------------------------------------------------------------------------------------------------
    # Rules both shells follow.

    def _ensure_open(self) -> None:
        if self._closed:
            raise ClientClosed(
                "the client is closed" + (f" (after {type(self._failure).__name__})" if self._failure else "")
            )

    def _deadline(self, timeout: float | None) -> float:
        # Both were checked where they came in: the call's in its CallSpec, the default in Options.
        if timeout is None:
            timeout = self.options.timeout
        return math.inf if timeout is None else time.monotonic() + timeout

    def _absolute(self, cwd: str | os.PathLike[str]) -> str:
        return os.path.abspath(os.fspath(cwd))

    def session_state(self, session_id: str) -> SessionState:
        """The session's modes, config options, models and commands as the agent last reported them.

        Mode, config option and command updates are applied once the observer has recorded them, and a
        successful ``set_mode``, ``set_config_option`` or ``set_model`` too.

        Raises:
            UsageError: the agent never opened or reported on this session in this client.
        """
        return self._core.session_state(session_id)

    def _exited(self, what: str) -> AgentExited:
        """How the agent ended, after the teardown (its exit status is known only after the reap)."""
        return AgentExited(what, returncode=self._proc.returncode, stderr_tail=self._proc.stderr_tail())

    # ----------------------------------------------------------------------------------------------------------
    # Running a call: what each shell's own loop calls.

    def _hold(self) -> None:
        """Take the client for one call (or a stream); each shell holds it its own way.

        Raises:
            ClientBusy: another call is in flight.
        """
        raise NotImplementedError

    def _release(self) -> None:
        """Give the client back."""
        raise NotImplementedError

    def _calling(self, spec: CallSpec[T], stream: StreamBase[Any] | None = None) -> Steps[T]:
        """One call, from the first step to the last: hold the client, run the call (streamed to ``stream``, if
        given) through :meth:`_guarded`, release the client; nothing is written before the shell runs it.

        Raises:
            ClientBusy: another call is in flight.
            ClientClosed: the client is closed.
        """
        self._hold()
        self._stream = stream
        try:
            self._ensure_open()
            if spec.notification:  # no answer to wait for: the agent gets cancel_grace to take the line, as a cancel
                sent = self._driver.send_now(spec.build().message, time.monotonic() + self.options.cancel_grace)
                driven = cast("Driven[T]", sent)  # a notification's spec is a CallSpec[None]
            else:
                deadline = self._deadline(spec.timeout)
                driven = self._driver.call(spec.build(), deadline, prompt=spec.prompt, stream=stream is not None)
            return (yield from self._guarded(driven, spec.prompt))
        finally:
            self._stream = None
            self._release()

    @staticmethod
    def _step(steps: Steps[T], value: Any, error: BaseException | None) -> ShellStep | Finished[T]:
        """One turn of the trampoline: resume ``steps`` with ``value`` (or throw ``error`` in); what it yields
        next, or what it returned."""
        try:
            return steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return Finished(stop.value)

    @staticmethod
    def _answer(event: Update | Finished[T]) -> T:
        """What a call that does not stream returned."""
        assert isinstance(event, Finished), "only a streamed prompt hands out updates"
        return event.value

    async def _run(self, steps: Steps[T], value: Any = None) -> Update | Finished[T]:
        """Run ``steps`` until it returns, or (streaming) until it hands out an update, doing what each step asks
        the way this shell does it (:meth:`_wait`, :meth:`_await`, :meth:`_tear_down`, :meth:`_checkpoint`).

        The one run loop of both shells, written as a coroutine: the asyncio shell awaits it; the sync shell's
        waits block instead of suspending it, so :func:`run_blocking` runs it to its end in one step. A failure
        while waiting (Ctrl-C, an observer's awaitable that failed) is thrown into ``steps``, so the call ends as
        any failure does, unless :meth:`_interrupted` says it stops the run at once (a cancelled task).
        """
        error: BaseException | None = None
        runner, self._runner = self._runner, self._current()
        try:
            while True:
                step = self._step(steps, value, error)
                value = error = None
                try:
                    if isinstance(step, WaitFor):
                        value = await self._wait(step)
                    elif isinstance(step, Update | Finished):
                        return step
                    elif isinstance(step, Await):
                        value = await self._await(step.awaitable)
                    elif isinstance(step, TearDown):
                        await self._tear_down()
                    elif isinstance(step, Checkpoint):
                        await self._checkpoint()
                    else:
                        assert_never(step)
                except BaseException as exc:
                    if await self._interrupted(steps, exc):
                        raise
                    error = exc
        finally:
            self._runner = runner

    # How this shell waits, each written by the shell (the sync one blocks, never suspending the run).

    async def _wait(self, wait: WaitFor) -> bool:
        """Until what ``wait`` asks for is ready, someone wakes the client or the agent exits, at most until the
        deadline: True when the agent's exit was seen."""
        raise NotImplementedError

    async def _await(self, awaitable: Awaitable[Any]) -> Any:
        """What an observer method's awaitable gives."""
        raise NotImplementedError

    async def _tear_down(self) -> None:
        """The teardown, this shell's way."""
        raise NotImplementedError

    async def _checkpoint(self) -> None:
        """Let whatever else shares this thread run."""
        raise NotImplementedError

    async def _interrupted(self, steps: Steps[Any], exc: BaseException) -> bool:
        """Whether ``exc``, raised while waiting, stops the run at once (after what it needs) instead of being
        thrown into ``steps``."""
        raise NotImplementedError

    def _current(self) -> object:
        """Who runs a call now: the thread, or the task."""
        raise NotImplementedError

    def _running(self) -> bool:
        """Whether a thread or a task is running a call of this client right now (not waiting for its consumer)."""
        return self._runner is not None

    def _reentered(self) -> bool:
        """Whether the client is called from inside its own call (an observer method)."""
        return self._runner is not None and self._runner == self._current()

    def _guarded(self, driven: Driven[T], prompt: bool) -> Steps[T]:
        """``driven``, and if it fails, the teardown its failure needs (:data:`TEARDOWN`) before the error is
        raised: the agent gone, a broken rule, a prompt past its deadline, a line half written (what follows it
        would be glued to it) tear the agent down; an error about one answer, or the deadline of a call other
        than a prompt whose lines all reached the pipe, leaves the client usable. The agent gone is raised as
        :class:`~tinyacp.AgentExited`, once the reap told how it ended."""
        try:
            return (yield from driven)
        except GeneratorExit:
            raise
        except BaseException as exc:
            if self._tears_down(exc, prompt):
                _log.info("the call ended with %s: tearing the agent (pid %d) down", type(exc).__name__, self.pid)
                yield TEARDOWN
            if not isinstance(exc, Gone):
                raise
            raise self._exited(exc.what) from None

    def _tears_down(self, exc: BaseException, prompt: bool) -> bool:
        if isinstance(exc, Gone):
            self._gone = True  # raised as AgentExited once reaped; a tracing observer names it so
            return True
        if isinstance(exc, _KEEP_CLIENT):
            return False
        if isinstance(exc, AgentTimeout) and not prompt and not self._driver.writing:
            return False
        if self._failure is None:
            self._failure = exc
        return True

    def _closing(self) -> Steps[None]:
        """A close: record what the agent already sent, then tear it down whatever happens. Only an observer's
        failure (or an interruption) is raised; the agent's last words breaking a rule are kept as the failure,
        since we are closing anyway."""
        _log.info("closing: recording what the agent (pid %d) already sent, then stopping it", self.pid)
        try:
            yield from self._driver.drain()
        except GeneratorExit:
            raise
        except Exception as exc:
            if isinstance(exc, ObserverError):
                yield TEARDOWN
                raise
            self._failure = exc
        except BaseException:
            yield TEARDOWN
            raise
        yield TEARDOWN

    def _cancelling(self) -> Steps[None]:
        """With no call in flight (the client held): write the cancels asked for, giving the agent
        ``cancel_grace`` to take them; after a close, forget them."""
        if self._closed:
            self._driver.cancels.clear()
            return
        yield from self._guarded(self._driver.send_cancels(time.monotonic() + self.options.cancel_grace), False)

    def _abandon_idle_stream(self) -> None:
        """A close while a prompt stream that its consumer left (without closing it) holds the client: the stream
        lets go of it, so that the close can go on."""
        stream = self._stream
        if stream is not None and not self._running():
            stream.abandon()

    def _teardown(self) -> None:
        """Unconditional: whatever happened, the agent's whole group goes and our fds close (blocking)."""
        self._closed = True
        self._core.end_call()
        if self._services is not None:
            self._services.begin_close()
        try:
            self._proc.terminate(self.options.kill_grace)
        finally:
            if self._services is not None:
                self._services.close()
        self._trace_exit()

    def _trace_exit(self) -> None:
        """The agent is gone: a tracing observer (:mod:`tinyacp.otel`) ends the process's span."""
        exited = getattr(self.options.observer, "trace_exit", None)
        if callable(exited):
            failure = self._failure
            if failure is None and getattr(self, "_gone", False):
                failure = AgentExited("the agent exited before the call had its answer")
            exited(self._proc.returncode, failure)

    def kill(self) -> None:
        """The hard stop: SIGTERM to the agent's whole group now, SIGKILL after ``kill_grace``.

        Safe from any thread, any task and a signal handler (it only sets flags, sends signals, writes one byte
        to a pipe and starts one timer thread). A call in flight raises :class:`~tinyacp.AgentExited`.
        """
        self._driver.killed = True
        if not self._proc.closed:
            self._proc.start_kill(self.options.kill_grace)

    def _queue_cancel(self, session_id: str, meta: Meta | None = None) -> None:
        self._ensure_open()
        if not isinstance(session_id, str):
            raise TypeError("session_id must be a str")
        self._core.check_cancel(session_id, meta)  # a cancel too long to send is refused here, not mid-call
        self._driver.cancels.append((session_id, meta))
        self._proc.wake()
        _log.debug("session/cancel asked for session %s", session_id)

    def _refuse_reentry(self) -> None:
        """A close from inside an observer method of this client would wait for itself.

        Raises:
            ClientBusy: the close is made from inside an observer method of this client.
        """
        if self._reentered():
            raise ClientBusy("close() from inside an observer method would wait for itself; use kill()")


S = TypeVar("S", bound=ShellBase)


class StreamBase(Generic[S]):
    """What both prompt streams share: the call, started at the first request for an update and holding the
    client until the turn ends (or the consumer leaves), and the result.

    A shell's stream runs :meth:`_next_update` and :meth:`_leave_turn` its own way (blocking, or awaited).
    """

    def __init__(self, client: S, spec: CallSpec[PromptResult]) -> None:
        self._client = client
        self._spec = spec
        self._steps: Steps[PromptResult] | None = None
        self._result: PromptResult | None = None
        self._leaving = False
        """The consumer leaves early: the next resume tells the driver so (once)."""
        self._abandoned = False

    @property
    def result(self) -> PromptResult:
        """The turn's result, once the iteration ended.

        Raises:
            UsageError: the turn has not ended yet.
        """
        if self._result is None:
            raise UsageError("the turn has not ended yet: iterate the stream to its end first")
        return self._result

    def abandon(self) -> None:
        """The consumer left mid-turn and nobody advances the stream: release the client (for closing)."""
        self._abandoned = True
        if self._steps is not None:
            self._steps.close()

    def _leave(self) -> bool:
        """The consumer leaves early: whether there is a turn to cancel and read to its end."""
        if self._steps is None or _over(self._steps):
            return False
        self._leaving = True
        return True

    async def _next_update(self) -> Update | None:
        """The next update of the turn's session; None once the turn is over (ended, failed or abandoned).

        Written as one method, since it runs per streamed update: the call is created at the first request for an
        update; the resume sends the driver True once, when the consumer left early (else None, which also starts
        it); an update is handed out, and the result kept once the turn ended."""
        steps = self._steps
        if steps is None:
            steps = self._steps = self._client._calling(self._spec, self)
        if self._abandoned or _over(steps):
            return None
        leaving, self._leaving = self._leaving, False
        event = await self._client._run(steps, True if leaving else None)
        if isinstance(event, Update):
            return event
        self._result = event.value
        return None

    async def _leave_turn(self) -> None:
        """The consumer leaves early: the turn is cancelled and read to its end (the driver streams no more, so
        one run ends it), or to its deadline, which tears the agent down: all that leaving asked for."""
        if self._leave():
            with contextlib.suppress(AgentTimeout):
                await self._next_update()


def _over(steps: Steps[Any]) -> bool:
    """Whether the generator returned or raised (or was closed): only then has it no frame, which is what
    ``inspect.getgeneratorstate`` reads as ``GEN_CLOSED``, read here without its call (this runs per streamed
    update)."""
    return steps.gi_frame is None  # type: ignore[attr-defined]  # every Steps is a generator object


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine of the sync shell to its end: its waits block, so it never suspends.

    Raises:
        RuntimeError: it suspended after all (something awaited a real future).
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise RuntimeError("a coroutine of the sync client suspended")
