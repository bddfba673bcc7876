"""What the sync and the asyncio client share: the core, the reader, the process, the call driver
(:mod:`tinyacp._driver`), and the rules for failing, cancelling and closing. The public calls themselves are
written once, in :mod:`tinyacp._calls`. Only waiting and calling the observer differ between the two shells."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ._conversation import (
    ON_MESSAGE,
    ON_PERMISSION_DECISION,
    ON_PERMISSION_REQUEST,
    ON_SEND,
    ON_UPDATE,
    Conversation,
)
from ._driver import ON_FLUSH, CallDriver, Gone
from ._errors import AgentExited, AgentTimeout, ClientClosed, ProtocolViolation, RequestError
from ._messages import Initialize, SessionState
from ._options import Options, check_seconds, require_observer
from ._process import AgentProcess
from .reader import LineReader

T = TypeVar("T")

REQUIRED_CALLBACKS = (ON_UPDATE, ON_PERMISSION_REQUEST, ON_PERMISSION_DECISION)
OPTIONAL_CALLBACKS = (ON_MESSAGE, ON_SEND, ON_FLUSH)

_KEEP_CLIENT = (RequestError, ProtocolViolation)
"""Errors about one answer: the stream is still in step, so the client stays usable."""


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
        self._core = Conversation(
            epoch=options.epoch,
            transfer_limits=options.transfer_limits,
            reader_limits=options.reader_limits,
            policy=options.policy,
            client_info=options.client_info,
            features=options.features,
            has_observer=options.observer is not None,
        )
        # The line buffer exists before the agent does: memory is budgeted first.
        reader = LineReader(None, options.reader_limits)
        self._closed = False
        self._failure: BaseException | None = None
        self._proc = AgentProcess.spawn(
            options.command,
            cwd=options.cwd,
            env=options.env,
            stderr=options.stderr,
            supervise=options.supervise,
            kill_grace=options.kill_grace,
            tail_thread=tail_thread,
        )
        stdout_fd = self._proc.stdout_fd

        def read_into(view: memoryview) -> int:
            return os.readv(stdout_fd, [view])

        self._driver = CallDriver(
            self._core,
            reader,
            read_into=read_into,
            write=self._proc.write,
            callbacks=callbacks,
            cancel_grace=options.cancel_grace,
            cooperative=cooperative,
        )
        self._owner: int | None = None
        """The thread running a call (or a close) of the sync client, so that a re-entrant close is refused."""

    def __del__(self) -> None:
        # A client dropped without close() must not leave its agent behind: kill the group at once.
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
        if timeout is None:
            timeout = self.options.timeout
        else:
            check_seconds("timeout", timeout)
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

    def _settle(self, exc: BaseException, prompt: bool) -> tuple[BaseException, bool]:
        """What a failed call raises, and whether the agent must be torn down first.

        An error about one answer, or the deadline of a call other than a prompt whose lines all reached the
        pipe, leaves the client usable; everything else (the agent gone, a broken rule, a prompt that outlived
        its grace, a line half written: what follows it would be glued to it) tears it down.
        """
        if isinstance(exc, Gone):
            return exc, True
        if isinstance(exc, _KEEP_CLIENT):
            return exc, False
        if isinstance(exc, AgentTimeout) and not prompt and not self._driver.writing:
            return exc, False
        if self._failure is None:
            self._failure = exc
        return exc, True

    def _raised(self, exc: BaseException) -> BaseException:
        """The exception a failed call raises once the teardown it needed is done."""
        return self._exited(exc.what) if isinstance(exc, Gone) else exc

    def _teardown(self) -> None:
        """Unconditional: whatever happened, the agent's whole group goes and our fds close."""
        self._closed = True
        self._core.end_call()
        self._proc.terminate(self.options.kill_grace)

    def kill(self) -> None:
        """The hard stop: SIGTERM to the agent's whole group now, SIGKILL after ``kill_grace``.

        Safe from any thread, any task and a signal handler (it only sets flags, sends signals, writes one byte
        to a pipe and starts one timer thread). A call in flight raises :class:`~tinyacp.AgentExited`.
        """
        self._driver.killed = True
        if not self._proc.closed:
            self._proc.start_kill(self.options.kill_grace)

    def _queue_cancel(self, session_id: str) -> None:
        self._ensure_open()
        if not isinstance(session_id, str):
            raise TypeError("session_id must be a str")
        self._core.check_cancel(session_id)  # a cancel too long to send is refused here, not mid-call
        self._driver.cancels.append(session_id)
        self._proc.wake()

    def _reentered(self) -> bool:
        """Whether the sync client is called from inside its own call (an observer method)."""
        return self._owner == threading.get_ident()
