"""Why an agent never answered ``initialize``, in words a person can act on: pure, no I/O.

Two kinds of start fail before any ACP is spoken, and both say why somewhere the client already keeps:

- An agent started through a package runner (``npx``, ``uvx`` and their kin) is fetched on first use: without the
  network, or without a Python uv can use, the runner fails before the agent exists, and says why on stderr.
  :func:`launch_failure` reads that tail and names the cause, and says how to install the agent so that it starts
  offline.
- A program that is not (or no longer) an ACP agent prints a line for a person on stdout (kimi-cli 1.52's "no
  longer maintained") and exits, or waits: :class:`Said` holds those lines, :func:`said_message` says them with how
  the program ended.

:func:`start_failure` puts both together; the command's errors (``tinyacp prompt``, ``probe``, ``agents --check``)
and a batch turn's record say the same words.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, Protocol

from ._errors import AgentExited, AgentTimeout, describe_returncode
from ._sanitize import one_line

__all__ = [
    "NOT_ACP_WORDS",
    "NPM_FAMILY",
    "Launch",
    "LaunchFailure",
    "Said",
    "StartFailure",
    "StartedAgent",
    "first_start_hint",
    "launch_failure",
    "launch_of",
    "launcher_of",
    "offline_hint",
    "said_message",
    "start_failure",
]

NOT_ACP_WORDS = "does not speak ACP on stdout"

NPM_FAMILY = ("npx", "bunx", "pnpx", "pnpm dlx")
"""The runners that fetch from the npm registry (their failures carry Node's error codes)."""

_LINE = 300
"""How much of a line the program printed is quoted."""

# npm: "npm error network request to https://registry.npmjs.org/is-odd failed, reason: getaddrinfo ENOTFOUND …"
_NPM_NETWORK = re.compile(r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET)\b|network request to \S+ failed")
_NPM_REASON = re.compile(r"reason: (.+)$")
# npm with npm_config_offline=true and an empty cache: "npm error code ENOTCACHED"
_NPM_NOT_CACHED = re.compile(r"\bENOTCACHED\b")
_NPM_NOT_FOUND = re.compile(r"\bE404\b|404 Not Found")
# uv: "cause: dns error", "cause: failed to lookup address information: …"; with UV_OFFLINE=1 and an empty cache:
# "hint: Packages were unavailable because the network was disabled."
_UV_NETWORK = re.compile(r"dns error|failed to lookup address|error sending request for url|client error \(Connect\)")
_UV_OFFLINE = re.compile(r"network was disabled")
_UV_NOT_FOUND = re.compile(r"was not found in the package registry")
_CAUSE = re.compile(r"^cause:")
_PYTHON_DOWNLOAD = re.compile(r"Failed to download \S*cpython-")
"""uv fetching a Python: "cause: Failed to download `https://…/cpython-3.12.4%2B20240726-x86_64-…tar.gz`"."""
# uv: "error: No interpreter found for Python 3.99 in managed installations or search path"; "Because the current
# Python version (3.11.1) does not satisfy Python>=3.13 and …"; "error: No download found for request: cpython-3.14…"
_UV_NO_PYTHON = re.compile(
    r"No interpreter found for Python|does not satisfy Python\s*[<>=~!]|No download found for request: cpython"
)
_PYTHON_CURRENT = re.compile(r"current Python version \(([^)]+)\) does not satisfy Python\s*([<>=~!]+\s*[\d.]+)")
_PYTHON_WANTED = re.compile(r"for Python (\S+)|does not satisfy Python\s*([<>=~!]*=?\s*[\d.]+)|cpython-([\d.]+)")

_FETCHERS = {"npx": "npx", "uvx": "uvx", "bunx": "npx", "pnpx": "npx"}
"""Programs that fetch a package on first use, by the launcher they stand for."""
_VALUED_UVX = frozenset({"--python", "-p", "--with", "--index", "--default-index", "--index-url", "-c"})
"""Options of ``uvx`` that take the next word as their value."""
_VALUED_NPX = frozenset({"--registry", "--cache", "-c", "--call"})
"""Options of ``npx`` that take the next word as their value."""


class StartedAgent(Protocol):
    """What is read of an agent's entry (the command's ``AgentSpec``, a batch's resolved agent)."""

    @property
    def name(self) -> str: ...

    @property
    def command(self) -> Sequence[str]: ...

    @property
    def launcher(self) -> str:
        """``npx``, ``uvx``, ``path``, ``python``, or "" when the entry does not say."""

    @property
    def package(self) -> str:
        """The pinned package the runner fetches, or ""."""

    @property
    def offline(self) -> str:
        """How to install the agent so that it starts offline, in a person's words, or ""."""


def launcher_of(command: Sequence[str]) -> tuple[str, str]:
    """What starts a command line of the user's own, and the package it fetches: ``("npx", "pkg@1.0.0")`` for
    ``npx -y pkg@1.0.0 --acp`` (also ``npx -p pkg@1.0.0 prog``, ``pnpm dlx``, ``bunx``), ``("uvx", "pkg@2")``
    for ``uvx --from pkg@2 prog`` (or ``--from=pkg@2``); ``("path", "")`` otherwise."""
    words = list(command)
    if len(words) > 1 and PurePosixPath(words[0]).name == "pnpm" and words[1] == "dlx":
        words = ["npx", *words[2:]]
    launcher = _FETCHERS.get(PurePosixPath(words[0]).name) if words else None
    if launcher is None:
        return "path", ""
    named = ("--from",) if launcher == "uvx" else ("--package", "-p")  # uvx's -p is its --python
    valued = _VALUED_UVX if launcher == "uvx" else _VALUED_NPX
    rest = iter(words[1:])
    for word in rest:
        flag, equals, value = word.partition("=")
        if flag in named:
            return launcher, value if equals else next(rest, "")
        if flag in valued and not equals:
            next(rest, None)
        elif not word.startswith("-"):
            return launcher, word
    return launcher, ""


@dataclass(frozen=True)
class Launch:
    """How a command starts its agent through a package runner."""

    runner: str
    """``npx``, ``uvx``, ``bunx``, ``pnpx`` or ``pnpm dlx``."""
    package: str
    """The package it fetches (``@scope/name@1.2.3``), or "" when the command line does not say."""

    @property
    def npm(self) -> bool:
        """Whether the runner fetches from the npm registry."""
        return self.runner in NPM_FAMILY

    @property
    def what(self) -> str:
        """The package, or words for it."""
        return self.package or "the agent's package"


@dataclass(frozen=True)
class LaunchFailure:
    """Why the runner could not start the agent: the message, and the hint lines that say what to do."""

    message: str
    hint: list[str]


def launch_of(agent: StartedAgent) -> Launch | None:
    """The package runner the agent starts through, or None: its command's first word when that is a runner
    (``bunx`` and ``pnpm dlx`` are named as they are), else its entry's ``launcher``."""
    words = tuple(agent.command)
    runner = os.path.basename(words[0]) if words else ""
    if runner == "pnpm" and words[1:2] == ("dlx",):
        runner = "pnpm dlx"
    launcher, package = launcher_of(words)
    if launcher == "path":
        if agent.launcher not in ("npx", "uvx"):
            return None
        runner = agent.launcher
    return Launch(runner, agent.package or package)


def launch_failure(launch: Launch, tail: bytes | None, agent: StartedAgent) -> LaunchFailure | None:
    """What the runner's stderr says went wrong, when it is a failure it is known to print; else None.

    Args:
        launch: how the agent is started.
        tail: the last bytes the runner (or the agent) wrote on stderr.
        agent: the agent's entry (its ``offline`` words, its command).
    """
    if not tail:
        return None
    lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
    return _npm_failure(launch, lines, agent) if launch.npm else _uv_failure(launch, lines, agent)


def _npm_failure(launch: Launch, lines: list[str], agent: StartedAgent) -> LaunchFailure | None:
    cannot = f"{launch.runner} could not fetch {launch.what}"
    found = _first(lines, _NPM_NETWORK)
    if found is not None:
        reason = next((match for line in lines if (match := _NPM_REASON.search(line))), None)
        cause = reason.group(1) if reason else _strip_prefix(found)
        return LaunchFailure(f"{cannot}: no network ({one_line(cause, 160)})", offline_hint(launch, agent))
    if _first(lines, _NPM_NOT_CACHED) is not None:
        message = f"{cannot}: npm is set to work offline (npm_config_offline, --offline) and its cache does not have it"
        return LaunchFailure(message, offline_hint(launch, agent))
    found = _first(lines, _NPM_NOT_FOUND)
    if found is not None:
        return _not_in_registry(cannot, found, agent)
    return None


def _uv_failure(launch: Launch, lines: list[str], agent: StartedAgent) -> LaunchFailure | None:
    cannot = f"uvx could not fetch {launch.what}"
    if _first(lines, _UV_OFFLINE) is not None:
        message = f"{cannot}: the network is disabled (UV_OFFLINE) and uv's cache does not have it"
        return LaunchFailure(message, offline_hint(launch, agent))
    if _first(lines, _UV_NETWORK) is not None:
        cause = _strip_prefix(_last(lines, _CAUSE) or _first(lines, _UV_NETWORK) or "")
        if _first(lines, _PYTHON_DOWNLOAD) is not None:  # uv went to fetch a Python the package needs
            return LaunchFailure(
                f"uvx could not download a Python for {launch.what}: no network ({one_line(cause, 160)})",
                ["install a Python it can use (`uv python install VERSION` with the network, or the system's)"],
            )
        return LaunchFailure(f"{cannot}: no network ({one_line(cause, 160)})", offline_hint(launch, agent))
    found = _first(lines, _UV_NO_PYTHON)
    if found is not None:
        wanted = _PYTHON_WANTED.search(found)
        version = next((group for group in wanted.groups() if group), "") if wanted else ""
        install = " ".join(("uv python install", version.lstrip("<>=~! ").rstrip("."))).strip()
        current = _PYTHON_CURRENT.search(found)
        cause = f"it needs Python{current[2]}, uv found {current[1]}" if current else _strip_prefix(found)
        return LaunchFailure(
            f"uvx found no Python that {launch.what} can use ({one_line(cause, 160)})",
            [f"install one with `{install}` (it needs the network once), or give uvx --python VERSION"],
        )
    found = _first(lines, _UV_NOT_FOUND)
    if found is not None:
        return _not_in_registry(cannot, found, agent)
    return None


def _not_in_registry(cannot: str, line: str, agent: StartedAgent) -> LaunchFailure:
    return LaunchFailure(
        f"{cannot}: the registry does not have it ({one_line(_strip_prefix(line), 160)})",
        [f"check the package's name and version in the command: {one_line(shlex.join(agent.command), 300)}"],
    )


def offline_hint(launch: Launch, agent: StartedAgent) -> list[str]:
    """How to install the agent so that it starts without the network: its entry's words, else the runner's way."""
    if agent.offline:
        return [f"to start it offline: {agent.offline}"]
    then = "then make its program the agent's command in the config file (`tinyacp agents` names the file)"
    if launch.npm:
        return [f"to start it offline: npm install -g {launch.what}, {then}"]
    return [
        f"to start it offline: uv tool install {launch.what}, {then}",
        "(or start it once online, then set UV_OFFLINE=1: uvx reads it from uv's cache)",
    ]


def first_start_hint(launch: Launch, agent: StartedAgent, deadline: str = "--startup-timeout") -> list[str]:
    """Why a first start through a runner may be slow, and what to do about it (``deadline`` names the deadline
    to raise: an option of the command, or words)."""
    return [
        f"the first start downloads it (without the network, {launch.runner} may retry for a minute or more): "
        f"raise {deadline}",
        *offline_hint(launch, agent),
    ]


def _first(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line for line in lines if pattern.search(line)), None)


def _last(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line for line in reversed(lines) if pattern.search(line)), None)


def _strip_prefix(line: str) -> str:
    """A runner's line without its own prefix (``npm error``, ``error:``, ``cause:``)."""
    return re.sub(r"^\W*(npm (error|ERR!)( network| code)?|error:|cause:|hint:)?\s*", "", line).strip()


@dataclass(frozen=True)
class Said:
    """The lines that are not JSON-RPC a program wrote on stdout before it answered ``initialize``."""

    lines: tuple[bytes, ...]
    """The first few of them."""
    count: int
    """How many there were."""
    stopped: bool = False
    """Whether the program was stopped, still running ``grace`` seconds after the first."""
    grace: float = 0.0

    def words(self) -> str:
        """``its only line on stdout: "…"``, or its first line and how many there were."""
        which = "its only line" if self.count == 1 else f"the first of its {self.count} lines"
        return f"{which} on stdout: {_quoted(self.lines[0])}"

    def more(self) -> list[str]:
        """The lines after the first, as hint lines."""
        shown = [f"then: {_quoted(line)}" for line in self.lines[1:]]
        left = self.count - len(self.lines)
        return [*shown, f"(and {left} more line{'s' if left != 1 else ''})"] if left > 0 else shown


def _quoted(line: bytes) -> str:
    return f'"{one_line(line.decode("utf-8", "replace"), _LINE)}"'


def said_message(exc: BaseException, name: str, said: Said, deadline: float | None) -> str:
    """The message for a program that wrote lines that are not JSON-RPC: how it ended, and its first line.

    Args:
        exc: what ended the wait for ``initialize``.
        name: the agent's name.
        said: its lines.
        deadline: the seconds ``initialize`` was given, when ``exc`` is that deadline's :class:`AgentTimeout`.
    """
    if said.stopped:
        return (
            f"{name} {NOT_ACP_WORDS}: still no answer to initialize {said.grace:g} s after a "
            f"line that is not JSON-RPC (stopped); {said.words()}"
        )
    if isinstance(exc, AgentExited):
        if exc.returncode is None:
            return f"{name} closed its output before answering initialize; {said.words()}"
        return f"{name} exited before answering initialize ({describe_returncode(exc.returncode)}); {said.words()}"
    if isinstance(exc, AgentTimeout) and deadline is not None:
        return f"{name} {NOT_ACP_WORDS}: no answer to initialize in {deadline:g} s; {said.words()}"
    return f"{name} {NOT_ACP_WORDS}: its first line is not JSON-RPC; {said.words()}"


@dataclass(frozen=True)
class StartFailure:
    """A start that failed before ``initialize`` was answered, named."""

    kind: Literal["runner", "said", "slow"]
    """``runner``: npx or uvx never started the agent (no network, no Python, no such package); ``said``: the
    program wrote lines that are not JSON-RPC; ``slow``: the deadline passed while the runner may still have been
    downloading the agent."""
    message: str
    hint: list[str]


def start_failure(
    exc: BaseException,
    agent: StartedAgent,
    *,
    said: Said | None,
    first_line: bytes | None,
    tail: bytes | None,
    deadline: tuple[float | None, str] = (None, "--startup-timeout"),
) -> StartFailure | None:
    """What went wrong when the agent never answered ``initialize``, when it is one of the failures named here.

    Args:
        exc: what ended the wait for ``initialize``.
        agent: the agent's entry.
        said: the lines that are not JSON-RPC it wrote on stdout, if any.
        first_line: the first line it wrote on stdout, if any.
        tail: the last bytes of its stderr (where ``npx`` and ``uvx`` say why).
        deadline: the seconds ``initialize`` was given, when ``exc`` is that deadline's :class:`AgentTimeout`, and
            what sets it, as the hints name it (``--startup-timeout``, ``the turn's timeout``).
    """
    seconds, deadline_words = deadline
    launch = launch_of(agent)
    timed_out = isinstance(exc, AgentTimeout) and seconds is not None
    if launch is not None and (isinstance(exc, AgentExited) or timed_out):
        failure = launch_failure(launch, tail, agent)
        if failure is not None:  # npx or uvx never started the agent: it is not installed, and says why
            return StartFailure("runner", failure.message, failure.hint)
    if said is not None:
        return StartFailure("said", said_message(exc, agent.name, said, seconds), said.more())
    if timed_out and launch is not None and not first_line:
        message = (
            f"no answer to initialize in {seconds:g} s: {launch.runner} may still have been downloading {launch.what}"
        )
        return StartFailure("slow", message, first_start_hint(launch, agent, deadline_words))
    return None
