"""The agents tinyacp knows by name, read from ``agents.json`` beside this module: the ACP registry's shape.

The ACP project keeps a registry of agents (https://github.com/agentclientprotocol/registry): one entry per
agent with an ``id``, a ``version`` and a ``distribution`` that says how it starts (``npx`` or ``uvx`` with a
package, or a ``binary`` archive per platform). ``agents.json`` holds tinyacp's table in that shape, so that each
entry validates against the registry's ``agent.schema.json``; what tinyacp adds (install and login hints, the
environment an agent needs, what it does without asking) is in each entry's ``tinyacp`` object, a key the
registry's schema leaves open. A few agents no registry can describe (no package, no archive to pin) are listed
under ``programs``: programs on ``PATH``.

How an entry starts (:func:`start`):

- ``npx``: ``npx -y PACKAGE@VERSION ARGS``; the package is fetched on first use, then taken from npm's cache.
- ``uvx``: ``uvx PACKAGE@VERSION ARGS``, or ``uvx --from PACKAGE@VERSION EXECUTABLE ARGS`` when the program the
  package installs is not named as the package is (``executable``).
- ``binary``: tinyacp downloads nothing: the archive's program (``cmd``, without its ``./``) must be on ``PATH``;
  the archive is where to get it.
- a ``command`` of the entry's own wins over its distribution: a program on ``PATH``.

The config file's ``[agents.NAME]`` tables take the same keys (``version``, ``distribution``, ``notes``, …): see
:mod:`tinyacp.cli.agents._resolve`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import msgspec

from ..._launch_failures import launcher_of  # read where a batch turn reads it too

__all__ = [
    "BinaryTarget",
    "Distribution",
    "PackageDistribution",
    "SandboxFields",
    "Start",
    "TableEntry",
    "TableError",
    "TinyacpFields",
    "launcher_of",
    "platform_target",
    "read_table",
    "start",
]

TABLE_PATH = Path(__file__).with_name("agents.json")


class TableError(ValueError):
    """An entry's distribution cannot be started on this machine; the message says why."""


class PackageDistribution(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The registry's ``npx`` or ``uvx`` distribution: a package (with its version) and its arguments."""

    package: str
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)


class BinaryTarget(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One platform's archive in the registry's ``binary`` distribution, and the program in it."""

    archive: str
    cmd: str
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)


class Distribution(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """How an agent is distributed: at least one of ``npx``, ``uvx`` or ``binary`` (by platform)."""

    npx: PackageDistribution | None = None
    uvx: PackageDistribution | None = None
    binary: dict[str, BinaryTarget] | None = None


class SandboxFields(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """How the agent runs in the sandbox (``--sandbox``): the table's defaults, a config entry's ``sandbox`` keys.

    A key left out (None) keeps the default: the table's, else no sandbox, nothing more writable, everything
    readable, the network shared. Directories are written ``$VAR/sub|~/fallback`` (see
    :mod:`tinyacp.cli.shared._sandbox`).
    """

    enabled: bool | None = None
    """Run this agent in the sandbox without ``--sandbox`` (``--no-sandbox`` still wins)."""
    writable: list[str] | None = None
    """The directories the agent keeps its state in (its login, its sessions, npm's or uv's cache)."""
    readable: list[str] | None = None
    """Only these are visible (with the system's and the writable ones); None: everything, read-only."""
    network: Literal["on", "off"] | None = None

    def over(self, base: SandboxFields) -> SandboxFields:
        """These keys, falling back on ``base`` for those left out."""
        return SandboxFields(
            enabled=self.enabled if self.enabled is not None else base.enabled,
            writable=self.writable if self.writable is not None else base.writable,
            readable=self.readable if self.readable is not None else base.readable,
            network=self.network if self.network is not None else base.network,
        )


class TinyacpFields(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What tinyacp adds to a registry entry (the entry's ``tinyacp`` object)."""

    registry: str = ""
    """The agent's id in the ACP registry, when it has one."""
    checked: str = ""
    """Where the version was checked: ``npm``, ``pypi``, or ``registry`` (taken from the ACP registry)."""
    aliases: list[str] = msgspec.field(default_factory=list)
    command: list[str] | None = None
    """A program on ``PATH`` and its arguments, when the entry starts that way."""
    executable: str = ""
    """The program a ``uvx`` package installs, when it is not named as the package is."""
    node: int = 0
    """The oldest Node.js major version an ``npx`` package runs on (its ``engines``); 0 when it says none."""
    needs: str = ""
    install: str = ""
    offline: str = ""
    login: str = ""
    key_method: str = ""
    key_env: list[str] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    sandbox: SandboxFields = msgspec.field(default_factory=SandboxFields)
    """What the agent needs in the sandbox: its state directories (see :class:`SandboxFields`)."""


class TableEntry(msgspec.Struct, kw_only=True):
    """One agent of the table: the registry's fields (the ones tinyacp reads) and tinyacp's own."""

    id: str
    name: str
    description: str
    version: str = ""
    repository: str = ""
    license: str = ""
    distribution: Distribution | None = None
    tinyacp: TinyacpFields = msgspec.field(default_factory=TinyacpFields)


class _Registry(msgspec.Struct):
    version: str
    agents: list[TableEntry]
    extensions: list[TableEntry]


class _Table(msgspec.Struct, forbid_unknown_fields=True):
    registry: _Registry
    programs: list[TableEntry]


@dataclass(frozen=True)
class Start:
    """How to start one entry: the argv, the variables it adds, what starts it and the package it pins."""

    command: tuple[str, ...]
    env: Mapping[str, str]
    launcher: str
    """``npx``, ``uvx`` or ``path``."""
    package: str = ""
    install: str = ""
    """For a ``binary`` distribution: where to get the program (its archive for this platform)."""


def read_table(path: Path = TABLE_PATH) -> list[TableEntry]:
    """The entries of the table shipped with tinyacp, registry entries first.

    Raises:
        OSError: the file cannot be read (a broken installation).
        msgspec.ValidationError: it does not have the table's shape (a broken installation).
    """
    table = msgspec.json.decode(path.read_bytes(), type=_Table)
    return [*table.registry.agents, *table.programs]


def platform_target() -> str:
    """This machine as the registry names platforms: ``linux-x86_64``, ``darwin-aarch64``, …"""
    uname = os.uname()
    system = {"Linux": "linux", "Darwin": "darwin"}.get(uname.sysname, uname.sysname.lower())
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(uname.machine.lower(), uname.machine.lower())
    return f"{system}-{machine}"


_SEMVER = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")


def exact_pin(package: str) -> bool:
    """Whether an npm package spec names one exact version (``@scope/name@1.2.3``), not a range or a tag."""
    name, at, version = package.rpartition("@")
    return bool(at and name and name != "@" and _SEMVER.fullmatch(version))


def start(distribution: Distribution | None, *, command: list[str] | None = None, executable: str = "") -> Start:
    """How to start an agent distributed as ``distribution`` (``command``, when given, wins: a program on PATH).

    Raises:
        TableError: there is neither a command nor a distribution; or the only distribution is ``binary`` and
            it has no archive for this platform.
    """
    if command:
        return Start(tuple(command), {}, "path")
    if distribution is None or (distribution.npx, distribution.uvx, distribution.binary) == (None, None, None):
        raise TableError("needs a command, or a distribution (npx, uvx or binary)")
    if distribution.npx is not None:
        npx = distribution.npx
        # An exact pin never changes: npm's cache may answer without asking the registry, so a package that ran
        # once starts offline at once (asked, npx retries the registry for 70-80 s before it runs; docs/agents/).
        offline = ("--prefer-offline",) if exact_pin(npx.package) else ()
        return Start(("npx", *offline, "-y", npx.package, *npx.args), npx.env, "npx", npx.package)
    if distribution.uvx is not None:
        uvx = distribution.uvx
        words = ("--from", uvx.package, executable) if executable else (uvx.package,)
        return Start(("uvx", *words, *uvx.args), uvx.env, "uvx", uvx.package)
    targets = distribution.binary or {}
    here = platform_target()
    target = targets.get(here)
    if target is None:
        raise TableError(f"its binary distribution has no archive for {here} (it has: {', '.join(targets)})")
    program = PurePosixPath(target.cmd).name
    install = f"download {target.archive}, unpack it and put its {program} on PATH"
    return Start((program, *target.args), target.env, "path", install=install)
