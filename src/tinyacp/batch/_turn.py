"""One turn of a batch, the engine-neutral unit: start the agent, open a session, send the prompt, and turn
whatever happened into a :class:`TurnRecord`. The turn keeps its own journal, one epoch per attempt."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import shlex
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, Unpack

import msgspec

from .._bounds import MAX_SAFE_INT, check_count, check_kind, check_seconds, check_timeout
from .._errors import AgentExited, BatchItemError
from .._features import ClientFeatures
from .._journal import JsonlJournal
from .._launch_failures import StartFailure, start_failure
from .._limits import TransferLimits, default_transfer_limits
from .._messages import Initialize, UsageUpdate
from .._observer import BaseObserver, Observer
from .._options import Options
from .._permissions import PermissionPolicy, PermissionRequest
from .._records import AgentMessage, OutgoingMessage, PromptResult, Update, usage_fields
from .._sandbox import Bubblewrap, check_available, network_on, plan
from .._serve import Serve, ServeRequest
from .._startup_watch import StartupWatch, said_of
from ..reader import ReaderLimits, default_reader_limits
from ._items import ConfigValue, Item, journal_path, parse_item

if TYPE_CHECKING:
    from .._async_client import AsyncClient
    from ..otel._config import TraceExport

__all__ = [
    "PermissionCounts",
    "TurnError",
    "TurnOptions",
    "TurnRecord",
    "TurnSettings",
    "arun_turn",
    "run_turn",
]

_T = TypeVar("_T")

# An error message in a record keeps the agent's last words (the stderr tail) but not 64 KiB of them.
_MAX_MESSAGE = 4096


class TurnError(msgspec.Struct, frozen=True):
    """Why a turn failed: the exception's class name (``AgentExited``, ``AgentTimeout``, ``SpawnError``, …)."""

    type: str
    message: str


class PermissionCounts(msgspec.Struct, frozen=True):
    """How many of the agent's permission requests were allowed and rejected during the turn."""

    allowed: int = 0
    rejected: int = 0


class TurnRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What became of one turn: one line of ``results.jsonl``.

    ``ok`` is true when the agent ended the turn with ``end_turn`` and nothing failed. Any failure of the turn
    itself (the agent could not start, exited, timed out, broke the protocol, wanted a login) is ``error``.
    """

    id: str | int
    ok: bool
    stop_reason: str | None
    """The agent's stop reason; None when the turn did not end with a prompt response."""
    text: str
    """The reply: the text of the turn's ``agent_message_chunk`` updates."""
    usage: dict[str, Any] | None
    """What the agent reported, the fields it did: tokens (``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``thought_tokens``, ``cached_read_tokens``, ``cached_write_tokens``) from its answer, ``context_used``,
    ``context_size`` and ``cost`` (``amount``, ``currency``) from its last ``usage_update``; None when nothing."""
    updates: int
    """Session updates the agent sent during the turn."""
    permissions: PermissionCounts
    seconds: float
    """Wall-clock time of the attempt, from start to teardown."""
    error: TurnError | None
    journal: str
    """The turn's journal file (an attempt is one epoch of it)."""
    epoch: int | None
    """The journal epoch of this attempt; None when the journal could not be opened."""
    attempt: int
    """1 for the first attempt at this id, counting attempts of earlier runs that left a record."""
    host: str
    """The host name of the machine that ran the turn."""
    agent: str
    """The agent's name (an entry of the agents table, or the program's base name)."""
    node: str | None = None
    """The Ray node that ran the turn (the Ray engine only)."""
    sandbox: list[str] | None = None
    """The options bwrap was given when the turn's agent ran in the sandbox (``sandbox=``), exactly; None when
    it did not."""
    notices: list[dict[str, Any]] = msgspec.field(default_factory=list)
    """The turn's notices (``severity``, ``title``, ``description``): a model fallback or a config warning the
    agent sent apart from the reply (with ``ClientFeatures(notices=True)``, the default), so that a record whose
    answer came from another model says so."""
    notices_dropped: int = 0
    """The turn's notices left out of ``notices`` by ``max_notices`` or ``max_notice_bytes`` (0: none), so that a
    record never looks whole when it is not."""
    trace_id: str | None = None
    """The trace of the attempt (32 hex characters) when the batch exported spans (``trace``)."""


class AgentEntry(Protocol):
    """A named agent: its argv and the variables added to its environment (``tinyacp``'s registry entries). An
    entry may also have ``allow_tools`` and ``deny_tools`` (tool names), added to the policy of its turns,
    ``notes`` (what it does that a permission rule does not decide), warned about as :class:`AgentNoteWarning`
    when the batch has a permission rule, and ``launcher``, ``package`` and ``offline`` (how ``npx`` or ``uvx``
    fetches it, and how to install it so that it starts offline), said in the record of a turn that could not
    fetch it."""

    @property
    def command(self) -> Sequence[str]: ...

    @property
    def env(self) -> Mapping[str, str]: ...


AgentTable = Mapping[str, "Sequence[str] | AgentEntry"]


class TurnOptions(TypedDict, total=False):
    """The defaults of a turn (an item's own field wins) and how to run it; every key is optional.

    Keys:
        agent: the agent when an item names none: a name from ``agents`` (with more arguments after it, as in
            ``"demo --chunks 5"``), a command line, or an argv list. ``demo`` is always known.
        agents: names for agents: ``{name: argv}``, or entries with ``command`` and ``env`` (and optionally
            ``allow_tools`` and ``deny_tools``, added to ``policy``'s tools for that agent's turns, ``notes``,
            warned about once as :class:`~tinyacp.batch.AgentNoteWarning` when ``policy`` has a rule, and
            ``launcher``, ``package`` and ``offline``, named in the error of a turn that ``npx`` or ``uvx`` could
            not start).
        cwd: the session's working directory (default: the current directory of the call); an item's relative
            ``cwd`` is relative to it.
        mode, model, set, meta: the item fields' defaults (an item's ``set`` is merged over this one).
        timeout: seconds for the whole turn (default: none).
        policy: which permission requests are allowed (default: none is; nobody is asked).
        env: the agent's environment (default: inherited), to which an agent entry's ``env`` is added.
        kill_grace, cancel_grace: as in :class:`tinyacp.Options`.
        reader_limits, transfer_limits: as in :class:`tinyacp.Options`.
        sync_journal: fsync every journal record as it is made (default: at each permission decision, with
            every record before it; the epoch record is not fsync'ed on its own).
        supervise: as in :class:`tinyacp.Options` (Linux).
        features: the newer parts of ACP the turns opt in to, as in :class:`tinyacp.Options` (default: notices
            and compaction, so that warnings stay out of the reply).
        sandbox: a :class:`~tinyacp.Bubblewrap` to run every turn's agent in, as in :class:`tinyacp.Options`
            (Linux); an agent entry's ``sandbox_writable`` (its state directories) is added to its ``writable``,
            and each record's ``sandbox`` holds bwrap's options.
        serve: the files and terminals the turns serve to their agents, as in :class:`tinyacp.Options` (default:
            none); decided by ``policy`` and the :class:`~tinyacp.Serve`'s command patterns (nobody is asked).
        attempt: the attempt number to record (default 1).
        trace: export each turn's spans, a ``turn {id}`` span over its client's, as a
            :class:`tinyacp.otel.TraceExport` says (``pip install "tinyacp[otel]"``); :func:`run_batch` puts the
            turns under one ``batch {name}`` span. Default: none.
    """

    agent: str | Sequence[str] | None
    agents: AgentTable | None
    cwd: str | os.PathLike[str] | None
    mode: str | None
    model: str | None
    set: Mapping[str, ConfigValue] | None
    meta: Mapping[str, Any] | None
    timeout: float | None
    policy: PermissionPolicy
    env: Mapping[str, str] | None
    kill_grace: float
    cancel_grace: float
    reader_limits: ReaderLimits
    transfer_limits: TransferLimits
    sync_journal: bool
    supervise: bool
    features: ClientFeatures
    sandbox: Bubblewrap | None
    serve: Serve
    attempt: int
    trace: TraceExport | None


@dataclass(frozen=True, kw_only=True)
class TurnSettings:
    """The checked :class:`TurnOptions` (without ``attempt``), shipped as one value to where turns run."""

    agent: str | tuple[str, ...] | None = None
    agents: dict[str, tuple[tuple[str, ...], dict[str, str]]] = field(default_factory=dict)
    agent_tools: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    """The tools an agent's entry allows and denies by name, by the agent's name (from ``agents``)."""
    agent_notes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """What an agent's entry says it does that a permission rule does not decide, by the agent's name."""
    agent_launch: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """An agent's entry's ``launcher``, ``package`` and ``offline``, by the agent's name (where one says any)."""
    cwd: str | None = None
    mode: str | None = None
    model: str | None = None
    set: dict[str, ConfigValue] | None = None
    meta: dict[str, Any] | None = None
    timeout: float | None = None
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    env: dict[str, str] | None = None
    kill_grace: float = 2.0
    cancel_grace: float = 5.0
    reader_limits: ReaderLimits = default_reader_limits
    transfer_limits: TransferLimits = default_transfer_limits
    sync_journal: bool = False
    supervise: bool = False
    features: ClientFeatures = field(default_factory=ClientFeatures)
    sandbox: Bubblewrap | None = None
    agent_writable: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """The directories an agent's entry needs writable in the sandbox (its state), by the agent's name."""
    serve: Serve = field(default_factory=Serve)
    trace: TraceExport | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> TurnSettings:
        """Check the options of a call.

        Raises:
            TypeError: an unknown option, or ``reader_limits``, ``transfer_limits``, ``serve`` or ``sandbox`` of
                another type.
            SandboxUnavailable: ``sandbox`` (or ``serve``'s) was asked for and bwrap cannot run here.
            ValueError: a value out of range: a timeout or grace that is not a number of seconds from 0 to
                1,000,000, an ``attempt`` that is not a positive int.
        """
        unknown = set(options) - set(TurnOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown turn option(s): {', '.join(sorted(unknown))}")
        check_count("attempt", options.get("attempt", 1), 1, MAX_SAFE_INT)  # recorded, and an epoch's number
        values = {key: value for key, value in options.items() if key != "attempt"}
        agent = values.get("agent")
        if agent is not None and not isinstance(agent, str):
            values["agent"] = tuple(agent)
        entries = values.get("agents") or {}
        values["agents"] = {name: _entry(spec) for name, spec in entries.items()}
        values["agent_tools"] = {
            name: (tuple(getattr(spec, "allow_tools", ())), tuple(getattr(spec, "deny_tools", ())))
            for name, spec in entries.items()
            if getattr(spec, "allow_tools", ()) or getattr(spec, "deny_tools", ())
        }
        values["agent_notes"] = {
            name: tuple(getattr(spec, "notes", ())) for name, spec in entries.items() if getattr(spec, "notes", ())
        }
        values["agent_writable"] = {
            name: tuple(getattr(spec, "sandbox_writable", ()))
            for name, spec in entries.items()
            if getattr(spec, "sandbox_writable", ())
        }
        values["agent_launch"] = {
            name: launch for name, spec in entries.items() if any(launch := _launch_of_entry(spec))
        }
        # Made absolute here, where the call is: a turn may run on another node, in another directory.
        cwd = values.get("cwd")
        values["cwd"] = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
        for name in ("set", "meta", "env"):
            if values.get(name) is not None:
                values[name] = dict(values[name])
        settings = cls(**values)
        check_timeout("timeout", settings.timeout)
        for name in ("kill_grace", "cancel_grace"):
            check_seconds(name, getattr(settings, name))
        for name, kind in (("reader_limits", ReaderLimits), ("transfer_limits", TransferLimits), ("serve", Serve)):
            check_kind(name, getattr(settings, name), kind)
        if settings.sandbox is not None:  # said once, here, rather than in every turn's record
            check_kind("sandbox", settings.sandbox, Bubblewrap)
            check_available(network=network_on(settings.sandbox, True))
        if settings.serve.sandbox is not None:  # its commands' sandbox, with no network unless it says so
            check_available(network=network_on(settings.serve.sandbox, False))
        if settings.trace is not None:
            from ..otel._config import TraceExport

            check_kind("trace", settings.trace, TraceExport)
        return settings


def _launch_of_entry(spec: Sequence[str] | AgentEntry) -> tuple[str, str, str]:
    """An entry's ``launcher``, ``package`` and ``offline`` texts ("" for each it does not have)."""
    texts = (getattr(spec, name, "") for name in ("launcher", "package", "offline"))
    launcher, package, offline = (text if isinstance(text, str) else "" for text in texts)
    return launcher, package, offline


def _entry(spec: Sequence[str] | AgentEntry) -> tuple[tuple[str, ...], dict[str, str]]:
    if isinstance(spec, str):
        raise TypeError("an agents entry is an argv list (or has .command and .env), not a string")
    if isinstance(spec, Sequence):
        return tuple(spec), {}
    return tuple(spec.command), dict(spec.env)


@dataclass(frozen=True)
class ResolvedAgent:
    """The agent a turn starts."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str]
    launcher: str = ""
    """How its entry says it starts (``npx``, ``uvx``, ``path``), or "" (then its command says)."""
    package: str = ""
    """The package ``npx`` or ``uvx`` fetches, as its entry says, or ""."""
    offline: str = ""
    """How to install it so that it starts offline, as its entry says, or ""."""


def agent_of_item(item: Item, settings: TurnSettings) -> ResolvedAgent:
    """The agent of an item: its own, else the default; a known name, else a command line.

    Raises:
        BatchItemError: no agent at all, or a command line that cannot be split into words.
    """
    agent: str | Sequence[str] | None = item.agent if item.agent is not None else settings.agent
    if agent is None:
        raise BatchItemError(f"item {item.id!r} names no agent and no default agent was given")
    if isinstance(agent, str):
        try:
            words = _split(agent)
        except ValueError as exc:
            raise BatchItemError(f"item {item.id!r}: agent {agent!r}: {exc}") from None
    else:
        words = tuple(agent)
    if not words:
        raise BatchItemError(f"item {item.id!r}: the agent is empty")
    known = settings.agents.get(words[0])
    if known is None and words[0] == "demo":
        known = ((sys.executable, "-m", "tinyacp.demo"), {})
    if known is not None:
        return ResolvedAgent(words[0], known[0] + tuple(words[1:]), known[1], *settings.agent_launch.get(words[0], ()))
    return ResolvedAgent(os.path.basename(words[0]), tuple(words), {})


@functools.lru_cache(maxsize=64)
def _split(command: str) -> tuple[str, ...]:
    """A command line's words: most items share their agent, which each turn resolves twice."""
    return tuple(shlex.split(command))


def check_item(item: Item, settings: TurnSettings) -> None:
    """Refuse, before anything starts, what a turn of this item could never do: a mistyped agent name (one word,
    no program of that name on ``PATH``, close to a known name: a typo such as ``cluade`` never runs as a
    program), an empty ``cwd``, ``mode`` or ``model``, a ``cwd`` that is not a directory.

    Raises:
        BatchItemError: no usable agent, an empty ``cwd``, ``mode`` or ``model``, or a ``cwd`` that is not a
            directory (checked when the call's own directory is seen here).
    """
    agent = agent_of_item(item, settings)
    written = item.agent if item.agent is not None else settings.agent
    word = agent.command[0]
    if isinstance(written, str) and agent.name not in settings.agents and agent.name != "demo":
        known = sorted({*settings.agents, "demo"})
        close = _typo_of(word, tuple(known))
        if close:
            raise BatchItemError(
                f"item {item.id!r}: unknown agent {word!r}; did you mean {' or '.join(map(repr, close))}? "
                f"(known agents: {', '.join(known)})"
            )
    for name in ("cwd", "mode", "model"):
        value = getattr(item, name)
        if value is not None and not value.strip():
            raise BatchItemError(f"item {item.id!r}: {name} is empty")
    # An item's directory is checked where the call's own is seen (on a Ray cluster the driver may see neither).
    base = settings.cwd or os.getcwd()
    if item.cwd and os.path.isdir(base) and not os.path.isdir(os.path.join(base, item.cwd)):
        raise BatchItemError(f"item {item.id!r}: cwd {item.cwd!r} is not a directory (under {base})")


@functools.lru_cache(maxsize=64)
def _typo_of(word: str, known: tuple[str, ...]) -> list[str]:
    """The known names ``word`` is a likely typo of: none when it is a path or a program on ``PATH`` (cached:
    every item of a batch is checked before it starts)."""
    if os.sep in word:
        return []
    import difflib
    import shutil

    close = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    return close if close and shutil.which(word) is None else []


_SLOW_SYNC = 0.010
"""Seconds: when a journal directory's fsyncs take longer than this on average, they move to a worker thread."""

_sync_seconds: dict[str, float] = {}
"""How long each journal directory's fsyncs took lately, in seconds: a moving average, one entry per directory."""


async def _synced(journal_dir: str, call: Callable[..., _T], *args: Any) -> _T:
    """Run ``call``, which fsyncs a journal in ``journal_dir``, where it costs least.

    On the event loop while the directory's fsyncs are quick: a hop to a worker thread and back costs more CPU
    than a quick fsync. In a worker thread while they take longer than 10 ms on average, so that a slow disk
    holds up the turn that waits for it, not every turn of the loop.
    """
    if _sync_seconds.get(journal_dir, 0.0) > _SLOW_SYNC:
        return await asyncio.to_thread(_timed, journal_dir, call, *args)
    return _timed(journal_dir, call, *args)


def _timed(journal_dir: str, call: Callable[..., _T], *args: Any) -> _T:
    started = time.monotonic()
    try:
        return call(*args)
    finally:
        took = time.monotonic() - started
        _sync_seconds[journal_dir] = 0.8 * _sync_seconds.get(journal_dir, took) + 0.2 * took


class StartObserver(BaseObserver):
    """An observer that watches the agent's first lines on stdout (a program that prints a line that is not
    JSON-RPC is stopped after a grace, as the command stops it) and keeps what names a failure to start (see
    :func:`initialize_watched` and :func:`start_failure_of`): a turn's, and the preflight's probe's."""

    def __init__(self) -> None:
        # Tolerant: a banner before JSON-RPC is the journal's to keep, not a failure of a turn that then goes on.
        self.watch = StartupWatch(tolerant=True)
        self.initialized = False
        """Whether the agent answered ``initialize``: a failure before is a failure to start, named as such."""
        self.stderr_tail: Callable[[], bytes | None] = _no_tail
        """The client's stderr tail (read after the teardown, when it is whole)."""

    def tail_of(self, exc: BaseException) -> bytes | None:
        """The agent's last stderr bytes: the error's own, else the client's."""
        return getattr(exc, "stderr_tail", None) or self.stderr_tail()

    def on_update(self, update: Update) -> None:
        self.watch.seen(update.raw)

    def on_message(self, message: AgentMessage) -> None:
        self.watch.seen(message.raw, message)


def _no_tail() -> bytes | None:
    return None


async def initialize_watched(client: AsyncClient, observer: StartObserver, timeout: float | None) -> Initialize:
    """``initialize``, with ``observer``'s watch armed to stop a program that prints a line that is not JSON-RPC.

    Raises:
        TinyAcpError: as :meth:`tinyacp.AsyncClient.initialize`.
    """
    observer.watch.arm(client.kill)  # a first line that is not JSON-RPC: stopped after a grace, not the timeout
    observer.stderr_tail = client.stderr_tail
    try:
        init = await client.initialize(timeout=timeout)
    finally:
        observer.watch.disarm()
    observer.initialized = True
    return init


def start_failure_of(
    exc: BaseException, agent: ResolvedAgent, observer: StartObserver, timeout: float | None
) -> StartFailure | None:
    """Why the agent never answered ``initialize``, when the cause can be named (the line a program that is no ACP
    agent printed, with how it ended; why ``npx`` or ``uvx`` could not fetch it), in the command's words; None for
    any other failure. ``timeout`` is the deadline ``initialize`` had."""
    if observer.initialized:
        return None
    said = said_of(observer.watch, exc)
    first_line = observer.watch.first_line
    tail = observer.tail_of(exc)
    return start_failure(exc, agent, said=said, first_line=first_line, tail=tail, deadline=(timeout, _DEADLINE))


def _turn_error(
    exc: BaseException, item: Item, agent: ResolvedAgent, settings: TurnSettings, observer: _TurnJournal | None
) -> TurnError:
    """The record's error. For a failure to start that can be named (:func:`start_failure_of`): the cause on the
    first line, then what to do, then the error's own words and the agent's stderr."""
    timeout = item.timeout if item.timeout is not None else settings.timeout
    named = start_failure_of(exc, agent, observer, timeout) if observer is not None else None
    if named is None or observer is None:
        return _error(exc)
    lines = [named.message, *named.hint]
    if named.kind != "said":  # the said lines' message says how the program ended already
        lines.append(exc.message if isinstance(exc, AgentExited) else str(exc))
    tail = observer.tail_of(exc)
    if tail:
        lines.append(_TAIL + tail.decode("utf-8", "replace"))
    return _error(exc, "\n".join(lines))


_DEADLINE = "the turn's timeout"
"""What sets the deadline of ``initialize`` in a batch, as a start failure's hint names it."""
_TAIL = "--- agent stderr (tail) ---\n"
"""The heading of the agent's stderr in a message, as :class:`~tinyacp.AgentExited` writes it."""


class _TurnJournal(StartObserver):
    """The turn's observer: its journal, counting what the record reports, and the watch of
    :class:`StartObserver`. The fsync'ed writes (the permission decisions) go through :func:`_synced`."""

    def __init__(self, journal: JsonlJournal, journal_dir: str) -> None:
        super().__init__()
        self.journal = journal
        self.flush = journal.flush
        self._record_update = journal.on_update
        self._dir = journal_dir
        self.updates = 0
        self.allowed = 0
        self.rejected = 0
        self.usage: UsageUpdate | None = None
        self.sandbox: list[str] | None = None
        """bwrap's options, once the turn's agent is started in the sandbox."""

    def on_update(self, update: Update) -> None:
        self._record_update(update)
        if not self.initialized:  # the watch is over once the agent answered: nothing more per update
            self.watch.seen(update.raw)
        self.updates += 1
        if update.payload.__class__ is UsageUpdate:
            self.usage = update.payload

    def on_message(self, message: AgentMessage) -> None:
        self.journal.on_message(message)
        if not self.initialized:
            self.watch.seen(message.raw, message)

    def on_send(self, message: OutgoingMessage) -> None:
        self.journal.on_send(message)

    def on_permission_request(self, request: PermissionRequest) -> None:
        self.journal.on_permission_request(request)

    def on_permission_decision(self, request: PermissionRequest) -> Awaitable[None]:
        return self._decided(request)

    def on_serve_decision(self, request: ServeRequest) -> Awaitable[None]:
        return _synced(self._dir, self.journal.on_serve_decision, request)

    async def _decided(self, request: PermissionRequest) -> None:
        await _synced(self._dir, self.journal.on_permission_decision, request)
        if request.allowed:
            self.allowed += 1
        else:
            self.rejected += 1


HOST = socket.gethostname()
"""This machine's name: the ``host`` of the records of the turns it runs."""


def _open_journal(path: Path, sync: bool) -> tuple[JsonlJournal, int]:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    journal = JsonlJournal(path, sync=sync)
    try:
        # Not fsync'ed on its own: the epoch becomes durable with the turn's first permission decision, with the
        # file's name (see docs/batch.md, "What is durable").
        return journal, journal.begin_epoch(durable=False)
    except BaseException:
        journal.close()
        raise


def _remaining(deadline: float) -> float | None:
    return None if deadline == math.inf else max(0.0, deadline - time.monotonic())


async def _converse(
    item: Item, agent: ResolvedAgent, settings: TurnSettings, observer: _TurnJournal, epoch: int, *, traced: Any = None
) -> PromptResult:
    from .._async_client import AsyncClient

    timeout = item.timeout if item.timeout is not None else settings.timeout
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    base = settings.cwd or os.getcwd()
    cwd = os.path.join(base, item.cwd) if item.cwd else base  # an item's relative cwd is relative to the call's
    options = agent_options(agent, settings, cwd, observer if traced is None else traced.observer(observer), epoch)
    if options.sandbox is not None:  # the same plan the client makes: its exact arguments, for the record
        observer.sandbox = list(plan(options.sandbox, options.command, cwd=cwd, env=options.env).options)
    mode = item.mode if item.mode is not None else settings.mode
    model = item.model if item.model is not None else settings.model
    options_to_set = {**(settings.set or {}), **(item.set or {})}
    meta = item.meta if item.meta is not None else settings.meta
    async with AsyncClient(options) as client:
        await initialize_watched(client, observer, _remaining(deadline))
        if item.fork is not None:
            session = await client.fork_session(item.fork, cwd, timeout=_remaining(deadline))
        else:
            session = await client.new_session(cwd, timeout=_remaining(deadline))
        if mode is not None:
            await client.set_mode(session.id, mode, timeout=_remaining(deadline))
        if model is not None:
            await client.set_model(session.id, model, timeout=_remaining(deadline))
        for config_id, value in options_to_set.items():
            await client.set_config_option(session.id, config_id, value, timeout=_remaining(deadline))
        return await client.prompt(session.id, item.prompt, meta=meta, timeout=_remaining(deadline))


def agent_options(
    agent: ResolvedAgent, settings: TurnSettings, cwd: str, observer: Observer, epoch: int = 1
) -> Options:
    """The client's options for ``agent`` in ``cwd``: a turn's, and those of the batch's preflight probe.

    Raises:
        OSError: a state directory of the agent's sandbox cannot be created (the turn's error).
    """
    sandbox = _sandbox_of(agent, settings)  # its state directories first: made where the turn runs
    env = settings.env
    if agent.env:
        env = {**(os.environ if env is None else env), **agent.env}
    return Options(
        command=agent.command,
        cwd=cwd,
        env=env,
        epoch=epoch,
        observer=observer,
        policy=_policy_of(agent, settings),
        reader_limits=settings.reader_limits,
        transfer_limits=settings.transfer_limits,
        stderr="tail",
        kill_grace=settings.kill_grace,
        cancel_grace=settings.cancel_grace,
        supervise=settings.supervise,
        features=settings.features,
        sandbox=sandbox,
        serve=settings.serve,
    )


def _sandbox_of(agent: ResolvedAgent, settings: TurnSettings) -> Bubblewrap | None:
    """The batch's sandbox, with the directories the agent's entry needs writable added to its own.

    Raises:
        OSError: a state directory cannot be created (the turn's error).
    """
    sandbox = settings.sandbox
    extra = settings.agent_writable.get(agent.name)
    if sandbox is None or not extra:
        return sandbox
    for path in extra:  # its state directories, made where the turn runs (private), as the command makes them
        os.makedirs(path, mode=0o700, exist_ok=True)
    writable = (*sandbox.writable, *extra)
    return Bubblewrap(writable, sandbox.readable, sandbox.network, sandbox.private_tmp, sandbox.extra_args)


def _policy_of(agent: ResolvedAgent, settings: TurnSettings) -> PermissionPolicy:
    """The batch's policy, with the tools the agent's own entry allows and denies added to its own."""
    tools = settings.agent_tools.get(agent.name)
    if tools is None:
        return settings.policy
    policy = settings.policy
    return PermissionPolicy(
        policy.kinds,
        policy.title_prefixes,
        tools=policy.tools | set(tools[0]),
        deny_tools=policy.deny_tools | set(tools[1]),
        allow_all=policy.allow_all,
    )


def _error(exc: BaseException, named: str | None = None) -> TurnError:
    message = named or str(exc) or type(exc).__name__
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE // 4] + "\n[…]\n" + message[-_MAX_MESSAGE // 2 :]
    return TurnError(type(exc).__name__, message)


async def turn(item: Item, path: Path, settings: TurnSettings, attempt: int, node: str | None = None) -> TurnRecord:
    """Run one checked item, its journal at ``path`` (:func:`~tinyacp.batch._items.journal_path`); every failure
    of the turn becomes the record's ``error``."""
    started = time.monotonic()
    agent = agent_of_item(item, settings)
    journal: JsonlJournal | None = None
    observer: _TurnJournal | None = None
    epoch: int | None = None
    result: PromptResult | None = None
    error: TurnError | None = None
    traced = _turn_trace(settings, item, attempt, agent)
    try:
        where = str(path.parent)
        if settings.sync_journal:  # then the epoch is fsync'ed, as every line is
            opened, begun = await _synced(where, _open_journal, path, True)
        else:
            opened, begun = _open_journal(path, False)
        journal, epoch, observer = opened, begun, _TurnJournal(opened, where)
        result = await _converse(item, agent, settings, observer, begun, traced=traced)
    except Exception as exc:  # a turn's own failure is its record, whatever it was
        error = _turn_error(exc, item, agent, settings, observer)
    finally:
        if journal is not None:
            try:
                journal.close()
            except OSError as exc:  # the last records could not be written
                error = error or _error(exc)
    if result is not None and result.timed_out:
        error = TurnError("AgentTimeout", "the turn passed its timeout; the agent ended it after session/cancel")
    elif result is not None and result.overflow is not None:
        error = TurnError("TransferLimitExceeded", f"the reply reached a limit: {result.overflow}")
    stop_reason = str(result.stop_reason) if result is not None else None
    if traced is not None:
        await traced.end(None if error is None else (error.type, error.message), stop_reason)
    return TurnRecord(
        id=item.id,
        ok=error is None and stop_reason == "end_turn",
        stop_reason=stop_reason,
        text=result.text if result is not None else "",
        usage=usage_fields(
            result.usage if result is not None else None, observer.usage if observer is not None else None
        ),
        updates=observer.updates if observer is not None else 0,
        notices=[
            {"severity": notice.severity, "title": notice.title, "description": notice.description}
            for notice in (result.notices if result is not None else ())
        ],
        notices_dropped=result.notices_dropped if result is not None else 0,
        permissions=PermissionCounts(observer.allowed, observer.rejected) if observer else PermissionCounts(),
        seconds=round(time.monotonic() - started, 6),
        error=error,
        journal=str(path),
        epoch=epoch,
        attempt=attempt,
        host=HOST,
        agent=agent.name,
        node=node,
        sandbox=observer.sandbox if observer is not None else None,
        trace_id=traced.trace_id if traced is not None else None,
    )


def _turn_trace(settings: TurnSettings, item: Item, attempt: int, agent: ResolvedAgent) -> Any:
    """The attempt's ``turn`` span when the batch exports spans (OpenTelemetry imported only then)."""
    if settings.trace is None:
        return None
    from ._trace import TurnTrace

    return TurnTrace(settings.trace, item.id, attempt, agent.name)


async def arun_turn(
    item: Mapping[str, Any] | Item, journal_dir: str | os.PathLike[str], **options: Unpack[TurnOptions]
) -> TurnRecord:
    """Run one turn with the asyncio client and return its record; its journal is
    ``<journal_dir>/<id>.jsonl`` (an id that is not a plain file name gets a hashed name), a new epoch per call.

    The turn's own failures (the agent could not start, exited, timed out, broke the protocol, needed a login,
    the journal could not be written) are the record's ``error``, never an exception.

    Raises:
        BatchItemError: the item is malformed, names no agent, or asks for what this version cannot send.
        SandboxUnavailable: ``sandbox=`` (or ``Serve(sandbox=...)``) was given and bwrap cannot run here.
        TypeError: an unknown option.
        ValueError: an option out of range.
    """
    settings = TurnSettings.from_options(options)
    parsed = item if isinstance(item, Item) else parse_item(item)
    check_item(parsed, settings)
    return await turn(parsed, journal_path(Path(journal_dir), parsed.id), settings, options.get("attempt", 1))


def run_turn(
    item: Mapping[str, Any] | Item, journal_dir: str | os.PathLike[str], **options: Unpack[TurnOptions]
) -> TurnRecord:
    """As :func:`arun_turn`, for code without an event loop (it runs one; not from inside a running loop).

    Raises:
        BatchItemError: the item is malformed, names no agent, or asks for what this version cannot send.
        SandboxUnavailable: ``sandbox=`` (or ``Serve(sandbox=...)``) was given and bwrap cannot run here.
        TypeError: an unknown option.
        ValueError: an option out of range.
        RuntimeError: called from a running event loop (await :func:`arun_turn` there).
    """
    return asyncio.run(arun_turn(item, journal_dir, **options))
