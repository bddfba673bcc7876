"""The call driver: the one loop that runs a call, for both shells.

A call is a generator (:meth:`CallDriver.call`) that reads and writes the agent's pipes without ever blocking,
hands each line to the core (:mod:`tinyacp._conversation`), calls the observer, and checks the clock once per
read batch. It yields to its shell only what a shell does its own way, as one of the frozen values of
:data:`Step` (a closed set: the shells' one run loop, :meth:`tinyacp._shell.ShellBase._run`, matches it
exhaustively, and mypy checks that it does):

* :class:`WaitFor`: block until the agent's output is readable (``read``), its input is writable (``write``),
  the agent exits or another thread wakes the client, or until ``deadline``; send back whether the agent's exit
  was seen. The sync shell polls; the asyncio shell registers reader/writer callbacks.
* :data:`CHECKPOINT`, when the driver is cooperative and has not waited for 5 ms: the asyncio shell lets the
  other tasks of its loop run, so that an agent that floods cannot starve them.
* :class:`Await`: an awaitable an observer method returned: the asyncio shell awaits it and sends the result
  back (or throws its exception in); the sync shell throws in an :class:`~tinyacp.ObserverError`.
* in a streamed prompt, each :class:`~tinyacp.Update` itself, after it was recorded: the shell hands it to the
  stream's consumer, and resumes the driver with True once the consumer left early (the turn is then cancelled).

An update is recorded on the hot path without any yield, and with no frame of its own: the core decodes the
updates of a read a run at a time (:meth:`~tinyacp._conversation.Conversation.receive_updates`), the observer
records each, then the core collects the run. The driver writes while it reads (full duplex): our lines wait in
a short queue, written as the agent takes them, while the agent's lines keep being read and recorded.

What lives as long as the client is on the :class:`CallDriver` (the queue, the lines read but not handled yet,
the kill flag, the cancels asked for, the flush point, when the event loop last ran); what one call needs (its
deadline, whether it is a prompt in its grace, whether it streams) is in a :class:`_Run` the call creates, gone
when the call ends. The pipes come as two functions that never raise for what a pipe does
(:meth:`~tinyacp._process.AgentProcess.read_into` and :meth:`~tinyacp._process.AgentProcess.write`): the OS
errors are mapped there, once.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar, cast

import msgspec

from ._conversation import ON_PERMISSION_DECISION, ON_SEND, ON_UPDATE, Call, Conversation, Done, Meta, Reaction, Record
from ._errors import AgentTimeout, ObserverError
from ._log import CLIENT as _log
from ._log import PERMISSIONS as _permissions_log
from ._process import CLOSED, WOULD_BLOCK
from ._records import OutgoingMessage, Update
from ._serve import Act
from .reader import LineReader, ReaderEvent

if TYPE_CHECKING:
    from ._services import Services

__all__ = ["CHECKPOINT", "ON_FLUSH", "Await", "CallDriver", "Checkpoint", "Driven", "Gone", "Step", "WaitFor"]

T = TypeVar("T")

ON_FLUSH: Final = "flush"

_MAX_QUEUED: Final = 64
"""Lines of ours waiting to be written. Past it the driver stops taking the agent's lines (each may ask for an
answer) until the agent reads its input: it holds one request, its answers and its cancels, nothing unbounded."""

_MAX_QUEUED_BYTES: Final = 8 << 20
"""Bytes of our lines waiting to be written, past which the driver stops taking the agent's lines as past
``_MAX_QUEUED``: answers to served requests can be large (a read, a terminal's output of up to 1 MiB), and an
agent that floods ``terminal/output`` without reading its input must not grow our memory."""

_SALVAGE_BYTES: Final = 1 << 20
"""How much of the agent's output a close (or a failed write) still reads and records: 1 MiB, the largest pipe
buffer Linux gives an unprivileged process (``/proc/sys/fs/pipe-max-size``), so what is already in the pipe."""

_FAIR_SLICE: Final = 0.005
"""A cooperative driver lets the event loop run at least this often (seconds) while the agent floods: 5 ms, a
tenth of the 50 ms a ticker task may stall at most; a checkpoint per read batch would cost a loop cycle per
pipe read, a tenth of the client's time when the agent writes in small pieces."""

_NEED_DATA: Final = ReaderEvent.NEED_DATA
_END_OF_INPUT: Final = ReaderEvent.END_OF_INPUT


class WaitFor(msgspec.Struct, frozen=True, gc=False):
    """Block until one of these is ready or the deadline passes; send back whether the agent's exit was seen."""

    read: bool
    """Wake when the agent's output is readable."""
    write: bool
    """Wake when the agent's input is writable."""
    deadline: float
    """The monotonic time to wake at, whatever happens (``math.inf``: none)."""


class Checkpoint(msgspec.Struct, frozen=True, gc=False):
    """Let the other tasks of the event loop run; send back nothing."""


CHECKPOINT: Final = Checkpoint()
"""The one :class:`Checkpoint` (yielded by a cooperative driver at least every 5 ms of work)."""


class Await(msgspec.Struct, frozen=True, gc=False):
    """Await what an observer method returned; send back its result, or throw in its exception."""

    awaitable: Awaitable[Any]


Step: TypeAlias = WaitFor | Checkpoint | Await | Update
"""What a driver generator yields: a closed set, which the shells' run loop matches exhaustively."""

Driven: TypeAlias = Generator[Step, Any, T]
"""A driver generator that returns ``T``."""


class Gone(Exception):
    """The agent is gone or was stopped: the shell tears down and raises :class:`~tinyacp.AgentExited`."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _no_observer(update: object) -> None:
    raise AssertionError("the core hands out no update without an observer")


def _log_decision(request: Any) -> None:
    """A permission decision, once recorded: the tool and the outcome, never the tool's input."""
    tool = request.tool_call
    _permissions_log.info(
        "session %s: %s %r (%s): %s by %s%s",
        request.session_id,
        tool.kind or "tool",
        tool.title,
        tool.name or "unnamed",
        request.verdict,
        request.decided_by,
        f" ({request.reason})" if request.reason else "",
    )


def observer_failed(callback: Callable[..., Any], exc: BaseException) -> ObserverError:
    """The error a failing observer call becomes; the original is its cause."""
    name = getattr(callback, "__name__", repr(callback))
    error = ObserverError(f"the observer's {name} raised {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


class _Run:
    """One call's own state, created by the call and gone after it."""

    __slots__ = ("deadline", "grace", "prompt", "salvage", "stream")

    def __init__(self, deadline: float, *, prompt: bool = False, stream: bool = False) -> None:
        self.deadline = deadline
        """When the call ends: its deadline, or the end of the grace after its cancel."""
        self.prompt = prompt
        self.grace = False
        """A prompt that asked the agent to stop: it waits at most ``cancel_grace`` more for the answer."""
        self.stream = stream
        """Each update is handed out after it was recorded (until the consumer leaves)."""
        self.salvage = 0
        """While > 0: read only what is there (this many bytes more, less one), write nothing, wait for nothing."""


class CallDriver:
    """Runs calls against one agent: its pipes (through ``read_into`` and ``write``), the core and the observer.

    Args:
        core: the conversation.
        reader: the line buffer of the agent's output.
        read_into: a non-blocking read into a view: the count, 0 at the end of input, or
            :data:`~tinyacp._process.WOULD_BLOCK`; it raises nothing.
        write: a non-blocking write: the count, :data:`~tinyacp._process.WOULD_BLOCK` or
            :data:`~tinyacp._process.CLOSED`; it raises nothing.
        callbacks: the observer's methods by name (None where it has none).
        cancel_grace: how long a prompt waits for its answer once it asked the agent to stop.
        cooperative: yield :data:`CHECKPOINT` while the agent floods (the asyncio shell).
        clock: the monotonic clock of the deadlines.
        services: the I/O of the files and terminals served (None: none are).
    """

    def __init__(
        self,
        core: Conversation,
        reader: LineReader,
        *,
        read_into: Callable[[memoryview], int],
        write: Callable[[memoryview], int],
        callbacks: dict[str, Callable[..., Any] | None],
        cancel_grace: float,
        cooperative: bool,
        clock: Callable[[], float] = time.monotonic,
        services: Services | None = None,
    ) -> None:
        self.core = core
        self.reader = reader
        self.killed = False
        """Set by ``kill()`` (from any thread): the call in flight ends with :class:`Gone` at its next batch."""
        self.cancels: deque[tuple[str, Meta | None]] = deque()
        """Sessions (and their ``_meta``) whose ``session/cancel`` another thread asked for; written by the next
        call or batch."""
        self.agent_gone = False
        """The agent's exit was seen: once its output has nothing more, the call ends."""
        self._read_into = read_into
        self._write = write
        self._callbacks = callbacks
        self._on_update: Callable[[Any], Any] = callbacks.get(ON_UPDATE) or _no_observer
        self._on_flush = callbacks.get(ON_FLUSH)
        self._cancel_grace = cancel_grace
        self._cooperative = cooperative
        self._clock = clock
        self._out: deque[memoryview] = deque()
        self._queued = 0
        """Bytes in ``_out``."""
        self._services = services
        self._held: list[bytes] = []
        """Lines the reader handed out that no pump handled yet: a call ended before the end of their batch."""
        self._input_closed = False
        self._recorded = False
        self._flushed_seq = 0
        self._yield_at = 0.0
        """When a cooperative driver next lets the event loop run. The client's, not a call's: the loop ran at
        the last wait or checkpoint, whichever call made it, so a call that starts right after another does
        not pay an extra turn of the loop."""

    # ----------------------------------------------------------------------------------------------------------
    # What the shells run.

    def call(self, call: Call[T], deadline: float, *, prompt: bool, stream: bool = False) -> Driven[T]:
        """Send ``call`` and handle the agent's lines until its answer, which the generator returns.

        A prompt whose deadline passed, or whose reply reached a limit, asks the agent to stop once
        (``session/cancel``) and from then on waits at most ``cancel_grace`` for the answer; if that cancel (or
        the prompt itself) cannot be written, because the agent does not read its input, nothing can reach the
        agent and the prompt raises :class:`~tinyacp.AgentTimeout` at the deadline. Another call whose deadline
        passes sends ``$/cancel_request`` for its id if the pipe takes it at once, then raises
        :class:`~tinyacp.AgentTimeout`. With ``stream``, each update of the turn's session is also yielded after it
        was recorded.

        Raises:
            AgentTimeout: the deadline (or the grace after the cancel) passed.
            Gone: the agent went away or was killed (the shell raises AgentExited).
            ObserverError: the observer raised, or returned an awaitable that failed.
            ReaderExhaustion: a line passed the reader's limit.
            TransferLimitExceeded: an update broke a transfer limit.
            ProtocolViolation: the answer cannot be used.
            RequestError: the agent answered with an error.
            MissingDurableObserver: an update or a permission request came and there is no observer.
            UnsupportedProtocolVersion: the agent speaks another version.
        """
        run = _Run(deadline, prompt=prompt, stream=stream)
        message = call.message
        started = self._clock() if _log.isEnabledFor(logging.DEBUG) else None
        try:
            yield from self._send(run, message)
            done = yield from self._pump(run)
            self._sessions_ended()
            yield from self._flush()
            if started is not None:
                _log.debug("%s (id %s) answered in %.3f s", message.method, message.id, self._clock() - started)
        except GeneratorExit:
            raise
        except BaseException as exc:
            yield from self._flush_on_the_way_out(exc)
            raise
        finally:
            self.core.end_call()
        return cast(T, done.value)

    def drain(self) -> Driven[None]:
        """At close: record what the agent already sent, up to a bound, then stop; write nothing.

        Raises:
            ObserverError: the observer raised.
            ReaderExhaustion: a line passed the reader's limit.
            TransferLimitExceeded: an update broke a transfer limit.
            MissingDurableObserver: an update came and there is no observer.
        """
        try:
            yield from self._salvaged(_Run(0.0))
        except GeneratorExit:
            raise
        except BaseException as exc:
            yield from self._flush_on_the_way_out(exc)
            raise
        yield from self._flush()

    def flushed(self) -> Driven[None]:
        """The flush point, for a shell that stopped a call between two acts (a cancelled task): what was
        recorded is made durable before the shell acts, as far as the observer can (its error is not raised).
        """
        yield from self._flush_quietly()

    def send_cancels(self, deadline: float) -> Driven[None]:
        """With no call in flight: write the cancels asked for, waiting for the agent to take them until
        ``deadline`` (what is left then stays queued for the next call).

        Raises:
            ObserverError: recording a line failed.
            Gone: the agent was killed, or went away (what it wrote is recorded first).
        """
        run = _Run(deadline)
        yield from self._write_cancels(run)
        yield from self._drain_out(run)

    def send_now(self, message: OutgoingMessage, deadline: float) -> Driven[None]:
        """Record and write one line, waiting at most until ``deadline`` for the agent to take it.

        Raises:
            ObserverError: recording it failed.
            Gone: the agent went away (what it wrote is recorded first).
        """
        run = _Run(deadline)
        yield from self._send(run, message)
        yield from self._drain_out(run)

    @property
    def writing(self) -> bool:
        """Whether some of our lines are not written yet (one may be in the pipe in part)."""
        return bool(self._out)

    # ----------------------------------------------------------------------------------------------------------
    # The loop.

    def _pump(self, run: _Run) -> Driven[Done]:
        """Handle the agent's lines in order until the call has its answer.

        The hot path is the run loop, with no frame per line: the core decodes a run of updates in one pass,
        the observer records each in order, then the core collects the run. Every other line (and each update
        of a streamed prompt) takes :meth:`_line`."""
        poll_lines = self.reader.poll_lines
        receive_updates = self.core.receive_updates
        updates_recorded = self.core.updates_recorded
        on_update = self._on_update
        stream = run.stream and not run.salvage
        lines: list[bytes] = self._held
        at = 0  # lines[:at] are handled
        try:
            while True:
                if at == len(lines):
                    polled = poll_lines()
                    if polled.__class__ is list:
                        lines = polled
                        at = 0
                    else:
                        yield from self._need_data(run, polled)  # type: ignore[arg-type]  # a ReaderEvent
                    continue
                if not stream:
                    updates = receive_updates(lines, at)
                    if updates:
                        at += len(updates)
                        for update in updates:
                            try:
                                result = on_update(update)
                            except Exception as exc:
                                raise observer_failed(on_update, exc) from exc
                            if result is not None:
                                yield from self._awaited(on_update, result)
                        updates_recorded(updates)
                        continue
                at += 1
                done = yield from self._line(run, lines[at - 1])
                if done is not None:
                    return done
                stream = run.stream and not run.salvage
        finally:
            self._held = lines[at:]  # the next pump (or the close's) starts with them

    def _line(self, run: _Run, line: bytes) -> Driven[Done | None]:
        """Handle one line the way the core says; a :class:`Done` once the call has its answer."""
        event = self.core.receive(line)
        if not isinstance(event, Update):
            done = yield from self._react(run, event)
            if done is None and self._full:  # a reaction may queue an answer; an update not
                yield from self._batch(run)
                yield from self._fill(run)
            return done
        on_update = self._on_update
        try:
            result = on_update(event)
        except Exception as exc:
            raise observer_failed(on_update, exc) from exc
        if result is not None:
            yield from self._awaited(on_update, result)
        cancel = self.core.update_recorded(event)
        if cancel is not None:
            yield from self._stop_turn(run, cancel)
        if run.stream and not run.salvage and event.session_id == self.core.turn_session:
            yield from self._hand_out(run, event)
        return None

    def _need_data(self, run: _Run, event: ReaderEvent) -> Driven[None]:
        """No complete line is buffered: act once per read batch, then read more (or wait for it)."""
        if event is not _NEED_DATA:
            if event is _END_OF_INPUT:
                raise Gone("the agent closed its output before answering")
            self.reader.writable()  # raises the ReaderExhaustion that stopped the reader
        yield from self._batch(run)
        yield from self._fill(run)

    def _batch(self, run: _Run) -> Driven[None]:
        """Once per read batch: let the loop run, act on kill and cancels, write what we can, check the clock."""
        now = self._clock()
        if self._cooperative and now >= self._yield_at:
            yield CHECKPOINT
            self._yield_at = now + _FAIR_SLICE
        if self.killed:
            raise Gone("the agent was stopped by kill()")
        if run.salvage:
            return
        if self.cancels:
            yield from self._write_cancels(run)
        services = self._services
        if services is not None and services.terminals.exited:
            yield from self._terminals_ended(run, services)
        if self._out:
            yield from self._push(run)
        if now >= run.deadline:
            yield from self._deadline_passed(run)

    def _fill(self, run: _Run) -> Driven[None]:
        """Read what the agent wrote into the buffer; if nothing is there, wait (a queue too full to take more
        of the agent's lines waits for the agent to read instead)."""
        if self._full:
            read = False
        else:
            reader = self.reader
            salvage = run.salvage
            if salvage == 1:
                raise Gone("read as much as a close records")
            count = self._read_into(reader.writable())
            if count != WOULD_BLOCK:
                reader.commit(count)
                if salvage:
                    run.salvage = max(1, salvage - count)
                return
            if self.agent_gone or salvage:
                raise Gone("the agent exited before answering")
            read = True
        yield from self._flush()
        if (yield WaitFor(read, bool(self._out), run.deadline)):
            self.agent_gone = True
        self._yield_at = self._clock() + _FAIR_SLICE  # a wait let the loop run

    def _react(self, run: _Run, reaction: Reaction) -> Driven[Done | None]:
        """Run the core's reaction to a line: its records and writes, in its order."""
        callbacks = self._callbacks
        value: Any = None
        try:
            while True:
                effect = reaction.send(value)
                if isinstance(effect, Record):
                    value = yield from self._record(callbacks[effect.callback], effect.value)
                    if effect.callback == ON_PERMISSION_DECISION and _permissions_log.isEnabledFor(logging.INFO):
                        _log_decision(effect.value)
                elif isinstance(effect, Act):
                    assert self._services is not None, "the core acts only on what is served"
                    value = self._services.act(effect)
                else:
                    value = None
                    yield from self._send(run, effect.message)
        except StopIteration as stop:
            return cast("Done | None", stop.value)

    def _hand_out(self, run: _Run, update: Update) -> Driven[None]:
        """Stream an update to the consumer (after the flush point). When the shell resumes with True, the
        consumer left early: cancel the turn once, stop streaming and wait at most ``cancel_grace``."""
        yield from self._flush()
        if not (yield update):
            return
        run.stream = False
        _log.debug("the stream's consumer left the turn early: cancelling it")
        cancel = self.core.cancel_turn_once()
        if cancel is not None:
            yield from self._send(run, cancel)
        self._enter_grace(run)

    # ----------------------------------------------------------------------------------------------------------
    # Deadlines and cancels.

    def _enter_grace(self, run: _Run) -> None:
        if not run.grace:
            run.grace = True
            run.deadline = min(run.deadline, self._clock() + self._cancel_grace)

    def _stop_turn(self, run: _Run, cancel: OutgoingMessage) -> Driven[None]:
        """A reply limit was reached: send the one cancel; a prompt then waits at most ``cancel_grace``."""
        _log.info("a reply limit was reached: session/cancel sent")
        yield from self._send(run, cancel)
        if run.prompt:
            self._enter_grace(run)

    def _deadline_passed(self, run: _Run) -> Driven[None]:
        if run.prompt and not run.grace:
            cancel = self.core.deadline_passed()
            if cancel is not None:
                yield from self._send(run, cancel)
            if self._out:
                # The agent has not read our lines (the prompt, or the cancel): no cancel can reach it, so no
                # answer to one is waited for.
                _log.info("the prompt's deadline passed and the agent does not read its input: no cancel can reach it")
                raise AgentTimeout("the agent did not read its input by the deadline: session/cancel cannot reach it")
            run.grace = True
            run.deadline = self._clock() + self._cancel_grace
            _log.info(
                "the prompt's deadline passed: session/cancel sent, %.1f s of grace for the answer", self._cancel_grace
            )
            return
        if run.prompt:
            raise AgentTimeout("the agent did not end the turn within cancel_grace after session/cancel")
        request = self.core.cancel_request() if not self._out else None
        if request is not None:  # best effort: written if the pipe takes it now, never waited for
            yield from self._send(run, request)
        _log.info("the deadline passed without an answer%s", "; $/cancel_request sent" if request is not None else "")
        raise AgentTimeout("the agent did not answer in time")

    @property
    def _full(self) -> bool:
        """Whether our queue is too long to take more of the agent's lines (each may ask for an answer)."""
        return len(self._out) > _MAX_QUEUED or self._queued > _MAX_QUEUED_BYTES

    def _terminals_ended(self, run: _Run, services: Services) -> Driven[None]:
        """Commands that ended: answer the ``terminal/wait_for_exit`` requests waiting for them."""
        for terminal in services.terminals.take_exits():
            exit = terminal.exit
            assert exit is not None, "a terminal is reported once its command is reaped"
            for answer in self.core.terminal_exited(terminal.session_id, terminal.id, exit):
                yield from self._send(run, answer)

    def _sessions_ended(self) -> None:
        """Sessions closed by the call that just ended: their terminals are released."""
        ended = self.core.ended_sessions
        while ended:
            session_id = ended.pop()
            if self._services is not None:
                self._services.end_session(session_id)

    def _write_cancels(self, run: _Run) -> Driven[None]:
        """Write the cancels other threads asked for, in this thread and in order; a kill ends the call."""
        if self.killed:
            raise Gone("the agent was stopped by kill()")
        cancels = self.cancels
        while cancels:
            session_id, meta = cancels.popleft()
            yield from self._send(run, self.core.cancel(session_id, meta))

    # ----------------------------------------------------------------------------------------------------------
    # Our lines.

    def _send(self, run: _Run, message: OutgoingMessage) -> Driven[None]:
        """Record the line with ``on_send``, flush, then write it (or queue what the agent cannot take yet)."""
        if run.salvage or self._input_closed:
            return
        yield from self._record(self._callbacks.get(ON_SEND), message)
        yield from self._flush()
        self._out.append(memoryview(message.raw + b"\n"))
        self._queued += len(message.raw) + 1
        yield from self._push(run)

    def _push(self, run: _Run) -> Driven[None]:
        """Write queued lines until the pipe is full. If the agent is gone, record what it wrote, then end."""
        out = self._out
        write = self._write
        while out:
            data = out[0]
            written = write(data)
            if written >= 0:
                self._queued -= written
            if written == len(data):
                out.popleft()
            elif written >= 0:
                out[0] = data[written:]
            elif written == WOULD_BLOCK:
                return
            else:
                assert written == CLOSED
                self._input_closed = True
                out.clear()
                self._queued = 0
                yield from self._salvaged(run)
                raise Gone("the agent closed its input")

    def _drain_out(self, run: _Run) -> Driven[None]:
        """Wait (writing only) until the queue is empty or the deadline passed."""
        while self._out and self._clock() < run.deadline:
            if self.killed:
                raise Gone("the agent was stopped by kill()")
            if (yield WaitFor(False, True, run.deadline)):
                self.agent_gone = True
            yield from self._push(run)

    def _salvaged(self, run: _Run) -> Driven[None]:
        """Read and record what the agent already wrote (bounded), acting on none of it."""
        run.salvage = _SALVAGE_BYTES + 1
        try:
            yield from self._pump(run)
        except Gone:
            pass
        finally:
            run.salvage = 0

    # ----------------------------------------------------------------------------------------------------------
    # The observer.

    def _record(self, callback: Callable[[Any], Any] | None, value: object) -> Driven[Any]:
        if callback is None:
            return None
        self._recorded = True
        try:
            result = callback(value)
        except Exception as exc:
            raise observer_failed(callback, exc) from exc
        if result is not None:
            result = yield from self._awaited(callback, result)
        return result

    def _awaited(self, callback: Callable[..., Any], result: Any) -> Driven[Any]:
        """An observer method's result; an awaitable is handed to the shell, which awaits it (or refuses)."""
        if not hasattr(result, "__await__"):
            return result
        try:
            return (yield Await(result))
        except ObserverError:
            raise
        except Exception as exc:
            raise observer_failed(callback, exc) from exc

    def _flush(self) -> Driven[None]:
        """The flush point: tell the observer to make what it recorded durable, if anything was recorded."""
        flush = self._on_flush
        if flush is None:
            return
        seq = self.core.seq
        if not self._recorded and seq == self._flushed_seq:
            return
        self._recorded = False
        self._flushed_seq = seq
        try:
            result = flush()
        except Exception as exc:
            raise observer_failed(flush, exc) from exc
        if result is not None:
            yield from self._awaited(flush, result)

    def _flush_on_the_way_out(self, error: BaseException) -> Driven[None]:
        """The flush point before ``error`` leaves a call: an error is reported after the flush (or the flush's
        own failure instead), an interruption (Ctrl-C, a cancelled task) stays what is raised."""
        if isinstance(error, Exception):
            yield from self._flush_before_raising(error)
        else:
            yield from self._flush_quietly()

    def _flush_before_raising(self, error: Exception) -> Driven[None]:
        """The flush point before a call raises ``error``: if the flush fails, what was recorded is not durable,
        and that is what the caller must hear: the :class:`~tinyacp.ObserverError` is raised instead, with
        ``error`` as its context."""
        if isinstance(error, ObserverError):  # the observer already failed: its error is the one to report
            yield from self._flush_quietly()
            return
        try:
            yield from self._flush()
        except ObserverError as failed:
            failed.__context__ = error  # the flush's own error stays its cause
            raise

    def _flush_quietly(self) -> Driven[None]:
        """The flush point on the way out with an interruption (a cancelled task, Ctrl-C): that stays what is
        raised, whether the flush works or not."""
        with contextlib.suppress(Exception):
            yield from self._flush()
