"""``--sandbox``: the agent in bubblewrap, as the flags, its config entry and the agent table say.

An agent's entry names the directories it keeps its state in (``sandbox.writable`` in ``agents.json`` and in
``config.toml``): its login and sessions, npm's or uv's cache for an ``npx``/``uvx`` start. Each is written
``$VAR/sub|~/fallback``: the first alternative whose variables are all set, ``~`` for the agent's home. They are
made writable (and created, private, when missing) besides the working directory and ``--writable``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..._errors import SandboxUnavailable
from ._exit import UsageProblem

if TYPE_CHECKING:
    from ..._sandbox import Bubblewrap, Plan
    from ..agents._table import SandboxFields

__all__ = [
    "NETWORK_WORDS",
    "RunSandbox",
    "asked",
    "batch_sandbox",
    "describe",
    "describe_commands",
    "expand_dir",
    "for_commands",
    "run_sandbox",
    "sandbox_for",
    "sandbox_of_args",
    "state_dirs",
]

NETWORK_WORDS: dict[str, bool] = {"on": True, "off": False}
"""``--sandbox-network`` and ``sandbox.network``: shared or cut; not given, an agent's network is shared."""

_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def expand_dir(text: str, env: Mapping[str, str]) -> str | None:
    """One ``sandbox.writable`` word: the first of its ``|`` alternatives whose ``$VAR``\\ s are all set in ``env``,
    with ``~`` as ``env``'s ``HOME``; None when none is (pure).
    """
    for word in text.split("|"):
        alternative = word.strip()
        names = [a or b for a, b in _VAR.findall(alternative)]
        if not alternative or any(not env.get(name) for name in names):
            continue
        path = _VAR.sub(lambda match: env[match.group(1) or match.group(2)], alternative)
        if path == "~" or path.startswith("~/"):
            home = env.get("HOME") or os.path.expanduser("~")
            path = home + path[1:]
        return os.path.abspath(path)
    return None


def state_dirs(words: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The agent's state directories, expanded (pure); a word none of whose alternatives applies is left out."""
    return [path for path in (expand_dir(word, env) for word in words) if path is not None]


def asked(args: argparse.Namespace, fields: SandboxFields) -> bool:
    """Whether the run is sandboxed: ``--sandbox`` (or ``--writable``, ``--sandbox-network``), else the agent's
    config entry (``sandbox.enabled``); ``--no-sandbox`` wins over the entry."""
    if getattr(args, "no_sandbox", False):
        return False
    flags = getattr(args, "sandbox", False) or getattr(args, "writable", None) or getattr(args, "sandbox_network", None)
    return bool(flags) or bool(fields.enabled)


def sandbox_for(
    fields: SandboxFields,
    env: Mapping[str, str],
    *,
    writable: Sequence[str] = (),
    network: str | None = None,
) -> Bubblewrap:
    """The sandbox of a run: the entry's state directories (created when missing) and ``writable``, the network
    as ``network`` (``on``/``off``) or the entry says.

    Raises:
        UsageProblem: a state directory cannot be created, or a ``--writable`` directory does not exist.
    """
    from ..._sandbox import Bubblewrap

    dirs = state_dirs(fields.writable or (), env)
    for path in dirs:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise UsageProblem(f"the sandbox's state directory {path}: {exc.strerror or exc}") from None
    extra = [os.path.abspath(path) for path in writable]
    for path in extra:
        if not os.path.isdir(path):
            raise UsageProblem(f"--writable {path}: not a directory")
    word = network if network is not None else fields.network
    readable = state_dirs(fields.readable, env) if fields.readable is not None else None
    return Bubblewrap(writable=[*dirs, *extra], readable=readable, network=NETWORK_WORDS.get(word or ""))


def sandbox_of_args(args: argparse.Namespace, fields: SandboxFields, env: Mapping[str, str]) -> Bubblewrap | None:
    """The flags' sandbox over the agent's entry; None when the run is not sandboxed.

    Raises:
        UsageProblem: see :func:`sandbox_for`.
    """
    if not asked(args, fields):
        return None
    return sandbox_for(fields, env, writable=args.writable or (), network=args.sandbox_network)


def for_commands(sandbox: Bubblewrap | None, args: argparse.Namespace) -> Bubblewrap | None:
    """The sandbox of the run's served commands (``--serve terminal``): the agent's, but writable only in the
    session's folders and ``--writable``, never in the agent's own state directories (its login, its settings),
    and with no network unless ``--sandbox-network on`` (``network=None`` means off for a served command).
    """
    if sandbox is None:
        return None
    import dataclasses

    writable = [os.path.abspath(path) for path in getattr(args, "writable", None) or ()]
    return dataclasses.replace(sandbox, writable=writable)


class RunSandbox(NamedTuple):
    """The sandboxes of a ``prompt``, ``chat`` or ``batch`` run (all None when it is not sandboxed)."""

    agent: Bubblewrap | None
    """The agent's (``--sandbox``, or its config entry)."""
    plan: Plan | None
    """How bwrap will start the agent in it, as the live line and the journal's epoch record say (None for a
    batch: each turn plans its own agent's start)."""
    commands: Bubblewrap | None
    """Its served commands' (:func:`for_commands`)."""


def run_sandbox(
    args: argparse.Namespace, fields: SandboxFields, command: Sequence[str], agent_env: Mapping[str, str], cwd: Path
) -> RunSandbox:
    """The run's sandboxes (the flags over the agent entry's ``fields``) and how bwrap will start the agent's
    ``command`` in ``cwd`` with the variables its entry adds (``agent_env``), decided before the journal's first
    record, which says so; a sandbox that cannot be made here starts no agent.

    Raises:
        UsageProblem: a ``--writable`` that is not a directory, a state directory that cannot be made, or bwrap
            cannot run here.
    """
    env = {**os.environ, **agent_env}
    sandbox = sandbox_of_args(args, fields, env)
    if sandbox is None:
        return RunSandbox(None, None, None)
    commands = for_commands(sandbox, args)
    from ..._sandbox import plan

    try:  # a missing program is left to the start, which names it as every run does
        return RunSandbox(sandbox, plan(sandbox, command, cwd=str(cwd), env=env, find_program=False), commands)
    except SandboxUnavailable as exc:
        raise UsageProblem(f"--sandbox: {exc}") from None


def batch_sandbox(args: argparse.Namespace, fields: SandboxFields) -> RunSandbox:
    """The batch's sandboxes: ``--sandbox`` (or the default agent's config entry, ``fields``), ``--writable``, the
    network; each agent's own state directories are added to its turns' (``sandbox_writable``).

    Raises:
        UsageProblem: a ``--writable`` that is not a directory, or bwrap cannot run here.
    """
    if not asked(args, fields):
        return RunSandbox(None, None, None)
    from ..._sandbox import check_available, network_on
    from ..agents._table import SandboxFields

    network = SandboxFields(network=fields.network)
    sandbox = sandbox_for(network, os.environ, writable=args.writable, network=args.sandbox_network)
    commands = for_commands(sandbox, args)
    try:
        check_available(network=network_on(sandbox, True))
    except SandboxUnavailable as exc:
        raise UsageProblem(f"--sandbox: {exc}") from None
    return RunSandbox(sandbox, None, commands)


def describe(plan: Plan) -> str:
    """The live line of a sandboxed run: where the agent may write, and its network."""
    network = "shared" if plan.network else "off (loopback only)"
    return f"in a sandbox (bubblewrap): writable {', '.join(plan.writable)}; network {network}"


def describe_commands(sandbox: Bubblewrap) -> str:
    """The live line of a run whose served commands are sandboxed: where they may write, and their network."""
    writable = ", ".join(["the session's folders", *(str(path) for path in sandbox.writable)])
    network = "shared" if sandbox.network else "off (loopback only)"
    return f"served commands in a sandbox (bubblewrap) too: writable {writable}; network {network}"
