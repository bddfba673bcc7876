"""The call driver: the one loop that runs a call, for both shells.

A call is a generator (:meth:`CallDriver.call`) that reads and writes the agent's pipes without ever blocking,
hands each line to the core (:mod:`tinyacp._conversation`), calls the observer, and checks the clock once per
read batch. It yields to its shell only what a shell does its own way:

* :class:`Wait` (the driver's one instance): block until the agent's output is readable (``read``), its input
  is writable (``write``), the agent exits or another thread wakes the client, or until ``deadline``; send back
  whether the agent's exit was seen. The sync shell polls; the asyncio shell registers reader/writer callbacks.
* :data:`CHECKPOINT`, when the driver is cooperative and has not waited for 5 ms: the asyncio shell lets the
  other tasks of its loop run, so that an agent that floods cannot starve them.
* an awaitable an observer method returned: the asyncio shell awaits it and sends the result back (or throws
  its exception in); the sync shell throws in an :class:`~tinyacp.ObserverError`.
* in a streamed prompt, each :class:`~tinyacp.Update` itself, after it was recorded: the stream hands it to its
  consumer and resumes the driver when asked for the next one.

An update is recorded on the hot path without any yield, and with no frame of its own: the core decodes the
updates of a read a run at a time (:meth:`~tinyacp._conversation.Conversation.receive_updates`), the observer
records each, then the core collects the run. The driver writes while it reads (full duplex): our
lines wait in a short queue, written as the agent takes them, while the agent's lines keep being read and
recorded. Its state (the queue, the kill flag, the cancels asked for) lives as long as the client.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeAlias, TypeVar, cast

from ._conversation import ON_SEND, ON_UPDATE, Call, Conversation, Done, Reaction, Record
from ._errors import AgentTimeout, ObserverError
from ._records import OutgoingMessage, Update
from .reader import LineReader, ReaderEvent

__all__ = ["CHECKPOINT", "ON_FLUSH", "CallDriver", "Driven", "Gone", "Wait", "observer_failed"]

T = TypeVar("T")

ON_FLUSH: Final = "flush"

_MAX_QUEUED: Final = 64
"""Lines of ours waiting to be written. Past it the driver stops taking the agent's lines (each may ask for an
answer) until the agent reads its input: it holds one request, its answers and its cancels, nothing unbounded."""

_SALVAGE_BYTES: Final = 1 << 20
"""How much of the agent's output a close (or a failed write) still reads and records: 1 MiB, the largest pipe
buffer Linux gives an unprivileged process (``/proc/sys/fs/pipe-max-size``), so what is already in the pipe."""

_FAIR_SLICE: Final = 0.005
"""A cooperative driver lets the event loop run at least this often (seconds) while the agent floods: 5 ms, a
tenth of the 50 ms a ticker task may stall at most; a checkpoint per read batch would cost a loop cycle per
pipe read, a tenth of the client's time when the agent writes in small pieces."""

_NEED_DATA: Final = ReaderEvent.NEED_DATA
_END_OF_INPUT: Final = ReaderEvent.END_OF_INPUT


class Wait:
    """Block until one of these is ready or the deadline passes; send back whether the agent's exit was seen."""

    __slots__ = ("deadline", "read", "write")

    def __init__(self) -> None:
        self.deadline = 0.0
        self.read = True
        """Wake when the agent's output is readable."""
        self.write = False
        """Wake when the agent's input is writable."""


class _Checkpoint:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CHECKPOINT"


CHECKPOINT: Final = _Checkpoint()
"""Let the other tasks of the event loop run (yielded by a cooperative driver at least every 5 ms of work)."""

Driven: TypeAlias = Generator[Any, Any, T]
"""A driver generator that returns ``T``: it yields :class:`Wait`, :data:`CHECKPOINT`, awaitables and, when
streaming, updates."""


class Gone(Exception):
    """The agent is gone or was stopped: the shell tears down and raises :class:`~tinyacp.AgentExited`."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _no_observer(update: object) -> None:
    raise AssertionError("the core hands out no update without an observer")


def observer_failed(callback: Callable[..., Any], exc: BaseException) -> ObserverError:
    """The error a failing observer call becomes; the original is its cause."""
    name = getattr(callback, "__name__", repr(callback))
    error = ObserverError(f"the observer's {name} raised {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


class CallDriver:
    """Runs calls against one agent: its pipes (through ``read_into`` and ``write``), the core and the observer.

    Args:
        core: the conversation.
        reader: the line buffer of the agent's output.
        read_into: a non-blocking read into a view: the count, 0 at the end of input, or ``BlockingIOError``.
        write: a non-blocking write: the count, or ``BlockingIOError``, ``BrokenPipeError``.
        callbacks: the observer's methods by name (None where it has none).
        cancel_grace: how long a prompt waits for its answer once it asked the agent to stop.
        cooperative: yield :data:`CHECKPOINT` while the agent floods (the asyncio shell).
        clock: the monotonic clock of the deadlines.
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
    ) -> None:
        self.core = core
        self.reader = reader
        self.wait = Wait()
        """The one :class:`Wait` this driver yields."""
        self.killed = False
        """Set by ``kill()`` (from any thread): the call in flight ends with :class:`Gone` at its next batch."""
        self.cancels: deque[str] = deque()
        """Sessions whose ``session/cancel`` another thread asked for; written by the next call or batch."""
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
        self._held: list[bytes] = []
        """Lines the reader handed out that no pump handled yet: a call ended before the end of their batch."""
        self._input_closed = False
        self._recorded = False
        self._flushed_seq = 0
        # The call in flight.
        self._deadline = 0.0
        self._prompt = False
        self._grace = False
        self._stream = False
        self._leave_early = False
        self._yield_at = 0.0
        """When a cooperative driver next lets the event loop run."""
        self._salvage = 0
        """While > 0: read only what is there (this many bytes more, less one), write nothing, wait for nothing."""

    # ----------------------------------------------------------------------------------------------------------
    # What the shells run.

    def call(self, call: Call[T], deadline: float, *, prompt: bool, stream: bool = False) -> Driven[T]:
        """Send ``call`` and handle the agent's lines until its answer, which the generator returns.

        A prompt whose deadline passed, or whose reply reached a limit, asks the agent to stop once
        (``session/cancel``) and from then on waits at most ``cancel_grace`` for the answer. Another call whose
        deadline passes sends ``$/cancel_request`` for its id, then raises :class:`~tinyacp.AgentTimeout`.
        With ``stream``, each update is also yielded after it was recorded.

        Raises:
            AgentTimeout: the deadline (or the grace after the cancel) passed.
            Gone: the agent went away or was killed (the shell raises AgentExited).
            ObserverError, ReaderExhaustion, TransferLimitExceeded, ProtocolViolation, RequestError,
            MissingDurableObserver, UnsupportedProtocolVersion: as the core and the observer say.
        """
        self._deadline = deadline
        self._prompt = prompt
        self._grace = False
        self._stream = stream
        self._leave_early = False
        try:
            yield from self._send(call.message)
            done = yield from self._pump()
            yield from self._flush()
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
            ObserverError, ReaderExhaustion, TransferLimitExceeded, MissingDurableObserver: as in a call.
        """
        try:
            yield from self._salvaged()
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
        self._deadline = deadline
        yield from self._write_cancels()
        yield from self._drain_out()

    def send_now(self, message: OutgoingMessage, deadline: float) -> Driven[None]:
        """Record and write one line, waiting at most until ``deadline`` for the agent to take it.

        Raises:
            ObserverError: recording it failed.
            Gone: the agent went away (what it wrote is recorded first).
        """
        self._deadline = deadline
        yield from self._send(message)
        yield from self._drain_out()

    @property
    def writing(self) -> bool:
        """Whether some of our lines are not written yet (one may be in the pipe in part)."""
        return bool(self._out)

    def leave_early(self) -> None:
        """A streamed prompt's consumer leaves: at the next resume, cancel the turn once, stop streaming and
        wait at most ``cancel_grace`` for the answer."""
        self._leave_early = True

    # ----------------------------------------------------------------------------------------------------------
    # The loop.

    def _pump(self) -> Generator[Any, Any, Done]:
        """Handle the agent's lines in order until the call has its answer.

        The hot path is the run loop, with no frame per line: the core decodes a run of updates in one pass,
        the observer records each in order, then the core collects the run. Every other line (and each update
        of a streamed prompt) takes :meth:`_line`."""
        poll_lines = self.reader.poll_lines
        receive_updates = self.core.receive_updates
        updates_recorded = self.core.updates_recorded
        on_update = self._on_update
        stream = self._stream and not self._salvage
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
                        yield from self._need_data(polled)  # type: ignore[arg-type]  # a ReaderEvent
                    continue
                if not stream:
                    run = receive_updates(lines, at)
                    if run:
                        at += len(run)
                        for update in run:
                            try:
                                result = on_update(update)
                            except Exception as exc:
                                raise observer_failed(on_update, exc) from exc
                            if result is not None:
                                yield from self._awaited(on_update, result)
                        updates_recorded(run)
                        continue
                at += 1
                done = yield from self._line(lines[at - 1])
                if done is not None:
                    return done
                stream = self._stream and not self._salvage
        finally:
            self._held = lines[at:]  # the next pump (or the close's) starts with them

    def _line(self, line: bytes) -> Generator[Any, Any, Done | None]:
        """Handle one line the way the core says; a :class:`Done` once the call has its answer."""
        event: Any = self.core.receive(line)  # an Update or a Reaction, told apart by class
        if event.__class__ is not Update:
            done = yield from self._react(event)
            if done is None and len(self._out) > _MAX_QUEUED:  # a reaction may queue an answer; an update not
                yield from self._batch()
                yield from self._fill()
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
            yield from self._stop_turn(cancel)
        if self._stream and not self._salvage:
            self._stream = yield from self._hand_out(event)
        return None

    def _need_data(self, event: ReaderEvent) -> Driven[None]:
        """No complete line is buffered: act once per read batch, then read more (or wait for it)."""
        if event is not _NEED_DATA:
            if event is _END_OF_INPUT:
                raise Gone("the agent closed its output before answering")
            self.reader.writable()  # raises the ReaderExhaustion that stopped the reader
        yield from self._batch()
        yield from self._fill()

    def _batch(self) -> Driven[None]:
        """Once per read batch: let the loop run, act on kill and cancels, write what we can, check the clock."""
        now = self._clock()
        if self._cooperative and now >= self._yield_at:
            yield CHECKPOINT
            self._yield_at = now + _FAIR_SLICE
        if self.killed:
            raise Gone("the agent was stopped by kill()")
        if self._salvage:
            return
        if self.cancels:
            yield from self._write_cancels()
        if self._out:
            yield from self._push()
        if now >= self._deadline:
            yield from self._deadline_passed()

    def _fill(self) -> Driven[None]:
        """Read what the agent wrote into the buffer; if nothing is there, wait (a queue too full to take more
        of the agent's lines waits for the agent to read instead)."""
        wait = self.wait
        if len(self._out) > _MAX_QUEUED:
            wait.read, wait.write = False, True
        else:
            reader = self.reader
            salvage = self._salvage
            if salvage == 1:
                raise Gone("read as much as a close records")
            try:
                count = self._read_into(reader.writable())
            except BlockingIOError:
                if self.agent_gone or salvage:
                    raise Gone("the agent exited before answering") from None
                wait.read, wait.write = True, bool(self._out)
            else:
                reader.commit(count)
                if salvage:
                    self._salvage = max(1, salvage - count)
                return
        yield from self._flush()
        wait.deadline = self._deadline
        if (yield wait):
            self.agent_gone = True
        self._yield_at = self._clock() + _FAIR_SLICE  # a wait let the loop run

    def _react(self, reaction: Reaction) -> Generator[Any, Any, Done | None]:
        """Run the core's reaction to a line: its records and writes, in its order."""
        callbacks = self._callbacks
        value: Any = None
        effect: Any  # a Record or a Write, told apart by class
        try:
            while True:
                effect = reaction.send(value)
                if effect.__class__ is Record:
                    value = yield from self._record(callbacks[effect.callback], effect.value)
                else:
                    value = None
                    yield from self._send(effect.message)
        except StopIteration as stop:
            return cast("Done | None", stop.value)

    def _hand_out(self, update: Update) -> Generator[Any, Any, bool]:
        """Stream an update to the consumer (after the flush point); False once the consumer left early."""
        yield from self._flush()
        yield update
        if not self._leave_early:
            return True
        cancel = self.core.cancel_turn_once()
        if cancel is not None:
            yield from self._send(cancel)
        self._enter_grace()
        return False

    # ----------------------------------------------------------------------------------------------------------
    # Deadlines and cancels.

    def _enter_grace(self) -> None:
        if not self._grace:
            self._grace = True
            self._deadline = min(self._deadline, self._clock() + self._cancel_grace)

    def _stop_turn(self, cancel: OutgoingMessage) -> Driven[None]:
        """A reply limit was reached: send the one cancel; a prompt then waits at most ``cancel_grace``."""
        yield from self._send(cancel)
        if self._prompt:
            self._enter_grace()

    def _deadline_passed(self) -> Driven[None]:
        if self._prompt and not self._grace:
            self._grace = True
            self._deadline = self._clock() + self._cancel_grace
            cancel = self.core.deadline_passed()
            if cancel is not None:
                yield from self._send(cancel)
            return
        if self._prompt:
            raise AgentTimeout("the agent did not end the turn within cancel_grace after session/cancel")
        request = self.core.cancel_request() if not self._out else None
        if request is not None:  # best effort: written if the pipe takes it now, never waited for
            yield from self._send(request)
        raise AgentTimeout("the agent did not answer in time")

    def _write_cancels(self) -> Driven[None]:
        """Write the cancels other threads asked for, in this thread and in order; a kill ends the call."""
        if self.killed:
            raise Gone("the agent was stopped by kill()")
        cancels = self.cancels
        while cancels:
            yield from self._send(self.core.cancel(cancels.popleft()))

    # ----------------------------------------------------------------------------------------------------------
    # Our lines.

    def _send(self, message: OutgoingMessage) -> Driven[None]:
        """Record the line with ``on_send``, flush, then write it (or queue what the agent cannot take yet)."""
        if self._salvage or self._input_closed:
            return
        yield from self._record(self._callbacks.get(ON_SEND), message)
        yield from self._flush()
        self._out.append(memoryview(message.raw + b"\n"))
        yield from self._push()

    def _push(self) -> Driven[None]:
        """Write queued lines until the pipe is full. If the agent is gone, record what it wrote, then end."""
        out = self._out
        write = self._write
        try:
            while out:
                data = out[0]
                written = write(data)
                if written == len(data):
                    out.popleft()
                else:
                    out[0] = data[written:]
            return
        except BlockingIOError:
            return
        except (BrokenPipeError, ConnectionResetError):
            self._input_closed = True
            out.clear()
        yield from self._salvaged()
        raise Gone("the agent closed its input")

    def _drain_out(self) -> Driven[None]:
        """Wait (writing only) until the queue is empty or the deadline passed."""
        wait = self.wait
        while self._out and self._clock() < self._deadline:
            if self.killed:
                raise Gone("the agent was stopped by kill()")
            wait.read, wait.write, wait.deadline = False, True, self._deadline
            if (yield wait):
                self.agent_gone = True
            yield from self._push()

    def _salvaged(self) -> Driven[None]:
        """Read and record what the agent already wrote (bounded), acting on none of it."""
        self._salvage = _SALVAGE_BYTES + 1
        try:
            yield from self._pump()
        except Gone:
            pass
        finally:
            self._salvage = 0

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
            return (yield cast(Awaitable[Any], result))
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
