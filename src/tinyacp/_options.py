"""What to start and how: the one value a client is built from."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._bounds import MAX_SAFE_INT, check_count, check_kind, check_seconds, check_timeout
from ._errors import MissingDurableObserver
from ._features import ClientFeatures
from ._limits import TransferLimits, default_transfer_limits
from ._messages import ClientInfo
from ._observer import Observer
from ._permissions import PermissionPolicy
from ._process import StderrTarget
from ._sandbox import Bubblewrap
from ._serve import Serve
from ._trace_context import TraceContext
from ._version import __version__
from .reader import ReaderLimits, default_reader_limits

__all__ = ["Options", "StderrTarget"]


DEFAULT_CLIENT_INFO = ClientInfo(name="tinyacp", version=__version__, title="tinyacp")


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """How to start the agent and run the conversation with it.

    Args:
        command: the agent's argv, program first. Never run through a shell.
        cwd: the agent's working directory (None: ours).
        env: the agent's whole environment (None: inherit ours).
        epoch: the transport epoch, a positive int the caller picks and records before starting the
            client; every update carries it. At most 2**53 - 1, the largest integer every JSON reader of a
            journal keeps exactly.
        observer: where every message is recorded before the client acts: a
            :class:`~tinyacp.JsonlJournal` to keep every line on disk, an observer of your own, or a
            :class:`~tinyacp.BaseObserver` to record nothing on purpose. Required by the clients: without one,
            making a :class:`~tinyacp.Client` or :class:`~tinyacp.AsyncClient` raises
            :class:`~tinyacp.MissingDurableObserver` (the options alone may lack it, to be completed with
            ``dataclasses.replace``).
        policy: which permission requests are allowed when the observer does not decide (default: none).
        reader_limits: the line limit; the line buffer is allocated from it before the agent starts.
        transfer_limits: bounds on messages, updates and a prompt's reply.
        client_info: our name and version as sent in ``initialize``.
        features: the newer parts of ACP the client opts in to (``initialize`` advertises them); by default
            notices and compaction, so that an agent's warnings stay out of the reply.
        stderr: ``"discard"`` (default), ``"tail"``, or an open file / file descriptor.
        kill_grace: seconds between SIGTERM and SIGKILL to the agent's process group.
        timeout: the default deadline of every blocking call, in seconds (None: no deadline).
        cancel_grace: after a prompt's deadline, how long to wait for the agent's answer to ``session/cancel``.
            Every duration is a number (int or float) of seconds from 0 to 1,000,000 (about 11.6 days).
        supervise: Linux only. Start the agent under a small supervisor that is a child subreaper, so that
            processes which left the agent's process group on purpose (``setsid``, a daemonising double fork)
            are stopped at teardown too: SIGTERM, SIGKILL after half of ``kill_grace``. The client's ``pid``
            is then the supervisor's; it exits as the agent did. It costs one more Python process per agent:
            about 20 ms more to start and 5 MB of private memory (measured in RELIABILITY.md).
        sandbox: a :class:`~tinyacp.Bubblewrap` to start the agent inside bubblewrap (Linux): it may then write
            only in ``cwd`` and the sandbox's ``writable`` directories, and a session asked elsewhere raises
            :class:`~tinyacp.OutsideSandbox`. Making the client raises :class:`~tinyacp.SandboxUnavailable` where
            bwrap cannot run; never an unsandboxed start. None (the default): no sandbox (``docs/sandbox.md``).
        serve: the files and terminals the client serves to the agent, each request decided by the observer's
            ``on_serve`` and the rules (:class:`~tinyacp.Serve`; default: none, as before).
        trace_context: the trace the agent's work joins (:class:`~tinyacp.TraceContext`): its ``traceparent``,
            ``tracestate`` and ``baggage`` go into every request's ``_meta`` and into the agent's environment
            (``TRACEPARENT``…), as docs/traces.md says. None: the span active in the caller when the
            OpenTelemetry API is loaded, else none. A call's own ``meta`` with a ``traceparent`` wins for that call.

    Raises:
        ValueError: an empty command; a NUL byte in an argument, in ``cwd`` or in ``env``, or an ``env`` name that
            is empty or holds ``=`` (no process can be started with one); an epoch that is not an int from 1 to
            2**53 - 1; a grace or timeout that is not a number of seconds from 0 to 1,000,000 (nan, inf, -1,
            1e300, a str);
            ``supervise=True`` where it cannot work (not Linux, no /proc): the caller asked for a guarantee,
            so it is refused rather than silently dropped.
        TypeError: ``command`` is a single string rather than an argv sequence, or ``features``,
            ``reader_limits``, ``transfer_limits``, ``serve``, ``sandbox`` or ``trace_context`` is not a
            :class:`~tinyacp.ClientFeatures`, :class:`~tinyacp.ReaderLimits`, :class:`~tinyacp.TransferLimits`,
            :class:`~tinyacp.Serve`, :class:`~tinyacp.Bubblewrap` or :class:`~tinyacp.TraceContext`.
    """

    command: Sequence[str]
    cwd: str | os.PathLike[str] | None = None
    env: Mapping[str, str] | None = None
    epoch: int = 1
    observer: Observer | None = None
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    reader_limits: ReaderLimits = default_reader_limits
    transfer_limits: TransferLimits = default_transfer_limits
    client_info: ClientInfo = DEFAULT_CLIENT_INFO
    features: ClientFeatures = field(default_factory=ClientFeatures)
    stderr: StderrTarget = "discard"
    kill_grace: float = 2.0
    timeout: float | None = None
    cancel_grace: float = 5.0
    supervise: bool = False
    sandbox: Bubblewrap | None = None
    serve: Serve = field(default_factory=Serve)
    trace_context: TraceContext | None = None

    def __post_init__(self) -> None:
        if isinstance(self.command, str | bytes):
            raise TypeError("command is an argv sequence such as ['agent', '--acp'], not a single string")
        command = tuple(self.command)
        if not command or not all(isinstance(arg, str) for arg in command):
            raise ValueError("command must be a non-empty sequence of strings, program first")
        object.__setattr__(self, "command", command)
        _check_startable(command, self.cwd, self.env)
        check_count("epoch", self.epoch, 1, MAX_SAFE_INT)
        for name, kind in (
            ("features", ClientFeatures),
            ("reader_limits", ReaderLimits),
            ("transfer_limits", TransferLimits),
            ("serve", Serve),
        ):
            check_kind(name, getattr(self, name), kind)
        if self.sandbox is not None:
            check_kind("sandbox", self.sandbox, Bubblewrap)
        if self.trace_context is not None:
            check_kind("trace_context", self.trace_context, TraceContext)
        if self.stderr == subprocess.DEVNULL:
            object.__setattr__(self, "stderr", "discard")
        for name in ("kill_grace", "cancel_grace"):
            check_seconds(name, getattr(self, name))
        check_timeout("timeout", self.timeout)
        if self.supervise:
            from ._supervisor import available

            problem = available()
            if problem is not None:
                raise ValueError(problem)


def _check_startable(
    command: tuple[str, ...], cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None
) -> None:
    """Refuse, before anything starts, what the operating system cannot pass to a program: said with where it is,
    rather than ``embedded null byte`` from deep in the spawn.

    Raises:
        ValueError: a NUL byte in an argument, ``cwd``, an ``env`` name or value; an ``env`` name empty or with ``=``.
    """
    for index, arg in enumerate(command):
        if "\0" in arg:
            raise ValueError(f"command[{index}] ({arg!r}) holds a NUL byte, which no program's argument can carry")
    if cwd is not None and b"\0" in os.fsencode(cwd):
        raise ValueError(f"cwd ({cwd!r}) holds a NUL byte, which no path can carry")
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            continue  # the spawn says what is wrong with a name or value that is no str
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"env name {name!r} is not one a program can be given: empty, or with '=' or a NUL byte")
        if "\0" in value:
            raise ValueError(f"env[{name!r}] holds a NUL byte, which no environment variable can carry")


NO_OBSERVER = (
    "Options(observer=...) is missing: the client records every message before it acts on it, so it needs an "
    'observer. Pass observer=tinyacp.JsonlJournal("run.jsonl") with epoch=journal.begin_epoch() to keep every '
    "line on disk (then `tinyacp show run.jsonl` reads it), or observer=tinyacp.BaseObserver() to record nothing"
)


def require_observer(options: Options) -> Observer:
    """The observer a client is built with, or a refusal that says what to pass: checked when the client is made,
    before the agent starts, rather than at the first update of a turn.

    Raises:
        MissingDurableObserver: ``options.observer`` is None.
    """
    if options.observer is None:
        raise MissingDurableObserver(NO_OBSERVER)
    return options.observer
