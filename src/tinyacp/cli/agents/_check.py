"""``tinyacp agents --check``: start agents, ask each ``initialize`` and nothing else, and report what each said.

No session is opened and no prompt is sent, so no agent has a reason to write anything; each runs in a fresh
temporary directory, removed afterwards, and no journal or index entry is written. Agents are checked a few at a
time, each under its own deadline, and the client's teardown bounds what an agent that ignores its deadline costs.
Without names, only the agents that start without a download are checked: an ``npx``/``uvx`` entry fetches its
package on its first start, which is slow and needs the network, so it is checked only when named (or with
``--all``).

A row is one JSON object with stable snake_case keys (documented in docs/cli.md); the text table is made from the
rows, each cell sanitized, since most of it is what the agent sent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ..._async_client import AsyncClient
from ..._errors import (
    AgentExited,
    AgentTimeout,
    AuthRequired,
    ObserverError,
    RequestError,
    SpawnError,
    TinyAcpError,
)
from ..._launch_failures import NOT_ACP_WORDS
from ..._options import Options
from ..._startup_watch import NotAcp
from ..shared._display import one_line, sanitize, wants_color
from ..shared._exit import Exit, UsageProblem
from ..shared._features import COMMAND_FEATURES
from ..shared._sandbox import sandbox_for
from ._explain import NOT_ACP, explain, stderr_lines
from ._load import load_config
from ._offers import InitializeAnswer, auth_method_line, initialize_report, newer_offered, session_capability_names
from ._resolve import AgentSpec, Config, resolve_agent

if TYPE_CHECKING:
    from ..._sandbox import Bubblewrap

__all__ = ["check_exit_status", "cmd_check"]

T = TypeVar("T")

FAILED = ("not_acp", "exited", "timed_out", "error")
"""The statuses of an agent that started but did not answer ``initialize`` (exit status 1)."""

_STATUS_WORDS = {
    "ok": "ok",
    "needs_login": "needs login",
    "not_installed": "not installed",
    "not_acp": "not ACP",
    "exited": "exited",
    "timed_out": "timed out",
    "error": "error",
    "stopped": "stopped",
}
_STDERR_SHOWN = 4
"""The agent's last stderr lines under a failed row of the text table (the JSON row keeps up to 12)."""


def cmd_check(args: argparse.Namespace) -> int:
    """``tinyacp agents --check [NAME…]``: the exit status is :func:`check_exit_status` of the rows."""
    config = load_config(args.config)
    chosen, left = _choose(args.check, args.agent_command, config, everything=args.all)
    timeouts = [_timeout(args, spec) for spec in chosen]
    if args.sandbox:
        _sandbox_available()
    progress = _Progress(len(chosen))
    stopped_by: int | None = None
    try:
        rows = asyncio.run(
            _until_signal(_check_all(chosen, timeouts, args.concurrency, progress, sandboxed=args.sandbox))
        )
    except _Stopped as stopped:  # the rows it has, and a row that says so for each agent it stopped
        stopped_by = stopped.signum
        rows = [
            progress.rows[i] or _stopped(spec, stopped_by, progress.started.get(i)) for i, spec in enumerate(chosen)
        ]
    rows += [_not_checked(spec, why) for spec, why in left]
    if args.format == "json":
        print(json.dumps(rows, ensure_ascii=True, indent=2))
    else:
        print(_table(rows, color=wants_color(sys.stdout)))
    if stopped_by is None:
        return int(check_exit_status(rows))
    unfinished = [row["name"] for row in rows if row["status"] == "stopped" or row["skipped"] == "stopped"]
    name = "Ctrl-C" if stopped_by == signal.SIGINT else signal.Signals(stopped_by).name
    print(
        f"tinyacp: you stopped the check ({name}); not finished: {one_line(', '.join(unfinished), 300)}",
        file=sys.stderr,
    )
    return 128 + stopped_by


def check_exit_status(rows: list[dict[str, Any]]) -> Exit:
    """0 when every checked agent answered ``initialize`` (one that needs a login did answer); 1
    (:attr:`Exit.AGENT_ERROR`) when one started and did not (it exited, does not speak ACP, timed out, answered
    with an error); else 7 (:attr:`Exit.NOT_INSTALLED`) when one could not be started."""
    statuses = {row["status"] for row in rows if row["checked"]}
    if statuses.intersection(FAILED):
        return Exit.AGENT_ERROR
    if "not_installed" in statuses:
        return Exit.NOT_INSTALLED
    return Exit.OK


def _choose(
    names: list[str], commands: list[str], config: Config, *, everything: bool
) -> tuple[list[AgentSpec], list[tuple[AgentSpec, str]]]:
    """The agents to check, and those left out with why: the named ones (a name may carry arguments, or be a
    command line, as ``--agent`` takes it) and the ``--agent-command`` ones; else every known agent that starts
    without a download and whose program is here; with ``everything``, every known agent.

    Raises:
        ConfigError: a name is not known, or a command line cannot be split into words.
    """
    if names or commands:
        specs = [resolve_agent(name, config) for name in names]
        specs += [resolve_agent(None, config, command=command) for command in commands]
        chosen: dict[str, AgentSpec] = {}
        for given, spec in zip([*names, *commands], specs, strict=True):
            chosen.setdefault(spec.key if spec.source.startswith("--") else given, spec)
        return list(chosen.values()), []
    if everything:
        return list(config.agents.values()), []
    picked: list[AgentSpec] = []
    left: list[tuple[AgentSpec, str]] = []
    for spec in config.agents.values():
        if spec.downloads:  # checked only when named, or with --all
            left.append((spec, "download"))
        elif spec.program() is None:
            left.append((spec, "not_on_path"))
        else:
            picked.append(spec)
    return picked, left


def _timeout(args: argparse.Namespace, spec: AgentSpec) -> float:
    """``--timeout``, else the default of its kind: a download's first start is slow (``npx`` starts Node too)."""
    if args.timeout is not None:
        return float(args.timeout)
    return float(args.download_timeout if spec.downloads else args.check_timeout)


class _Stopped(Exception):
    """SIGTERM or SIGHUP stopped the check."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


async def _until_signal(work: Coroutine[Any, Any, T]) -> T:
    """``work``, cancelled by Ctrl-C, SIGTERM or SIGHUP: each agent's client tears its
    process group down on the way out, so no agent outlives the command.

    Raises:
        _Stopped: a signal stopped the work.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    got: list[int] = []

    def stop(signum: int) -> None:
        got.append(signum)
        task.cancel()

    for signum in _SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await task
    except asyncio.CancelledError:
        if got:
            raise _Stopped(got[0]) from None
        raise
    finally:
        for signum in _SIGNALS:
            loop.remove_signal_handler(signum)


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _sandbox_available() -> None:
    """``--sandbox``: bwrap works here, else nothing is checked.

    Raises:
        UsageProblem: it does not; the message says what to install.
    """
    from ..._errors import SandboxUnavailable
    from ..._sandbox import check_available

    try:
        check_available(network=True)
    except SandboxUnavailable as exc:
        raise UsageProblem(f"--sandbox: {exc}") from None


class _Progress:
    """What the check has done so far, for the report of a check that a signal stopped."""

    def __init__(self, count: int) -> None:
        self.rows: list[dict[str, Any] | None] = [None] * count
        """The row of each agent that finished, in the order of the agents."""
        self.started: dict[int, float] = {}
        """When each agent that got its turn was started (``time.monotonic``), by its index."""


async def _check_all(
    specs: list[AgentSpec],
    timeouts: list[float],
    concurrency: int,
    progress: _Progress,
    *,
    sandboxed: bool = False,
) -> list[dict[str, Any]]:
    """Check the agents, at most ``concurrency`` at once; the rows in the order of ``specs``."""
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int, spec: AgentSpec, timeout: float) -> dict[str, Any]:
        async with slots:
            progress.started[index] = time.monotonic()
            row = progress.rows[index] = await _check(spec, timeout, sandboxed=sandboxed)
            return row

    checks = (one(index, spec, timeout) for index, (spec, timeout) in enumerate(zip(specs, timeouts, strict=True)))
    return list(await asyncio.gather(*checks))


async def _check(spec: AgentSpec, timeout: float, *, sandboxed: bool = False) -> dict[str, Any]:
    """Start one agent in an empty temporary directory (in the sandbox, with its table's defaults, when
    ``sandboxed``), send ``initialize``, stop it: its row."""
    row = _row(spec, checked=True)
    answer = InitializeAnswer()
    env = {**os.environ, **spec.env} if spec.env else None
    with tempfile.TemporaryDirectory(prefix="tinyacp-check-", ignore_cleanup_errors=True) as cwd:
        started = time.monotonic()
        client: AsyncClient | None = None
        try:
            sandbox = _sandbox_of(spec, cwd, row) if sandboxed else None
            options = Options(
                command=_from_here(spec.command),
                cwd=cwd,
                env=env,
                observer=answer,
                stderr="tail",
                features=COMMAND_FEATURES,
                sandbox=sandbox,
            )
            client = AsyncClient(options)
            # A first line that is not JSON-RPC: the program gets a moment to exit, so how it ended is told too.
            answer.watch.arm(client.kill)
            async with client:
                init = await client.initialize(timeout=timeout)
                row["seconds"] = round(time.monotonic() - started, 3)
        except TinyAcpError as exc:
            tail = getattr(exc, "stderr_tail", None) or (client.stderr_tail() if client is not None else None)
            row.update(_failure(exc, spec, answer, timeout, tail=tail, started=started))
            return row
        finally:
            answer.watch.disarm()
    row.update(_answered(spec, initialize_report(spec, init, answer.raw)))
    return row


def _sandbox_of(spec: AgentSpec, cwd: str, row: dict[str, Any]) -> Bubblewrap:
    """The agent's sandbox with its table's (and config entry's) defaults; the row says how bwrap starts it.

    Raises:
        SandboxUnavailable: a state directory cannot be created (the row's error).
    """
    from ..._errors import SandboxUnavailable
    from ..._sandbox import plan

    env = {**os.environ, **spec.env}
    try:
        sandbox = sandbox_for(spec.sandbox, env)
    except UsageProblem as exc:
        raise SandboxUnavailable(str(exc)) from None
    row["sandbox"] = list(plan(sandbox, spec.command, cwd=cwd, env=env, find_program=False).options)
    return sandbox


def _from_here(command: tuple[str, ...]) -> tuple[str, ...]:
    """The command with its relative paths made absolute: the agent runs in a temporary directory, but a path on
    the command line (``./agent``, ``python agent.py``) was meant from where the command ran."""
    program, *rest = command
    if os.sep in program and not os.path.isabs(program):
        program = os.path.abspath(program)
    return (program, *(os.path.abspath(word) if _names_a_file_here(word) else word for word in rest))


def _names_a_file_here(word: str) -> bool:
    """A word that is a relative path to something here: it has a slash, or is a file name with an extension."""
    if not word or word.startswith("-") or os.path.isabs(word):
        return False
    return (os.sep in word or "." in word.strip(".")) and os.path.exists(word)


def _row(spec: AgentSpec, *, checked: bool) -> dict[str, Any]:
    """A row's keys, every one present (null until known), the entry's part filled in."""
    program = spec.program()
    return {
        "name": spec.name,
        "source": spec.source,
        "launcher": spec.launcher,
        "command": list(spec.command),
        "found": program is not None,
        "program": program,
        "pinned_version": spec.version or None,
        "checked": checked,
        "skipped": None,
        "status": "not_checked",
        "answered": False,
        "cause": None,
        "details": [],
        "stderr": [],
        "exit_status": None,
        "seconds": None,
        "agent": None,
        "version": None,
        "version_matches": None,
        "protocol_version": None,
        "auth_methods": [],
        "load_session": None,
        "session_capabilities": [],
        "newer": None,
        "sandbox": None,
    }


def _answered(spec: AgentSpec, report: dict[str, Any]) -> dict[str, Any]:
    """A row's part for an agent that answered ``initialize``."""
    agent = report["agent"]
    version = agent["version"] if agent else None
    newer = {key: value for key, value in report["newer"].items() if key != "opted_in"}
    return {
        "status": "ok",
        "answered": True,
        "agent": agent,
        "version": version,
        "version_matches": _same_version(spec.version, version) if spec.version and version else None,
        "protocol_version": report["protocol_version"],
        "auth_methods": [
            {key: method[key] for key in ("id", "name", "type", "needs")} for method in report["auth_methods"]
        ],
        "load_session": report["load_session"],
        "session_capabilities": session_capability_names(report["session_capabilities"]),
        "newer": newer,
    }


def _same_version(pinned: str, reported: str) -> bool:
    """Whether the agent reports the pinned version; what follows it is a build's detail (auggie says
    ``0.36.0 (commit 7c61e5bb)``)."""
    words = reported.strip().split(maxsplit=1)
    return bool(words) and pinned.strip().removeprefix("v") == words[0].removeprefix("v")


def _failure(
    exc: TinyAcpError, spec: AgentSpec, answer: InitializeAnswer, timeout: float, *, tail: bytes | None, started: float
) -> dict[str, Any]:
    """A row's part for an agent that did not answer ``initialize``: what it is, in the words of ``explain``."""
    why = explain(
        exc, spec, None, startup_timeout=timeout, watch=answer.watch, stderr_tail=tail, deadline_flag="--timeout"
    )
    cause = why.message
    hint = why.hint
    status = _failure_status(exc, why.code, why.message, answer)
    if status == "timed_out":
        # explain() takes a program that never answered for one that does not speak ACP; it may only be slow.
        said = why.message.startswith(NOT_ACP)
        cause = f"timed out: {f'no answer to initialize in {timeout:g} s' if said else why.message}"
    return {
        "status": status,
        "answered": status == "needs_login",
        "seconds": None if isinstance(exc, SpawnError) else round(time.monotonic() - started, 3),
        "cause": cause,
        "details": hint,
        "stderr": [line.strip() for line in stderr_lines(tail)[1:]],
        "exit_status": exc.returncode if isinstance(exc, AgentExited) else None,
    }


def _failure_status(exc: TinyAcpError, code: Exit, message: str, answer: InitializeAnswer) -> str:  # noqa: PLR0911  one return per status
    """The row's status, from what was raised and what the agent wrote, not from the words of the message."""
    if code == Exit.NOT_INSTALLED:  # the program, or the package npx/uvx was to fetch
        return "not_installed"
    if isinstance(exc, AuthRequired):
        return "needs_login"
    if answer.watch.said_count or (isinstance(exc, ObserverError) and isinstance(exc.__cause__, NotAcp)):
        return "not_acp"  # it wrote lines that are not JSON-RPC
    if isinstance(exc, AgentTimeout):
        return "timed_out"
    if (isinstance(exc, RequestError) and exc.code == -32601) or NOT_ACP_WORDS in message:
        return "not_acp"  # it does not know initialize, or sent our request back
    if isinstance(exc, AgentExited):
        return "exited"
    return "error"


def _stopped(spec: AgentSpec, signum: int, started: float | None) -> dict[str, Any]:
    """The row of an agent the check stopped (Ctrl-C, SIGTERM, SIGHUP): while it started, or before its turn."""
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    if started is None:
        row = _row(spec, checked=False)
        row["skipped"] = "stopped"
        row["cause"] = f"not checked: you stopped the check ({name}) before its turn"
        return row
    row = _row(spec, checked=True)
    seconds = row["seconds"] = round(time.monotonic() - started, 3)
    row["status"] = "stopped"
    row["cause"] = f"you stopped the check ({name}) after {seconds:.1f} s, before it answered initialize"
    return row


def _not_checked(spec: AgentSpec, why: str) -> dict[str, Any]:
    row = _row(spec, checked=False)
    row["skipped"] = why
    if why == "download":
        row["cause"] = "not checked: its first start downloads a package (name it, or use --all)"
    else:
        row["cause"] = f"not checked: {spec.command[0]!r} is not on PATH"
        row["details"] = [f"to install {spec.name}: {spec.install}"] if spec.install else []
    return row


# ----------------------------------------------------------------------------------------------------------------
# The text table.

_COLUMNS = ("agent", "status", "version", "protocol", "time")
_COLOURS = {"ok": "32", "needs_login": "33", "not_installed": "33", "stopped": "33"}


def _table(rows: list[dict[str, Any]], *, color: bool) -> str:
    """One line per checked agent that fits the terminal, what it offers or why it failed under it; then a
    footer naming the agents left out."""
    checked = [row for row in rows if row["checked"]]
    width = max(50, shutil.get_terminal_size((100, 24)).columns)
    cells = [_cells(row) for row in checked]
    sizes = _sizes(cells, width)
    lines = [_join(list(_COLUMNS), sizes, None)]
    for row, line in zip(checked, cells, strict=True):
        lines.append(_join(line, sizes, _COLOURS.get(row["status"], "31") if color else None))
        lines += _wrapped(_detail_lines(row), width)
    if not checked:
        lines.append("no agent was checked")
    if any(row["sandbox"] for row in checked):
        lines += _wrapped(["", _IN_SANDBOX], width, "")
    return "\n".join(lines + _footer(rows, width))


_IN_SANDBOX = (
    "checked in the sandbox (bubblewrap): each agent could write only in its temporary directory and the state "
    "directories of its entry (--format json: each row's sandbox holds bwrap's options)"
)


def _sizes(cells: list[list[str]], width: int) -> list[int]:
    """The columns' widths: status, protocol and time whole; the name and the version share what is left."""
    sizes = [max([len(name)] + [len(line[i]) for line in cells]) for i, name in enumerate(_COLUMNS)]
    left = width - sizes[1] - sizes[3] - sizes[4] - 2 * (len(sizes) - 1)
    version = min(sizes[2], max(7, left // 2))
    sizes[0] = max(8, min(sizes[0], 24, left - version))
    sizes[2] = max(7, min(sizes[2], left - sizes[0]))
    return sizes


def _cells(row: dict[str, Any]) -> list[str]:
    seconds = row["seconds"]
    protocol = row["protocol_version"]
    return [
        one_line(row["name"], 24),
        _STATUS_WORDS[row["status"]],
        _version_cell(row),
        "-" if protocol is None else one_line(protocol, 8),
        "-" if seconds is None else f"{seconds:.2f} s",
    ]


def _version_cell(row: dict[str, Any]) -> str:
    reported = one_line(row["version"], 40) if row["version"] else ""
    pinned = one_line(row["pinned_version"], 40) if row["pinned_version"] else ""
    if reported and pinned:
        return f"{reported} (pinned)" if row["version_matches"] else f"{reported}, pinned {pinned}: differs"
    if pinned:
        return f"pinned {pinned}"
    return reported or "-"


def _join(cells: list[str], sizes: list[int], colour: str | None) -> str:
    """The cells of a row, each cut to its column (the status in ``colour``, an SGR code, when given)."""
    fitted = [
        cell.ljust(size) if len(cell) <= size else cell[: size - 1] + "…"
        for cell, size in zip(cells, sizes, strict=True)
    ]
    if colour is not None:
        fitted[1] = f"\x1b[{colour}m{cells[1]}\x1b[0m" + fitted[1][len(cells[1]) :]
    return "  ".join(fitted).rstrip()


def _detail_lines(row: dict[str, Any]) -> list[str]:
    """What an answered agent offers, or why one failed, sanitized."""
    if not row["answered"] or row["status"] != "ok":
        lines = [row["cause"], *row["details"]]
        if row["stderr"]:
            lines += ["agent stderr (last lines):", *(f"  {line}" for line in row["stderr"][-_STDERR_SHOWN:])]
        return [sanitize(line) for line in lines]
    agent = row["agent"] or {}
    lines = [
        f"agent: {one_line(agent.get('name') or '?', 60)}"
        + (f" ({one_line(agent['title'], 80)})" if agent.get("title") else "")
    ]
    methods = "; ".join(auth_method_line(method) for method in row["auth_methods"])
    lines.append(f"auth: {methods or 'none'}")
    sessions = ", ".join(["load"] * bool(row["load_session"]) + [one_line(n, 40) for n in row["session_capabilities"]])
    lines.append(f"sessions: {sessions or 'new only'}")
    lines.append(f"newer: {', '.join(newer_offered(row['newer'])) or 'none'}")
    return lines


def _wrapped(lines: list[str], width: int, indent: str = "  ") -> list[str]:
    out = []
    for line in lines:
        out += textwrap.wrap(
            line, width, initial_indent=indent, subsequent_indent=indent + "    ", break_on_hyphens=False
        ) or [""]
    return out


def _footer(rows: list[dict[str, Any]], width: int) -> list[str]:
    """The agents left out, by why: a download on the first start, a program not on ``PATH``, or a check stopped
    before their turn."""
    left = {
        why: ", ".join(one_line(row["name"], 40) for row in rows if row["skipped"] == why)
        for why in ("download", "not_on_path", "stopped")
    }
    lines = []
    if left["download"]:
        lines.append(f"not checked, as their first start downloads a package (name them, or --all): {left['download']}")
    if left["not_on_path"]:
        lines.append(f"not checked, not on PATH (`tinyacp agents` says how to install them): {left['not_on_path']}")
    if left["stopped"]:
        lines.append(f"not checked, as you stopped the check before their turn: {left['stopped']}")
    return ["", *_wrapped(lines, width, "")] if lines else []
