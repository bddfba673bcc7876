"""The agents the ``tinyacp`` command knows by name, and the user's config file that adds or overrides them.

A name stands for an argv that is run directly, never through a shell. The config file is TOML, in the
platform's config directory (see :mod:`tinyacp.cli._dirs`)::

    default_agent = "claude"            # what `tinyacp prompt` runs without --agent (default: demo)

    [agents.claude]                     # overrides the built-in entry
    command = ["claude-agent-acp"]      # an argv; a string is split as a shell would, but no shell runs it
    env = { ANTHROPIC_LOG = "debug" }   # added to the environment tinyacp passes on
    description = "Claude, installed globally"
    install = "npm install -g @zed-industries/claude-agent-acp"
    login = "run `claude /login`"
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._dirs import config_dir

__all__ = ["BUILTIN_AGENTS", "AgentSpec", "Config", "ConfigError", "load_config", "resolve_agent"]

DEMO = "demo"


class ConfigError(Exception):
    """The config file or an --agent value cannot be used; the message says why, for a person."""


@dataclass(frozen=True)
class AgentSpec:
    """How to start one agent."""

    name: str
    command: tuple[str, ...]
    description: str = ""
    install: str = ""
    """How to install the agent, in words a person can follow (shown when it cannot be started)."""
    login: str = ""
    """How to log in, when the agent says it needs authentication."""
    source: str = "built-in"
    """Where the entry comes from: ``built-in``, the config file's path, or ``--agent``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to the environment the agent inherits."""

    def with_args(self, args: list[str]) -> AgentSpec:
        """The same agent with more arguments after its own."""
        return dataclasses.replace(self, command=self.command + tuple(args))

    def program(self) -> str | None:
        """The full path of the program the command runs, or None when it is not on ``PATH``."""
        return shutil.which(self.command[0])

    def display_command(self) -> str:
        """The command line as a person would type it (``python -m …`` for the demo agent)."""
        command = list(self.command)
        if command[0] == sys.executable:
            command[0] = "python"
        return shlex.join(command)


_NODE = "install Node.js 18 or later (https://nodejs.org), which provides npx; npx fetches the adapter on first use"

BUILTIN_AGENTS: dict[str, AgentSpec] = {
    spec.name: spec
    for spec in (
        AgentSpec(
            DEMO,
            (sys.executable, "-m", "tinyacp.demo"),
            "tinyacp's built-in demo agent: no model, it lists the files in the working directory",
            "it comes with tinyacp",
        ),
        # Zed renamed its Claude adapter from claude-code-acp to claude-agent-acp when Anthropic's SDK became the
        # Claude Agent SDK; the old package is no longer developed.
        AgentSpec(
            "claude",
            ("npx", "-y", "@zed-industries/claude-agent-acp"),
            "Claude Code, through Zed's ACP adapter (claude-agent-acp)",
            _NODE,
            "run `claude /login` (Claude Code), or set ANTHROPIC_API_KEY",
        ),
        AgentSpec(
            "codex",
            ("npx", "-y", "@zed-industries/codex-acp"),
            "OpenAI Codex, through Zed's ACP adapter (codex-acp)",
            _NODE,
            "run `codex login` (Codex CLI), or set OPENAI_API_KEY",
        ),
        AgentSpec(
            "gemini",
            ("gemini", "--acp"),
            "Google's Gemini CLI in ACP mode",
            "npm install -g @google/gemini-cli",
            "run `gemini` once in a terminal to log in, or set GEMINI_API_KEY",
        ),
        AgentSpec(
            "opencode",
            ("opencode", "acp"),
            "opencode in ACP mode",
            "npm install -g opencode-ai (or see https://opencode.ai)",
            "run `opencode auth login`",
        ),
    )
}


@dataclass(frozen=True)
class Config:
    """The agents known by name (built-in ones, then the config file's) and the default one."""

    agents: dict[str, AgentSpec]
    default_agent: str = DEMO
    path: Path | None = None
    """The config file that was read, or None when there was none."""


def default_config_path() -> Path:
    """Where the config file is looked for."""
    return config_dir() / "config.toml"


def load_config(path: Path | None = None) -> Config:
    """Read the config file (``path``, else the default one if it exists) over the built-in agents.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or has an entry of the wrong shape.
    """
    explicit = path is not None
    path = path if path is not None else default_config_path()
    agents = dict(BUILTIN_AGENTS)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file {path}: not found") from None
        return Config(agents)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from exc
    table = data.get("agents", {})
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [agents] must be a table of agent tables")
    for name, entry in table.items():
        agents[name] = _entry(path, name, entry)
    default = data.get("default_agent", DEMO)
    if not isinstance(default, str) or not default.strip():
        raise ConfigError(f"config file {path}: default_agent must be an agent name or a command")
    return Config(agents, default, path)


def _entry(path: Path, name: str, entry: Any) -> AgentSpec:
    where = f"config file {path}: [agents.{name}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table")
    base = BUILTIN_AGENTS.get(name)
    command = entry.get("command", base.command if base is not None else None)
    if isinstance(command, str):
        command = shlex.split(command)
    if not isinstance(command, list | tuple) or not command or not all(isinstance(arg, str) for arg in command):
        raise ConfigError(f"{where}: command must be a non-empty list of strings (or one string)")
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError(f"{where}: env must be a table of strings")
    texts = {}
    for key in ("description", "install", "login"):
        value = entry.get(key, getattr(base, key) if base is not None else "")
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key} must be a string")
        texts[key] = value
    return AgentSpec(name, tuple(command), texts["description"], texts["install"], texts["login"], str(path), env)


def resolve_agent(value: str | None, config: Config) -> AgentSpec:
    """The agent an ``--agent`` value means: a known name (with extra arguments after it, as in
    ``"demo --delay 1"``), else a command line of its own. None means the config's default agent.

    Raises:
        ConfigError: the value is empty or cannot be split into words.
    """
    if value is None:
        value = config.default_agent
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"--agent {value!r}: {exc}") from exc
    if not words:
        raise ConfigError("--agent is empty: give an agent name (see `tinyacp agents`) or a command")
    spec = config.agents.get(words[0])
    if spec is not None:
        return spec.with_args(words[1:])
    name = os.path.basename(words[0])
    return AgentSpec(name, tuple(words), source="--agent")
