"""Files and terminals the client serves to the agent: what the caller allows, what the agent asks, and the rules.

ACP v1 lets a client serve ``fs/read_text_file``, ``fs/write_text_file`` and ``terminal/*`` to the agent
instead of the agent acting on its own. :class:`Serve` (``Options(serve=...)``) says which of them tinyacp
serves; nothing is served by default. Each request that would read, write or run something is a
:class:`ServeRequest` of kind ``read``, ``edit`` or ``execute``, decided in this order (default deny):

1. **Confinement** first, which no one overrides: a path must be absolute and, resolved, lie under the roots
   (the session's cwd, its ``additionalDirectories`` and :attr:`Serve.roots`); a ``..`` component, a symlink
   that leads out, a FIFO or a device are refused (``decided_by="confinement"``). At most
   :attr:`Serve.max_terminals` terminals live at once (``decided_by="limit"``).
2. A command line matching one of :attr:`Serve.deny_commands` is refused: a deny always wins, over the observer
   too (``decided_by="policy"``).
3. The observer's ``on_serve(request)``: True allows, False refuses (``decided_by="observer"``).
4. A permission the agent asked for in the same turn and that the observer (a person) allowed (the same kind;
   for a file, its path among the tool call's ``locations``; for a command, once per permission) allows it
   without asking twice (``decided_by="permission"``). A permission the policy allowed grants nothing: the same
   rules decide the action itself, so ``commands`` still narrows what ``kinds=["execute"]`` allows.
5. The rules: ``PermissionPolicy(allow_all=True)`` allows; a command line matching one of
   :attr:`Serve.commands` allows; the policy's ``kinds`` allow their kind (for ``execute`` only when
   :attr:`Serve.commands` is None: a list of commands narrows what ``execute`` allows) (``decided_by="policy"``).
6. Otherwise refused (``decided_by="default-refuse"``).

Command patterns are :func:`fnmatch.fnmatchcase` globs (``*`` matches anything, spaces and ``/`` included)
matched against the whole command line, command and arguments joined as a shell shows them
(:func:`command_line`), and, for a shell run with ``-c`` (``/bin/sh -lc LINE``), against LINE too. A pattern is
a coarse guard that an agent can word around (``git status; rm -rf ~`` matches ``git *``): the sandbox is the
enforcement.

This module is pure: values, the parsing of the requests' params, the rules and the answers. The I/O is in
:mod:`tinyacp._served_files` and :mod:`tinyacp._terminals`, run by :mod:`tinyacp._services` when the core
yields an :class:`Act`.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import shlex
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ._bounds import check_count, check_kind, check_timeout
from ._messages import PermissionToolCall, RequestId, ToolCall, ToolCallUpdate
from ._permissions import PermissionPolicy
from ._sandbox import Bubblewrap

__all__ = [
    "FS_METHODS",
    "TERMINAL_METHODS",
    "Act",
    "ExitStatus",
    "Failure",
    "FileState",
    "Serve",
    "ServeRequest",
    "TerminalOutput",
    "ToolCalls",
    "command_line",
    "decide_serve",
]

MiB: Final = 1 << 20

DEFAULT_OUTPUT_LIMIT: Final = 1 * MiB
"""Output a terminal keeps: kimi-cli asks for 50,000 bytes and fast-agent 16,000; 1 MiB holds a long build log's
tail, and eight terminals stay within 8 MiB."""

DEFAULT_READ_LIMIT: Final = 4 * MiB
"""The largest text a read answers with: a large source file (SQLite's amalgamation is 9 MB, most are under
100 KB); the answer is one line the agent must read whole, so a read larger than this is an error, not a partial
answer."""

MAX_LIMIT: Final = 1 << 30
"""The largest output or read limit: 1 GiB, as the reader's line limit."""

MAX_TERMINALS: Final = 1024
"""The largest ``max_terminals``: each terminal is a process group, a thread and a few fds."""

TERMINAL_METHODS: Final = frozenset(
    {"terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release"}
)
FS_METHODS: Final = frozenset({"fs/read_text_file", "fs/write_text_file"})

REFUSED: Final = -32001
"""The JSON-RPC error code of a served request the client's rules refused (nothing was done). ACP leaves codes
outside JSON-RPC's own to the implementation; -32001 is the first of the server-defined range after -32000, which
ACP gives to "authentication required"."""

FAILED: Final = -32603
"""JSON-RPC's internal error: an allowed action that failed (a file too large or not UTF-8 text, a command that
could not start)."""

_MAX_TRACKED: Final = 1024
"""Tool calls whose name, kind and locations are remembered (the oldest are forgotten first): enough for the
tool calls of many turns; an agent that announces more only loses the oldest."""

_MAX_LOCATIONS: Final = 64
"""Paths kept per tool call: a tool that edits more files than this asks again for the rest."""

_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish"})


# ----------------------------------------------------------------------------------------------------------------
# What the caller allows.


def _strings(name: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} takes a collection of strings, not a single string")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{name} takes strings, not {type(item).__name__}")
    return items


@dataclass(frozen=True, slots=True)
class Serve:
    """Which of ACP's client services tinyacp offers the agent, and their bounds (``Options(serve=...)``).

    Nothing is served by default: ``initialize`` advertises ``fs.readTextFile``, ``fs.writeTextFile`` and
    ``terminal`` exactly as switched on here, and every other such request is answered "method not found". What
    is served is still decided request by request (the docs' page "Serving files and terminals" says the
    order): confinement, a deny pattern, the observer's
    ``on_serve``, then the rules (``Options.policy`` by kind, ``commands`` and ``deny_commands``), else
    refused.

    Args:
        read: serve ``fs/read_text_file`` (kind ``read``).
        write: serve ``fs/write_text_file`` (kind ``edit``).
        terminal: serve ``terminal/create`` (kind ``execute``) and the other ``terminal/*`` methods.
        roots: folders the agent may reach besides the session's cwd and its ``additionalDirectories``
            (made absolute here).
        commands: glob patterns of command lines the rules allow (command and args joined as a shell shows
            them, ``/bin/sh -lc 'git status'``). None: no pattern;
            the policy's kind ``execute`` then allows any command (a list narrows it to the lines that match).
        deny_commands: glob patterns of command lines always refused, whoever allowed them.
        max_terminals: terminals alive at once (one more is refused until one is released).
        output_limit: bytes of output a terminal keeps (the agent's ``outputByteLimit`` may ask for fewer).
        read_limit: the largest text a read answers with, in bytes; a larger read is an error.
        command_timeout: seconds a command may run before its process group is killed (None: no bound), which
            also bounds ``terminal/wait_for_exit``.
        sandbox: a :class:`~tinyacp.Bubblewrap` to run each command in (Linux): it may write only in the session's
            roots (its cwd, ``additionalDirectories``, ``roots``) and the sandbox's ``writable``, and with
            ``network=None`` it gets no network (loopback only). Making the client raises
            :class:`~tinyacp.SandboxUnavailable` where bwrap cannot run.

    Raises:
        TypeError: a flag is not a bool, a collection is a single string, or ``sandbox`` is not a
            :class:`~tinyacp.Bubblewrap`.
        ValueError: a limit out of range (``max_terminals`` 1 to 1,024, a byte limit 1 to 1 GiB, a timeout as
            every duration).
    """

    read: bool = False
    write: bool = False
    terminal: bool = False
    roots: tuple[str, ...] = ()
    commands: tuple[str, ...] | None = None
    deny_commands: tuple[str, ...] = ()
    max_terminals: int = 8
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    read_limit: int = DEFAULT_READ_LIMIT
    command_timeout: float | None = None
    sandbox: Bubblewrap | None = None
    _methods: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __init__(
        self,
        read: bool = False,
        write: bool = False,
        terminal: bool = False,
        *,
        roots: Iterable[str | os.PathLike[str]] = (),
        commands: Iterable[str] | None = None,
        deny_commands: Iterable[str] = (),
        max_terminals: int = 8,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        read_limit: int = DEFAULT_READ_LIMIT,
        command_timeout: float | None = None,
        sandbox: Bubblewrap | None = None,
    ) -> None:
        for name, flag in (("read", read), ("write", write), ("terminal", terminal)):
            if not isinstance(flag, bool):
                raise TypeError(f"Serve.{name} must be a bool, not {flag!r}")
        if isinstance(roots, str | bytes | os.PathLike):
            raise TypeError("roots takes a collection of folders, not a single one")
        check_count("max_terminals", max_terminals, 1, MAX_TERMINALS)
        check_count("output_limit", output_limit, 1, MAX_LIMIT)
        check_count("read_limit", read_limit, 1, MAX_LIMIT)
        check_timeout("command_timeout", command_timeout)
        if sandbox is not None:
            check_kind("sandbox", sandbox, Bubblewrap)
        methods: set[str] = set()
        if read:
            methods.add("fs/read_text_file")
        if write:
            methods.add("fs/write_text_file")
        if terminal:
            methods |= TERMINAL_METHODS
        values = {
            "read": read,
            "write": write,
            "terminal": terminal,
            "roots": tuple(os.path.abspath(os.fspath(root)) for root in roots),
            "commands": None if commands is None else _strings("commands", commands),
            "deny_commands": _strings("deny_commands", deny_commands),
            "max_terminals": max_terminals,
            "output_limit": output_limit,
            "read_limit": read_limit,
            "command_timeout": command_timeout,
            "sandbox": sandbox,
            "_methods": frozenset(methods),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def methods(self) -> frozenset[str]:
        """The methods served."""
        return self._methods

    def advertise(self, capabilities: dict[str, Any]) -> None:
        """Set ``fs`` and ``terminal`` of ``initialize``'s ``clientCapabilities`` to what is served."""
        capabilities["fs"] = {"readTextFile": self.read, "writeTextFile": self.write}
        capabilities["terminal"] = self.terminal


# ----------------------------------------------------------------------------------------------------------------
# What the agent asks.


class _Params(msgspec.Struct, frozen=True, rename="camel"):
    session_id: str


class ReadParams(_Params, frozen=True):
    """``fs/read_text_file``."""

    path: str
    line: int | None = None
    limit: int | None = None


class WriteParams(_Params, frozen=True):
    """``fs/write_text_file``."""

    path: str
    content: str


class EnvEntry(msgspec.Struct, frozen=True):
    """One of ``terminal/create``'s ``env``."""

    name: str
    value: str


class CreateParams(_Params, frozen=True):
    """``terminal/create``."""

    command: str
    args: list[str] = msgspec.field(default_factory=list)
    env: list[EnvEntry] = msgspec.field(default_factory=list)
    cwd: str | None = None
    output_byte_limit: int | None = None


class TerminalParams(_Params, frozen=True):
    """``terminal/output``, ``wait_for_exit``, ``kill`` and ``release``."""

    terminal_id: str


_PARAMS: Final[dict[str, type[_Params]]] = {
    "fs/read_text_file": ReadParams,
    "fs/write_text_file": WriteParams,
    "terminal/create": CreateParams,
    "terminal/output": TerminalParams,
    "terminal/wait_for_exit": TerminalParams,
    "terminal/kill": TerminalParams,
    "terminal/release": TerminalParams,
}

_UINT32: Final = (1 << 32) - 1


def parse_params(method: str, params: bytes) -> _Params | str:  # noqa: PLR0911  one return per check
    """The params of a served request, or why they are invalid (the answer is then -32602)."""
    try:
        value = msgspec.json.decode(params, type=_PARAMS[method])
    except (msgspec.MsgspecError, RecursionError) as exc:
        return str(exc)
    if isinstance(value, ReadParams):
        for name in ("line", "limit"):
            number = getattr(value, name)
            if number is not None and not 0 <= number <= _UINT32:
                return f"{name} must be a uint32, not {number}"
        if value.line == 0:
            return "line is 1-based: 0 is no line"
    if isinstance(value, CreateParams):
        if not value.command or "\0" in value.command or any("\0" in arg for arg in value.args):
            return "command must be a non-empty string without NUL, and args without NUL"
        if value.output_byte_limit is not None and value.output_byte_limit < 0:
            return "outputByteLimit must be a uint64"
        if any(not entry.name or "=" in entry.name or "\0" in entry.name + entry.value for entry in value.env):
            return "an env name must be non-empty, without '=' or NUL (and its value without NUL)"
    return value


class FileState(msgspec.Struct, frozen=True):
    """A file as it was before a write replaced it: absent, or its size and SHA-256 (hex)."""

    exists: bool
    size: int = 0
    sha256: str | None = None


class ExitStatus(msgspec.Struct, frozen=True):
    """How a command ended: its exit code, or the name of the signal that ended it (``SIGKILL``)."""

    exit_code: int | None = None
    signal: str | None = None

    def wire(self) -> dict[str, Any]:
        """As ACP's ``TerminalExitStatus`` and ``WaitForTerminalExitResponse`` carry it."""
        return {"exitCode": self.exit_code, "signal": self.signal}


class TerminalOutput(msgspec.Struct, frozen=True):
    """What ``terminal/output`` answers."""

    output: str
    truncated: bool
    exit: ExitStatus | None


class Failure(msgspec.Struct, frozen=True):
    """An act that could not be done (or was refused by confinement): the JSON-RPC error to answer with."""

    code: int
    message: str
    confinement: bool = False
    """A refusal by confinement or by the terminal limit: the request is refused before anyone is asked."""


@dataclass(slots=True, eq=False)
class ServeRequest:
    """A request to read, write or run something, and, once decided, the decision.

    The observer's ``on_serve`` gets it with the facts filled in; ``allowed``, ``decided_by`` and ``reason`` are
    filled in before ``on_serve_decision`` is called, and that call returns before anything is read, written or
    started. ``path``, ``command``, ``args``, ``cwd`` and ``env`` are the agent's own values; ``resolved`` and
    ``line`` are what tinyacp made of them.
    """

    epoch: int
    raw: bytes
    """The exact line the agent sent, without its newline."""
    request_id: RequestId
    method: str
    """``fs/read_text_file``, ``fs/write_text_file`` or ``terminal/create``."""
    session_id: str
    kind: str
    """``read``, ``edit`` or ``execute``."""
    path: str | None = None
    """The file to read or write, as the agent sent it."""
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: str | None = None
    """The command's working directory as the agent sent it (None: the session's cwd)."""
    env: dict[str, str] = field(default_factory=dict)
    """The environment entries the agent asked for (added to a minimal base of the client's: ``PATH``, ``HOME``,
    ``USER``, ``LOGNAME``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TZ``, ``TMPDIR``, and ``TERM=dumb``)."""
    tool_call: PermissionToolCall | None = None
    """The session's tool call this request most likely belongs to (by path, kind and recency), if any."""
    line: str | None = None
    """The command line as a shell shows it (:func:`command_line`): what the command patterns match."""
    resolved: str | None = None
    """The real path the file or working directory resolved to, once confinement accepted it."""
    size: int | None = None
    """Bytes of UTF-8 a write would write."""
    prior: FileState | None = None
    """A write's file as it was before (absent, or size and SHA-256), known before anyone decides."""
    line_number: int | None = None
    """A read's first line (1-based), as asked."""
    limit: int | None = None
    """A read's number of lines, as asked."""
    output_limit: int | None = None
    """A terminal's output limit as the agent asked (``outputByteLimit``)."""
    granted: bool = False
    """Whether a permission allowed earlier in the turn covers this action: unless the observer decides, it is
    allowed without asking twice (an observer that asks a person should leave it to the rules: None)."""
    allowed: bool = False
    decided_by: str = ""
    """``confinement``, ``limit``, ``observer``, ``permission``, ``policy`` or ``default-refuse``."""
    reason: str = ""
    """Why, in words for a log."""

    def record(self) -> dict[str, Any]:
        """The decision as the journal keeps it (no file content, no env values)."""
        fields: dict[str, Any] = {"method": self.method, "session_id": self.session_id, "kind": self.kind}
        if self.path is not None:
            fields["path"] = self.path
        if self.line is not None:
            fields["command_line"] = self.line
        if self.resolved is not None:
            fields["resolved"] = self.resolved
        if self.size is not None:
            fields["size"] = self.size
        if self.prior is not None:
            fields["prior"] = msgspec.structs.asdict(self.prior)
        if self.tool_call is not None:
            fields["tool_call_id"] = self.tool_call.tool_call_id
        fields.update(allowed=self.allowed, decided_by=self.decided_by, reason=self.reason)
        return fields


class TerminalRef(msgspec.Struct, frozen=True):
    """A terminal of a session, as ``terminal/output``, ``wait_for_exit``, ``kill`` and ``release`` name it."""

    session_id: str
    terminal_id: str


class Act:
    """Do this I/O (``check``, ``read``, ``write``, ``create``, ``output``, ``wait``, ``kill``, ``release``) and
    send back its result: what the core yields for the services (:mod:`tinyacp._services`) to act on."""

    __slots__ = ("content", "op", "roots", "target")

    def __init__(
        self, op: str, target: ServeRequest | TerminalRef, roots: tuple[str, ...] = (), content: str = ""
    ) -> None:
        self.op = op
        self.target = target
        self.roots = roots
        self.content = content
        """What a write writes."""


PENDING: Final = "pending"
"""What ``wait`` gives for a command still running: the answer waits for its exit."""


def command_line(command: str, args: Iterable[str]) -> str:
    """The command line as a shell shows it: the command as sent (a whole line when there are no args, as
    kimi-cli sends it), each argument quoted only where a shell needs it (``/bin/sh -lc 'git status'``)."""
    return " ".join([command, *(shlex.quote(arg) for arg in args)])


def shell_line(command: str, args: tuple[str, ...]) -> str | None:
    """The LINE of a shell run as ``sh -c LINE`` (any flags with ``c`` among them, ``-lc``), else None."""
    if posixpath.basename(command) not in _SHELLS or len(args) < 2:
        return None
    flags = args[0]
    if flags.startswith("-") and not flags.startswith("--") and "c" in flags:
        return args[1]
    return None


def _matching(patterns: Iterable[str], lines: list[str]) -> str | None:
    for pattern in patterns:
        if any(fnmatch.fnmatchcase(line, pattern) for line in lines):
            return pattern
    return None


def _lines(request: ServeRequest) -> list[str]:
    assert request.command is not None and request.line is not None
    lines = [request.line]
    inner = shell_line(request.command, request.args)
    if inner is not None:
        lines.append(inner)
    return lines


def rules_say(request: ServeRequest, policy: PermissionPolicy, serve: Serve) -> bool | None:
    """What the rules alone say of ``request`` (confinement aside): True when a deny pattern does not refuse it
    and a permission of the turn, the policy or a command pattern allows it; False when a deny pattern refuses
    it; None when no rule decides (the command asks a person then, else it is refused)."""
    probe = ServeRequest(
        request.epoch,
        b"",
        request.request_id,
        request.method,
        request.session_id,
        request.kind,
        path=request.path,
        command=request.command,
        args=request.args,
        line=request.line,
    )
    decide_serve(probe, None, policy, serve, granted=request.granted)
    if probe.decided_by == "default-refuse":
        return None
    return probe.allowed


def decide_serve(
    request: ServeRequest, answer: bool | None, policy: PermissionPolicy, serve: Serve, *, granted: bool
) -> None:
    """Fill in the request's decision (confinement was checked before): a deny pattern, else the observer's
    ``answer``, else a permission ``granted`` in the same turn, else the rules, else refused."""
    execute = request.kind == "execute"
    if execute:
        denied = _matching(serve.deny_commands, _lines(request))
        if denied is not None:
            _set(request, False, "policy", f"the command line matches the deny pattern {denied!r}")
            return
    if answer is not None:
        _set(request, answer, "observer", f"the observer {'allowed' if answer else 'refused'} it")
    elif granted:
        _set(request, True, "permission", "a permission allowed it earlier in the turn")
    elif policy.allow_all:
        _set(request, True, "policy", "the policy allows everything (allow_all)")
    elif execute and serve.commands is not None:
        pattern = _matching(serve.commands, _lines(request))
        if pattern is not None:
            _set(request, True, "policy", f"the command line matches the pattern {pattern!r}")
        else:
            _set(request, False, "default-refuse", "the command line matches none of the allowed patterns")
    elif request.kind in policy.kinds:
        _set(request, True, "policy", f"the policy allows kind {request.kind!r}")
    else:
        _set(request, False, "default-refuse", "neither the observer nor the rules allowed it")


def _set(request: ServeRequest, allowed: bool, by: str, reason: str) -> None:
    request.allowed = allowed
    request.decided_by = by
    request.reason = reason


# ----------------------------------------------------------------------------------------------------------------
# The session's tool calls: names carried forward, and what a permission allowed in the turn.


class _Tool:
    __slots__ = ("kind", "locations", "name", "session_id", "status", "title")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.name: str | None = None
        self.kind: str | None = None
        self.title: str | None = None
        self.status: str | None = None
        self.locations: tuple[str, ...] = ()


def _paths(locations: list[Any] | None) -> tuple[str, ...]:
    if not locations:
        return ()
    paths = []
    for location in locations[:_MAX_LOCATIONS]:
        path = location.get("path") if isinstance(location, dict) else None
        if isinstance(path, str) and path:
            paths.append(posixpath.normpath(path))
    return tuple(paths)


_KINDS: Final = {"fs/read_text_file": "read", "fs/write_text_file": "edit", "terminal/create": "execute"}


class ToolCalls:
    """The tool calls the agent announced (``tool_call``, ``tool_call_update``), by session and id, bounded; and
    the grants of the turn: what a permission answer allowed, so a served action it covers is not asked twice."""

    def __init__(self) -> None:
        self._tools: OrderedDict[tuple[str, str], _Tool] = OrderedDict()
        self._grants: list[tuple[str, str, tuple[str, ...]]] = []
        """(session, kind, paths) of each permission allowed in the turn (bounded like the tools)."""

    def seen(self, session_id: str, payload: ToolCall | ToolCallUpdate) -> None:
        """Remember what this update says of its tool call."""
        key = (session_id, payload.tool_call_id)
        tool = self._tools.get(key)
        if tool is None:
            tool = self._tools[key] = _Tool(session_id)
            if len(self._tools) > _MAX_TRACKED:
                self._tools.popitem(last=False)
        else:
            self._tools.move_to_end(key)
        if payload.name is not None:
            tool.name = payload.name
        if payload.tool_kind is not None:
            tool.kind = payload.tool_kind
        if payload.title is not None:
            tool.title = payload.title
        if payload.status is not None:
            tool.status = payload.status
        if payload.locations is not None:
            tool.locations = _paths(payload.locations)

    def name_of(self, session_id: str, tool_call_id: str) -> str | None:
        """The tool's name an earlier update of the same tool call gave (Codex names it there, not in the
        permission request)."""
        tool = self._tools.get((session_id, tool_call_id))
        return None if tool is None else tool.name

    def completed(self, session_id: str, tool_call: PermissionToolCall) -> PermissionToolCall:
        """``tool_call`` with its kind and locations filled in from the earlier updates of the same tool call."""
        tool = self._tools.get((session_id, tool_call.tool_call_id))
        if tool is None:
            return tool_call
        changes: dict[str, Any] = {}
        if tool_call.kind is None and tool.kind is not None:
            changes["kind"] = tool.kind
        if tool_call.locations is None and tool.locations:
            changes["locations"] = [{"path": path} for path in tool.locations]
        if tool_call.title is None and tool.title is not None:
            changes["title"] = tool.title
        return msgspec.structs.replace(tool_call, **changes) if changes else tool_call

    def grant(self, session_id: str, tool_call: PermissionToolCall) -> None:
        """A permission for ``tool_call`` was allowed: its kind and paths are granted for the rest of the turn."""
        if tool_call.kind not in ("read", "edit", "execute"):
            return
        self._grants.append((session_id, tool_call.kind, _paths(tool_call.locations)))
        if len(self._grants) > _MAX_TRACKED:
            del self._grants[0]

    def granted(self, session_id: str, kind: str, path: str | None, *, use: bool = True) -> bool:
        """Whether a grant of the turn covers this action: the same kind, and for a file its path among the
        tool call's locations. A command's grant covers one command (it is used up, unless ``use`` is False)."""
        wanted = posixpath.normpath(path) if path is not None else None
        for index, (session, granted_kind, paths) in enumerate(self._grants):
            if session != session_id or granted_kind != kind:
                continue
            if kind == "execute":
                if use:
                    del self._grants[index]
                return True
            if wanted is not None and wanted in paths:
                return True
        return False

    def end_turn(self) -> None:
        """The turn is over: its grants go."""
        self._grants.clear()

    def likely(self, session_id: str, method: str, path: str | None) -> PermissionToolCall | None:
        """The session's tool call a served request most likely belongs to: one not finished whose locations
        hold the path, else the latest not finished of the same kind, else the latest not finished."""
        kind = _KINDS.get(method)
        wanted = posixpath.normpath(path) if path is not None else None
        by_kind = latest = None
        for (session, tool_call_id), tool in reversed(self._tools.items()):
            if session != session_id or tool.status in ("completed", "failed"):
                continue
            if wanted is not None and wanted in tool.locations:
                return self._as_tool_call(tool_call_id, tool)
            if by_kind is None and tool.kind == kind:
                by_kind = (tool_call_id, tool)
            if latest is None:
                latest = (tool_call_id, tool)
        chosen = by_kind or latest
        return None if chosen is None else self._as_tool_call(*chosen)

    @staticmethod
    def _as_tool_call(tool_call_id: str, tool: _Tool) -> PermissionToolCall:
        locations = [{"path": path} for path in tool.locations] or None
        return PermissionToolCall(tool_call_id, tool.title, tool.kind, tool.status, None, locations, None, tool.name)


def kind_of(method: str) -> str:
    """The kind of action a served method is: ``read``, ``edit`` or ``execute``."""
    return _KINDS[method]
