"""Errors that say what happened: the exit status, the message and the lines that help a person act on it.

An agent's error answer is shown with its ``data`` (where real agents put the cause: "Query closed before
response received", a network error) and with the tail of the agent's stderr. A program that does not speak ACP
on stdout (``gemini`` without ``--acp``) is caught at its first line, or when ``initialize`` gets no answer in
time, and that first line is shown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._errors import (
    AgentExited,
    AgentTimeout,
    AuthRequired,
    LimitExceeded,
    ObserverError,
    RequestError,
    SessionNotFound,
    SpawnError,
    UsageError,
    describe_returncode,
)
from ..._launch_failures import NOT_ACP_WORDS, Said, start_failure
from ..._messages import Initialize
from ..._startup_watch import StartupWatch, said_of
from ..shared._display import one_line
from ..shared._exit import Exit, SettingUnavailable
from ._resolve import BUILTIN_AGENTS, AgentSpec
from ._session import SESSIONS_HINT, auth_needs

__all__ = ["Explanation", "data_lines", "explain", "stderr_lines"]

DATA_LINES = 6
"""How many lines of an error's ``data`` are shown: enough for a cause and its context, not a whole dump."""
STDERR_LINES = 12
"""How many of the agent's last stderr lines are shown with an error."""
_LINE = 300

NOT_ACP = f"this program {NOT_ACP_WORDS}"


@dataclass
class Explanation:
    """What the command says about an error."""

    code: Exit
    message: str
    hint: list[str] = field(default_factory=list)


def data_lines(data: Any, max_lines: int = DATA_LINES) -> list[str]:
    """An error's ``data``, sanitized, as at most ``max_lines`` lines (a string as it is, anything else as JSON)."""
    if data is None:
        return []
    if isinstance(data, str):
        text = data
    else:
        try:
            text = json.dumps(data, ensure_ascii=False, indent=1, default=str)
        except (TypeError, ValueError):
            text = repr(data)
    lines = [one_line(line, _LINE) for line in text.splitlines() if line.strip()]
    if len(lines) > max_lines:
        left_out = len(lines) - max_lines + 1
        lines = [*lines[: max_lines - 1], f"… ({left_out} more lines)"]
    return lines


def stderr_lines(tail: bytes | None, where: str | None = None) -> list[str]:
    """The last lines of the agent's stderr, sanitized and indented, under a heading; or where to find them."""
    if not tail:
        return [f"the agent's stderr is in {where}"] if where else []
    lines = [line for line in tail.decode("utf-8", "replace").splitlines() if line.strip()][-STDERR_LINES:]
    if not lines:
        return []
    return ["agent stderr (last lines):", *(f"  {one_line(line, _LINE)}" for line in lines)]


def _first_line(line: bytes | None) -> list[str]:
    if not line:
        return ["it wrote nothing on stdout"]
    text = line.decode("utf-8", "replace")
    return [f"its first line on stdout: {one_line(text, _LINE)}"]


def explain(  # noqa: C901, PLR0911, PLR0912  one branch per error type, in the order of the exit-status table
    exc: BaseException,
    agent: AgentSpec,
    init: Initialize | None,
    *,
    first_line: bytes | None = None,
    startup_timeout: float | None = None,
    raw_methods: Mapping[str, Any] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    watch: StartupWatch | None = None,
    stderr_tail: bytes | None = None,
    deadline_flag: str = "--startup-timeout",
) -> Explanation:
    """The exit status, the message and the hint lines for an error of a run (or of ``probe``).

    Args:
        exc: what was raised.
        agent: the agent that was started.
        init: the agent's answer to ``initialize``, if it came.
        first_line: the first line the agent wrote on stdout, if any (``watch`` gives it too).
        startup_timeout: when ``exc`` is the timeout of ``initialize`` by ``--startup-timeout``, its value.
        raw_methods: the auth methods of the raw ``initialize`` answer, by id (what each needs).
        cwd: the agent's working directory, where a relative program path is looked up.
        watch: the run's :class:`StartupWatch`: the lines that are not JSON-RPC, and whether it stopped the agent.
        stderr_tail: the last bytes of the agent's stderr (else the error's own), where ``npx`` and ``uvx`` say
            why they could not start it.
        deadline_flag: the option that sets ``startup_timeout``, named in the hints (``probe``'s is ``--timeout``).
    """
    message = one_line(exc.message if isinstance(exc, AgentExited) else str(exc), 2000)
    if isinstance(exc, SettingUnavailable):
        return Explanation(Exit.USAGE, message)
    if isinstance(exc, SpawnError):
        install = [f"to install {agent.name}: {agent.install}"] if agent.install else []
        return Explanation(Exit.NOT_INSTALLED, _cannot_start(agent, exc.__cause__, cwd) or message, install)
    if first_line is None and watch is not None:
        first_line = watch.first_line
    if init is None:
        tail = stderr_tail if stderr_tail is not None else getattr(exc, "stderr_tail", None)
        said = said_of(watch, exc)
        started = _not_started(exc, agent, first_line, said, (startup_timeout, deadline_flag), tail)
        if started is not None:
            return started
    if isinstance(exc, AgentTimeout):
        return Explanation(Exit.TIMEOUT, message)
    if isinstance(exc, LimitExceeded):
        return Explanation(Exit.LIMIT, message, ["raise the limit with the --max-* options if the agent is honest"])
    if isinstance(exc, ObserverError):
        if isinstance(exc.__cause__, OSError):
            message = f"the journal could not be written: {exc.__cause__}"
        return Explanation(Exit.AGENT_ERROR, message)
    if isinstance(exc, UsageError | OSError):
        return Explanation(Exit.USAGE, message)
    if isinstance(exc, AuthRequired):
        return Explanation(Exit.NOT_LOGGED_IN, message, _not_logged_in(agent, init, raw_methods or {}))
    if isinstance(exc, SessionNotFound) and exc.method in ("session/resume", "session/load"):
        message = f"cannot continue the session: the agent does not know it ({one_line(exc.message, 200)})"
        return Explanation(Exit.AGENT_ERROR, message, [*data_lines(exc.data), SESSIONS_HINT])
    hint: list[str] = []
    if isinstance(exc, RequestError):
        hint += data_lines(exc.data)
        if "auth" in exc.message.lower():
            hint += _login_hint(agent, init)
    if isinstance(exc, AgentExited) and init is None and first_line is None and agent.install:
        hint.append(f"is {agent.name} installed and working? {agent.install}")
    return Explanation(Exit.AGENT_ERROR, message, hint)


def _not_started(  # noqa: PLR0917  the facts of one failed start
    exc: BaseException,
    agent: AgentSpec,
    first_line: bytes | None,
    said: Said | None,
    deadline: tuple[float | None, str],
    tail: bytes | None,
) -> Explanation | None:
    """What went wrong when the agent never answered ``initialize``; None when it is no failure to start.

    ``deadline`` is the startup timeout, if it is what passed, and the option that sets it."""
    startup_timeout, flag = deadline
    named = start_failure(exc, agent, said=said, first_line=first_line, tail=tail, deadline=deadline)
    if named is not None:
        if named.kind == "runner":  # npx or uvx never started the agent: it is not installed, and says why
            return Explanation(Exit.NOT_INSTALLED, named.message, named.hint)
        more = _acp_hint(agent) if named.kind == "said" else []
        return Explanation(Exit.AGENT_ERROR, named.message, [*named.hint, *more])
    if isinstance(exc, RequestError | AgentExited):
        not_acp = _not_acp(exc, first_line)
        if not_acp is not None:
            return Explanation(Exit.AGENT_ERROR, not_acp, _acp_hint(agent))
    if isinstance(exc, AgentTimeout) and startup_timeout is not None:
        message = f"{NOT_ACP}: no answer to initialize in {startup_timeout:g} s"
        more = [*_first_line(first_line), *_acp_hint(agent), f"(a slow first start? raise {flag})"]
        return Explanation(Exit.AGENT_ERROR, message, more)
    return None


def _not_on_path(agent: AgentSpec, program: str) -> str:
    if agent.launcher in ("npx", "uvx") and agent.package:  # the runner is missing, not the agent
        return f"{agent.name} cannot start: {program!r} was not found on PATH (it runs {agent.package})"
    return f"{agent.name} is not installed: {program!r} was not found on PATH"


def _cannot_start(agent: AgentSpec, cause: BaseException | None, cwd: str | os.PathLike[str] | None) -> str | None:
    """Why the program could not be started, in words that fit what it is; None to keep the error's own."""
    program = agent.command[0]
    # A relative path with a slash is looked up from the agent's working directory, not ours: check it there.
    where = os.path.join(cwd, program) if cwd is not None else program
    elsewhere = cwd is not None and os.path.realpath(cwd) != os.getcwd()
    relative = (
        f" (a relative path: looked up from the agent's working directory {os.fsdecode(cwd)})"
        if cwd is not None and elsewhere and os.sep in program and not os.path.isabs(program)
        else ""
    )
    if isinstance(cause, FileNotFoundError):
        if os.sep not in program:
            return _not_on_path(agent, program) if agent.program() is None else None
        if not os.path.lexists(where):
            return f"cannot start the agent: {program} does not exist{relative}"
        return f"cannot start the agent: {program} names an interpreter (its #! line) that does not exist{relative}"
    if isinstance(cause, PermissionError):
        if os.path.isdir(where):
            return f"cannot start the agent: {program} is a directory, not a program{relative}"
        return f"cannot start the agent: {program} is not executable (chmod +x, or give its interpreter){relative}"
    return None


def _not_acp(exc: RequestError | AgentExited, first_line: bytes | None) -> str | None:
    """What a program that failed before answering ``initialize`` is, when it is plainly not an ACP agent."""
    echoed = _is_our_initialize(first_line)
    if echoed:
        return f"{NOT_ACP}: it writes back what it reads (as cat does), so it answered our own initialize request"
    if isinstance(exc, RequestError) and exc.code == -32601:
        return f"{NOT_ACP}: it does not know the method initialize ({one_line(exc.message, 200)})"
    if isinstance(exc, AgentExited) and not first_line:
        how = describe_returncode(exc.returncode) if exc.returncode is not None else "it closed its output"
        return (
            f"the agent ended before answering initialize ({how}) and wrote nothing on stdout: it does not speak "
            "ACP, needs a flag to, or failed as it started (see its stderr)"
        )
    return None


def _is_our_initialize(line: bytes | None) -> bool:
    """Whether the agent's first line is a request for ``initialize``: ours, sent back to us."""
    if not line:
        return False
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "initialize" and "id" in message


def _not_logged_in(agent: AgentSpec, init: Initialize | None, raw: Mapping[str, Any]) -> list[str]:
    methods = init.auth_methods if init is not None else []
    lines = [f"{agent.name} needs a login: {agent.login or 'see its documentation'}"]
    if methods:
        lines.append("the auth methods it offers (log in with --auth METHOD):")
        for method in methods:
            needs = one_line(auth_needs(method, agent, raw), 200)
            lines.append(f"  {one_line(method.id, 60)} ({one_line(method.name, 60)}): {needs}")
    return lines


def _builtin_of(agent: AgentSpec) -> AgentSpec | None:
    """The built-in entry of the same agent: of the same name, or fetching the same package at another release."""
    same = BUILTIN_AGENTS.get(agent.name)
    if same is not None or not agent.package:
        return same
    package = _unversioned(agent.package)
    return next(
        (spec for spec in BUILTIN_AGENTS.values() if spec.package and _unversioned(spec.package) == package), None
    )


def _unversioned(package: str) -> str:
    """``@scope/name`` of ``@scope/name@1.2.3``, ``name`` of ``name@1.2.3`` or ``name==1.2.3``."""
    at = package.rfind("@")
    return (package[:at] if at > 0 else package).split("==")[0]


def _acp_hint(agent: AgentSpec) -> list[str]:
    if agent.source != "built-in":
        hint = ["check the command: many agents need a flag or subcommand for ACP (gemini --acp, opencode acp)"]
        builtin = _builtin_of(agent)  # a config entry over a built-in one: its own release of the agent
        if (
            builtin is not None
            and builtin.version
            and tuple(builtin.command) != tuple(agent.command[: len(builtin.command)])
        ):
            pinned = builtin.package or f"{agent.name} {builtin.version}"
            hint.append(f"tinyacp's built-in {builtin.name} entry runs {pinned}: another release may be the cause")
        return hint
    if not agent.install:
        return []
    if agent.version and agent.launcher == "path":  # what is on PATH may be another release than the one checked
        return [
            f"tinyacp was checked with {agent.name} {agent.version}: a newer release may be the cause; "
            f"to install that one: {agent.install}"
        ]
    # What it needs to start at all (a model, a Python, a login): the usual cause when the very release runs.
    needs = [f"{agent.name} needs {agent.needs}"] if agent.needs else []
    if agent.version and agent.package:  # npx or uvx runs the very release that was checked
        return [*needs, f"tinyacp starts {agent.package}, the release it was checked with"]
    return [*needs, f"is {agent.name} installed and recent enough? {agent.install}"]


def _login_hint(agent: AgentSpec, init: Initialize | None) -> list[str]:
    hint = [f"{agent.name} needs you to log in first: {agent.login or 'see its documentation'}"]
    offered = ", ".join(one_line(method.id, 60) for method in init.auth_methods) if init is not None else ""
    if offered:
        hint.append(f"it offers these auth methods (use --auth METHOD): {offered}")
    return hint
