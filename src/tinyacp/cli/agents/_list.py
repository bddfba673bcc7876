"""``tinyacp agents``: the agents known by name, what each runs, whether it can start here, what it does.

Whether an agent can start is read off this machine without starting it: its program (or ``npx``/``uvx``) on
``PATH``, and for an ``npx`` package that names the oldest Node.js it runs on, the version of ``node``. What
starting it shows (its version, its login methods, what it offers) is ``tinyacp agents --check``'s job.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..shared._dirs import default_config_path
from ..shared._display import sanitize
from ._load import load_config
from ._resolve import DEMO, AgentSpec, Config

__all__ = ["agent_rows", "cmd_agents", "node_major", "print_agents", "state_of"]


@cache
def node_major() -> int | None:
    """The major version of the ``node`` on PATH, or None when there is none (or it does not say)."""
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.match(rb"v(\d+)\.", done.stdout.strip())
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class State:
    """Whether an agent can start on this machine, in a few words."""

    ready: bool
    words: str
    warning: str | None = None
    """What the agent declares that this machine does not match, though it may start all the same."""


def state_of(spec: AgentSpec, program: str | None) -> State:
    """``ready``, or what is missing: the program, ``npx``/``uvx``, ``node``. A Node.js older than the package
    declares (its ``engines``) is a warning, not a verdict: qwen and Claude's adapter declare Node.js 22 and
    answer on 20; only starting it (``agents --check``) tells."""
    if program is None:
        return State(False, f"missing {spec.command[0]}")
    if spec.launcher == "npx" and spec.node:
        major = node_major()
        if major is None:
            return State(False, "missing node")
        if major < spec.node:
            declared = f"declares Node.js ≥ {spec.node} (found {major})"
            check = f"`tinyacp agents --check {spec.name}` tells whether it starts on Node.js {major}"
            return State(True, declared, f"{declared}: {check}")
    return State(True, "ready")


def agent_rows(config: Config) -> list[dict[str, Any]]:
    """One row per agent known by name, as ``tinyacp agents --format json`` prints them."""
    rows: list[dict[str, Any]] = []
    for spec in config.agents.values():
        program = spec.program()
        state = state_of(spec, program)
        rows.append(
            {
                "name": spec.name,
                "version": spec.version or None,
                "command": list(spec.command),
                "display": spec.display_command(),
                "launcher": spec.launcher,
                "package": spec.package or None,
                "env": dict(spec.env),
                "installed": program is not None,
                "program": program,
                "ready": state.ready,
                "state": state.words,
                "warning": state.warning,
                "description": spec.description,
                "needs": spec.needs,
                "install": spec.install,
                "offline": spec.offline,
                "login": spec.login,
                "key_method": spec.key_method,
                "key_env": list(spec.key_env),
                "notes": list(spec.notes),
                "registry_id": spec.registry_id or None,
                "source": spec.source,
            }
        )
    return rows


def print_agents(config: Config, form: str) -> int:
    """Print the agents known by name, as text or JSON; returns the exit status (0)."""
    rows = agent_rows(config)
    where = config.path or default_config_path()
    if form == "json":
        document = {"default": config.default_agent, "config": str(where), "agents": rows}
        print(json.dumps(document, ensure_ascii=True, indent=2))
        return 0
    width = max(len(_title(row)) for row in rows)
    state_width = max(len(row["state"]) for row in rows)
    lines: list[str] = []
    for row in rows:
        marker = "*" if row["name"] == config.default_agent else " "
        lines.append(f"{marker} {_title(row):<{width}}  {row['state']:<{state_width}}  {row['description']}")
        indent = "    "
        first_use = {"npx": " (npx fetches it on first use)", "uvx": " (uvx fetches it on first use)"}
        lines.append(f"{indent}runs {row['display']}{first_use.get(row['launcher'], '')}")
        if row["name"] != DEMO:
            lines.append(f"{indent}needs {row['needs'] or 'see its documentation'}")
            lines.append(f"{indent}to log in: {row['login'] or 'see its documentation'}")
        if row["warning"]:
            lines.append(f"{indent}warning: {row['warning']}")
        lines.extend(f"{indent}note: {note}" for note in row["notes"])
    missing = [row for row in rows if not row["ready"] and row["install"]]
    if missing:
        lines.append("\nto install:")
        lines.extend(f"  {row['name']}: {row['install']}" for row in missing)
    lines.append(f"\n* default agent. config file: {where}{'' if config.path else ' (none yet)'}")
    lines.append("`tinyacp agents --check NAME…` starts agents and shows what each offers")
    print(sanitize("\n".join(lines)))
    return 0


def _title(row: dict[str, Any]) -> str:
    return f"{row['name']} {row['version']}" if row["version"] else row["name"]


def cmd_agents(args: argparse.Namespace) -> int:
    """``tinyacp agents``: the agents known by name, whether each can be started, how to install it."""
    return print_agents(load_config(args.config), args.format)
