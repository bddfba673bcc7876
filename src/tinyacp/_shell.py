"""What the sync and the asyncio client share: building the core, the reader and the process, and the rules
for failing, cancelling and closing. Only moving bytes and waiting differ between the two shells."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ._conversation import (
    ON_MESSAGE,
    ON_PERMISSION_DECISION,
    ON_PERMISSION_REQUEST,
    ON_SEND,
    ON_UPDATE,
    Conversation,
)
from ._errors import AgentExited, ClientClosed, ObserverError
from ._messages import Initialize, SessionState
from ._options import Options
from ._process import AgentProcess
from .reader import LineReader

REQUIRED_CALLBACKS = (ON_UPDATE, ON_PERMISSION_REQUEST, ON_PERMISSION_DECISION)
OPTIONAL_CALLBACKS = (ON_MESSAGE, ON_SEND)


def resolve_callbacks(observer: object | None) -> dict[str, Callable[[Any], Any] | None]:
    """The observer's methods, looked up once. The three core methods are required; the rest optional."""
    if observer is None:
        return dict.fromkeys(REQUIRED_CALLBACKS + OPTIONAL_CALLBACKS)
    missing = [name for name in REQUIRED_CALLBACKS if not callable(getattr(observer, name, None))]
    if missing:
        raise TypeError(f"the observer lacks {', '.join(missing)}; subclass tinyacp.BaseObserver to get no-op defaults")
    return {name: getattr(observer, name, None) for name in REQUIRED_CALLBACKS + OPTIONAL_CALLBACKS}


def observer_failed(callback: Callable[[Any], Any], exc: BaseException) -> ObserverError:
    """The error a failing observer call becomes; the original is its cause."""
    name = getattr(callback, "__name__", repr(callback))
    error = ObserverError(f"the observer's {name} raised {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


def _no_observer(update: object) -> None:
    raise AssertionError("the core hands out no update without an observer")


class ShellBase:
    """State and rules shared by :class:`~tinyacp.Client` and :class:`~tinyacp.AsyncClient`."""

    def __init__(self, options: Options) -> None:
        if not isinstance(options, Options):
            raise TypeError(f"a client is built from tinyacp.Options, not {type(options).__name__}")
        self.options = options
        self._callbacks = resolve_callbacks(options.observer)
        # The core refuses every update when there is no observer, so this is only called with one.
        self._on_update: Callable[[Any], Any] = self._callbacks[ON_UPDATE] or _no_observer
        self._core = Conversation(
            epoch=options.epoch,
            transfer_limits=options.transfer_limits,
            reader_limits=options.reader_limits,
            policy=options.policy,
            client_info=options.client_info,
            has_observer=options.observer is not None,
        )
        # The line buffer exists before the agent does: memory is budgeted first.
        self._reader = LineReader(None, options.reader_limits)
        self._cancels: deque[str] = deque()
        self._killed = False
        self._agent_gone = False
        self._closed = False
        self._failure: BaseException | None = None
        self._proc = AgentProcess.spawn(
            options.command,
            cwd=options.cwd,
            env=options.env,
            stderr=options.stderr,
            supervise=options.supervise,
            kill_grace=options.kill_grace,
        )

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
        """The seq of the last update received (0 before the first)."""
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
        if timeout is None:
            return math.inf
        if timeout < 0:
            raise ValueError("timeout must not be negative")
        return time.monotonic() + timeout

    def _absolute(self, cwd: str | os.PathLike[str]) -> str:
        return os.path.abspath(os.fspath(cwd))

    def _absolute_all(self, paths: Sequence[str | os.PathLike[str]]) -> list[str]:
        return [self._absolute(path) for path in paths]

    def session_state(self, session_id: str) -> SessionState:
        """The session's modes, config options, models and commands as the agent last reported them.

        Mode, config option and command updates are applied once the observer has recorded them, and a
        successful ``set_mode``, ``set_config_option`` or ``set_model`` too.

        Raises:
            UsageError: the agent never opened or reported on this session in this client.
        """
        return self._core.session_state(session_id)

    def _exited(self, what: str) -> AgentExited:
        """Tear down, then describe how the agent ended (its exit status is known only after the reap)."""
        self._teardown()
        return AgentExited(what, returncode=self._proc.returncode, stderr_tail=self._proc.stderr_tail())

    def _killed_error(self) -> AgentExited:
        return self._exited("the agent was stopped by kill()")

    def _teardown(self) -> None:
        """Unconditional: whatever happened, the agent's whole group goes and our fds close."""
        self._closed = True
        self._core.end_call()
        self._proc.terminate(self.options.kill_grace)

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        self._teardown()

    def _request_kill(self) -> None:
        """The hard stop: signal-safe (flags, signals, one byte to a pipe, one timer thread)."""
        self._killed = True
        if not self._proc.closed:
            self._proc.start_kill(self.options.kill_grace)

    def _queue_cancel(self, session_id: str) -> None:
        self._ensure_open()
        if not isinstance(session_id, str):
            raise TypeError("session_id must be a str")
        self._core.check_cancel(session_id)  # a cancel too long to send is refused here, not mid-call
        self._cancels.append(session_id)
        self._proc.wake()
