"""What ``npx``, ``uvx`` and their kin say on stderr when they cannot start the agent, in words a person can act on.

An agent started through a package runner is fetched on first use: without the network, or without a Python uv
can use, the runner fails before the agent exists, and says why on stderr. These functions read that tail (pure:
no I/O) and name the cause, and say how to install the agent so that it starts offline.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ._agent_table import launcher_of
from ._agents import AgentSpec
from ._display import one_line

__all__ = ["Launch", "LaunchFailure", "first_start_hint", "launch_failure", "launch_of", "offline_hint"]

NPM_FAMILY = ("npx", "bunx", "pnpx", "pnpm dlx")
"""The runners that fetch from the npm registry (their failures carry Node's error codes)."""

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


def launch_of(agent: AgentSpec) -> Launch | None:
    """The package runner the agent starts through, or None: its command's first word when that is a runner
    (``bunx`` and ``pnpm dlx`` are named as they are), else its entry's ``launcher``."""
    words = tuple(agent.command)
    runner = os.path.basename(words[0]) if words else ""
    if runner == "pnpm" and words[1:2] == ("dlx",):
        runner, words = "pnpm dlx", ("pnpx", *words[2:])  # pnpx is pnpm's own name for pnpm dlx
    launcher, package = launcher_of(words)
    if launcher == "path":
        if agent.launcher not in ("npx", "uvx"):
            return None
        runner = agent.launcher
    return Launch(runner, agent.package or package)


def launch_failure(launch: Launch, tail: bytes | None, agent: AgentSpec) -> LaunchFailure | None:
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


def _npm_failure(launch: Launch, lines: list[str], agent: AgentSpec) -> LaunchFailure | None:
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


def _uv_failure(launch: Launch, lines: list[str], agent: AgentSpec) -> LaunchFailure | None:
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


def _not_in_registry(cannot: str, line: str, agent: AgentSpec) -> LaunchFailure:
    return LaunchFailure(
        f"{cannot}: the registry does not have it ({one_line(_strip_prefix(line), 160)})",
        [f"check the package's name and version in the command: {agent.display_command()}"],
    )


def offline_hint(launch: Launch, agent: AgentSpec) -> list[str]:
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


def first_start_hint(launch: Launch, agent: AgentSpec, flag: str = "--startup-timeout") -> list[str]:
    """Why a first start through a runner may be slow, and what to do about it (``flag`` sets the deadline)."""
    return [
        f"the first start downloads it (without the network, {launch.runner} may retry for a minute or more): "
        f"raise {flag}",
        *offline_hint(launch, agent),
    ]


def _first(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line for line in lines if pattern.search(line)), None)


def _last(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line for line in reversed(lines) if pattern.search(line)), None)


def _strip_prefix(line: str) -> str:
    """A runner's line without its own prefix (``npm error``, ``error:``, ``cause:``)."""
    return re.sub(r"^\W*(npm (error|ERR!)( network| code)?|error:|cause:|hint:)?\s*", "", line).strip()
