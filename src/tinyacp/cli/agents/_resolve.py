"""The agents the ``tinyacp`` command knows by name, and the user's config file that adds or overrides them.

A name stands for an argv that is run directly, never through a shell. The config file is TOML, in the
platform's config directory (see :mod:`tinyacp.cli.shared._dirs`), read by :mod:`tinyacp.cli.agents._load`::

    default_agent = "claude"            # what `tinyacp prompt` runs without --agent (default: demo)

    [agents.qwen]                       # the ACP registry's shape (see tinyacp.cli.agents._table)
    version = "0.24.4"
    distribution = { npx = { package = "@qwen-code/qwen-code@0.24.4", args = ["--acp"] } }
    notes = ["its first option writes a rule into the project"]   # said when started with a permission rule
    offline = "npm install -g @qwen-code/qwen-code@0.24.4"        # how to install it to start offline

    [agents.claude]                     # overrides the built-in entry
    command = ["claude-agent-acp"]      # an argv; a string is split as a shell would, but no shell runs it,
                                        # and as with --agent its first word may name a known agent:
                                        # command = "demo --delay 0.1"
    env = { ANTHROPIC_LOG = "debug" }   # added to the environment tinyacp passes on
    description = "Claude, installed globally"
    install = "npm install -g @agentclientprotocol/claude-agent-acp"
    login = "run `claude /login`"
    needs = "Node.js 22+"
    key_method = "api-key"              # an auth method that reads key_env, used when all of it is set
    key_env = ["ANTHROPIC_API_KEY"]
    # Session settings, as the flags of the same names (a flag wins over the file):
    mode = "default"                    # --mode
    model = "sonnet"                    # --model
    options = { effort = "high" }       # --set effort=high
    mcp_config = "~/mcp.json"           # --mcp-config
    system_prompt = "Answer briefly."   # --system-prompt
    system_prompt_mode = "append"       # --system-prompt-mode (append or override)
    auth = "api-key"                    # --auth
    # Permission rules by the tool's name, added to the flags' (a denied tool is never allowed, --yes included):
    allow_tools = ["Read", "Grep"]      # --allow-tool
    deny_tools = ["Bash"]               # --deny-tool

    [agents.claude.sandbox]             # --sandbox: the agent in bubblewrap (each key keeps the table's default)
    enabled = true                      # always (--no-sandbox still wins)
    writable = ["$CLAUDE_CONFIG_DIR|~/.claude", "~/.npm"]   # its state ($VAR|fallback), besides its cwd
    network = "on"                      # "off": loopback only (--sandbox-network)
    # Files and terminals served to the agent, added to the flags' (a denied command is never run, --yes included):
    serve = ["read", "write"]           # --serve read,write
    roots = ["~/notes"]                 # --root
    allow_commands = ["pytest*"]        # --allow-command
    deny_commands = ["*git push*"]      # --deny-command
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._constants import SYSTEM_PROMPT_MODES
from ..shared._exit import UsageProblem
from ..shared._text import text_argument, utf8_or_escaped
from ._table import SandboxFields, TableEntry, TableError, launcher_of, start

if TYPE_CHECKING:
    from ._config import AgentTable

__all__ = [
    "ALIASES",
    "BUILTIN_AGENTS",
    "SYSTEM_PROMPT_MODES",
    "AgentSettings",
    "AgentSpec",
    "Config",
    "ConfigError",
    "config_of",
    "resolve_agent",
]

DEMO = "demo"


class ConfigError(UsageProblem):
    """The config file or an --agent value cannot be used; the message says why, for a person."""


@dataclass(frozen=True)
class AgentSettings:
    """What to ask of the agent's session, from the command line or the agent's entry in ``config.toml``."""

    auth: str | None = None
    """The auth method id to ``authenticate`` with after ``initialize``."""
    mode: str | None = None
    model: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    """Config options to set, by id (``--set KEY=VALUE``)."""
    mcp_config: str | None = None
    """A file in the ``mcpServers`` JSON format of Claude Desktop and Cursor."""
    system_prompt: str | None = None
    system_prompt_mode: str = "append"


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
    """Where the entry comes from: ``built-in``, the config file's path, or ``--agent-command``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to the environment the agent inherits."""
    needs: str = ""
    """What the agent needs to run, in a few words (a runtime, a login)."""
    key_method: str | None = None
    """An auth method that takes an API key from the environment although the agent does not say so."""
    key_env: tuple[str, ...] = ()
    """The variables ``key_method`` reads; it is used when all of them are set."""
    settings: AgentSettings = field(default_factory=AgentSettings)
    """Session settings from the config file."""
    allow_tools: tuple[str, ...] = ()
    """Tools the config file allows by name for this agent (``--allow-tool`` adds to them)."""
    deny_tools: tuple[str, ...] = ()
    """Tools the config file never allows for this agent (``--deny-tool`` adds to them)."""
    serve: tuple[str, ...] = ()
    """What the config file serves this agent (``read``, ``write``, ``terminal``; ``--serve`` adds to it)."""
    roots: tuple[str, ...] = ()
    """Folders the config file serves besides the session's (``--root`` adds to them)."""
    allow_commands: tuple[str, ...] = ()
    """Command patterns the config file allows in a served terminal (``--allow-command`` adds to them)."""
    deny_commands: tuple[str, ...] = ()
    """Command patterns the config file never runs in a served terminal (``--deny-command`` adds to them)."""
    version: str = ""
    """The version the entry pins (``npx``/``uvx``) or was checked against (a program on ``PATH``); empty if unknown."""
    launcher: str = "path"
    """How the command starts the agent: ``npx`` or ``uvx`` (a pinned package, fetched on first use), ``path`` (a
    program on ``PATH``, or a path), or ``python`` (the demo agent, in tinyacp's own interpreter)."""
    package: str = ""
    """The pinned package ``npx``/``uvx`` runs (``@scope/name@1.2.3``, ``name@1.2.3``); empty for a program."""
    offline: str = ""
    """How to install the agent so that it starts without the network, in words a person can follow."""
    notes: tuple[str, ...] = ()
    """What is known of the agent's behaviour that a permission rule does not change (printed when the agent is
    started with a rule, and by ``tinyacp agents``)."""
    registry_id: str = ""
    """The agent's id in the ACP registry, when it has one (https://github.com/agentclientprotocol/registry)."""
    node: int = 0
    """The oldest Node.js major version the agent's package runs on (``npx`` entries); 0 when it says none."""
    sandbox: SandboxFields = field(default_factory=SandboxFields)
    """How it runs in the sandbox (``--sandbox``): its state directories, and the config entry's choices."""

    @property
    def sandbox_writable(self) -> tuple[str, ...]:
        """Its state directories, expanded in the environment it gets: what a batch adds to the sandbox."""
        from ..shared._sandbox import state_dirs

        return tuple(state_dirs(self.sandbox.writable or (), {**os.environ, **self.env}))

    @property
    def downloads(self) -> bool:
        """Whether its first start fetches a package (``npx``, ``uvx``): its entry's launcher, which a command line
        of one's own gets from its first word (``bunx`` and ``pnpm dlx`` included)."""
        return self.launcher in ("npx", "uvx")

    @property
    def key(self) -> str:
        """Who the agent is in the index of sessions: its name, or its command line when it has none."""
        return shlex.join(self.command) if self.source in ("--agent", "--agent-command") else self.name

    def with_args(self, args: list[str]) -> AgentSpec:
        """The same agent with more arguments after its own."""
        return dataclasses.replace(self, command=self.command + tuple(args))

    def program(self) -> str | None:
        """The full path of the program the command runs, or None when it is not on ``PATH``."""
        import shutil  # here, not at the top: it imports the compression modules, which `--help` does not need

        return shutil.which(self.command[0])

    def display_command(self) -> str:
        """The command line as a person would type it (``python -m …`` for the demo agent)."""
        command = list(self.command)
        if command[0] == sys.executable:
            command[0] = "python"
        return shlex.join(command)


def _builtin_agents() -> tuple[dict[str, AgentSpec], dict[str, str]]:
    """The demo agent, then the table's agents (:mod:`tinyacp.cli.agents._table`); and their other names."""
    from ._table import read_table

    agents = {
        DEMO: AgentSpec(
            DEMO,
            (sys.executable, "-m", "tinyacp.demo"),
            "tinyacp's built-in demo agent: no model, it lists the files in the working directory",
            "it comes with tinyacp",
            needs="nothing",
            key_method="demo-api-key",
            key_env=("TINYACP_DEMO_API_KEY",),
            launcher="python",
            offline="it comes with tinyacp",
            # Where it keeps its sessions (tinyacp.demo._store.default_state_dir), writable in the sandbox.
            sandbox=SandboxFields(
                writable=["$TINYACP_DEMO_STATE_DIR|$XDG_STATE_HOME/tinyacp-demo|~/.local/state/tinyacp-demo"]
            ),
        )
    }
    aliases: dict[str, str] = {}
    for entry in read_table():
        agents[entry.id] = _table_spec(entry)
        for alias in (entry.tinyacp.registry, *entry.tinyacp.aliases):
            if alias and alias != entry.id:
                aliases[alias] = entry.id
    return agents, aliases


def _table_spec(entry: TableEntry) -> AgentSpec:
    """The :class:`AgentSpec` of one entry of the shipped table."""
    extra = entry.tinyacp
    how = start(entry.distribution, command=extra.command, executable=extra.executable)
    return AgentSpec(
        entry.id,
        how.command,
        entry.description,
        extra.install or how.install,
        extra.login,
        env=dict(how.env),
        needs=extra.needs,
        key_method=extra.key_method or None,
        key_env=tuple(extra.key_env),
        version=entry.version,
        launcher=how.launcher,
        package=how.package,
        offline=extra.offline,
        notes=tuple(extra.notes),
        registry_id=extra.registry,
        node=extra.node,
        sandbox=extra.sandbox,
    )


BUILTIN_AGENTS: dict[str, AgentSpec]
"""The agents known by name without a config file: the demo agent, then the table's, by name."""
ALIASES: dict[str, str]
"""Other names of built-in agents (their ACP registry ids, ``droid``), each to the name it stands for."""
BUILTIN_AGENTS, ALIASES = _builtin_agents()


@dataclass(frozen=True)
class Config:
    """The agents known by name (built-in ones, then the config file's) and the default one."""

    agents: dict[str, AgentSpec]
    default_agent: str = DEMO
    path: Path | None = None
    """The config file that was read, or None when there was none."""


def config_of(path: Path, document: dict[str, Any]) -> Config:
    """The config of a parsed file (:func:`tinyacp.cli.agents._load.load_config` reads it): its tables, read into
    the typed ones of :mod:`tinyacp.cli.agents._config`, over the built-in agents.

    Raises:
        ConfigError: a key it does not know (the message names it, where it is, and the closest known key), a
            value of the wrong type, or an entry that cannot be used (see :func:`_entry`).
    """
    from ._config import AgentTable, ConfigFile, typed

    where = f"config file {path}"
    try:
        top = typed(where, "", document, ConfigFile)
        for name, raw in top.agents.items():  # a nested table's unknown key, named with "did you mean" too
            if isinstance(raw, dict) and isinstance(raw.get("sandbox"), dict):
                typed(where, f"agents.{name}.sandbox", raw["sandbox"], SandboxFields)
        tables = {name: typed(where, f"agents.{name}", raw, AgentTable) for name, raw in top.agents.items()}
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    agents = dict(BUILTIN_AGENTS)
    for name, table in tables.items():
        agents[name] = _entry(path, name, table)
    if not top.default_agent.strip():
        raise ConfigError(f"{where}: default_agent must be an agent name or a command")
    return Config(agents, top.default_agent, path)


def _entry(path: Path, name: str, table: AgentTable) -> AgentSpec:
    """One ``[agents.NAME]`` table over the built-in entry of that name, if any.

    Raises:
        ConfigError: the table gives both ``command`` and ``distribution``, neither (for a new name), a command
            line that cannot be split, a distribution that cannot start here, an ``id`` that is not its name, or
            an empty tool name in ``allow_tools`` or ``deny_tools``.
    """
    where = f"config file {path}: agents.{name}"
    for key, names in (("allow_tools", table.allow_tools), ("deny_tools", table.deny_tools)):
        for tool in names or ():  # matched exactly: an empty name would match nothing and hide the mistake
            if not tool.strip():
                raise ConfigError(f"{where}.{key}: a tool name cannot be empty or blank: {tool!r}")
    if table.id is not None and table.id != name:
        raise ConfigError(f"{where}.id: {table.id!r} is not the table's name ({name!r}): leave it out, or rename")
    if table.command is not None and table.distribution is not None:
        raise ConfigError(f"{where}: give a command or a distribution, not both")
    builtin = BUILTIN_AGENTS.get(name)
    command, origin, env = _entry_command(where, table, builtin)
    base = builtin or origin  # where the texts the table leaves out come from
    texts = {
        key: value if value is not None else (getattr(base, key) if base is not None else "")
        for key, value in (
            ("description", table.description),
            ("install", table.install),
            ("login", table.login),
            ("needs", table.needs),
            ("offline", table.offline),
        )
    }
    if table.install is None and origin is not None and origin.install and origin is not base:
        texts["install"] = origin.install
    elif table.install is None and builtin is not None and origin is not builtin and builtin.offline:
        # Its own program instead of the built-in's npx/uvx: installing it is what the offline hint says.
        texts["install"] = builtin.offline
    key_env = table.key_env if table.key_env is not None else list(base.key_env) if base is not None else []
    return AgentSpec(
        name,
        command,
        source=str(path),
        env={**env, **(table.env or {})},
        key_method=table.key_method if table.key_method is not None else base.key_method if base else None,
        key_env=(key_env,) if isinstance(key_env, str) else tuple(key_env),
        settings=_settings(where, table),
        allow_tools=tuple(table.allow_tools or ()),
        deny_tools=tuple(table.deny_tools or ()),
        serve=tuple(table.serve or ()),
        roots=tuple(os.path.expanduser(root) for root in table.roots or ()),
        allow_commands=tuple(table.allow_commands or ()),
        deny_commands=tuple(table.deny_commands or ()),
        version=table.version if table.version is not None else origin.version if origin is not None else "",
        launcher=origin.launcher if origin is not None else "path",
        package=origin.package if origin is not None else "",
        notes=tuple(table.notes) if table.notes is not None else base.notes if base is not None else (),
        registry_id=origin.registry_id if origin is not None else "",
        node=origin.node if origin is not None else 0,
        sandbox=(table.sandbox or SandboxFields()).over(base.sandbox if base is not None else SandboxFields()),
        **texts,
    )


def _entry_command(
    where: str, table: AgentTable, base: AgentSpec | None
) -> tuple[tuple[str, ...], AgentSpec | None, dict[str, str]]:
    """An entry's command, the entry it comes from (whose version, package and launcher hold for it), and the
    variables that come with it.

    Raises:
        ConfigError: see :func:`_entry`.
    """
    origin = base
    command: tuple[str, ...] | None = base.command if base is not None else None
    env = dict(base.env) if base is not None else {}
    if isinstance(table.command, str):
        try:
            words = shlex.split(table.command)
        except ValueError as exc:
            raise ConfigError(f"{where}.command: {table.command!r}: {exc}") from None
        # As --agent "demo --delay 0.1": a known agent's name, then more arguments.
        origin = _builtin(words[0]) if words else None
        if origin is not None:
            command = origin.command + tuple(words[1:])
            env = {**origin.env, **env}
        else:
            command, origin = tuple(words), _own(tuple(words))
    elif table.command is not None:
        command, origin = tuple(table.command), _own(tuple(table.command))
    elif table.distribution is not None:
        try:
            how = start(table.distribution, executable=table.executable or "")
        except TableError as exc:
            raise ConfigError(f"{where}.distribution: {exc}") from None
        command = how.command
        env = {**env, **how.env}
        origin = AgentSpec("", how.command, install=how.install, launcher=how.launcher, package=how.package)
    if not command:
        raise ConfigError(
            f"{where}: needs a command (a list of strings, or one string: a command line) or a distribution"
        )
    return command, origin, env


def _own(command: tuple[str, ...]) -> AgentSpec | None:
    """The launcher and package of a command line of the user's own (``npx -y pkg@1.0.0``), as an entry to take
    them from; None for a program."""
    launcher, package = launcher_of(command)
    return AgentSpec("", command, launcher=launcher, package=package) if launcher != "path" else None


def _builtin(name: str) -> AgentSpec | None:
    """The built-in agent of this name or of this other name (an ACP registry id, ``droid``)."""
    return BUILTIN_AGENTS.get(ALIASES.get(name, name))


def _settings(where: str, table: AgentTable) -> AgentSettings:
    """The session settings of an agent's entry: ``mode``, ``model``, ``options``, ``mcp_config``, …"""
    values: dict[str, Any] = {
        key: getattr(table, key)
        for key in ("auth", "mode", "model", "mcp_config", "system_prompt", "system_prompt_mode")
        if getattr(table, key) is not None
    }
    if values.get("system_prompt_mode", "append") not in SYSTEM_PROMPT_MODES:
        raise ConfigError(f"{where}.system_prompt_mode: must be one of {', '.join(SYSTEM_PROMPT_MODES)}")
    values["options"] = {key: _option_text(value) for key, value in (table.options or {}).items()}
    return AgentSettings(**values)


def _option_text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resolve_agent(value: str | None, config: Config, *, command: str | None = None) -> AgentSpec:
    """The agent to start: ``--agent-command`` (a command line of its own) when given, else the ``--agent``
    value: a known name, with extra arguments after it as in ``"demo --delay 1"``. A value with a space whose
    first word is no known name is also taken as a command line (the older spelling of ``--agent-command``);
    so is a path to a program (``./my-agent``). None means the config's default agent.

    Raises:
        ConfigError: the value is empty, cannot be split into words, or is a single word that names no agent
            (the message suggests the closest names).
    """
    if command is not None:
        return _command(command, "--agent-command")
    where = "--agent"
    if value is None:
        value = config.default_agent
        if config.path is not None:  # a default of the config file: say where it came from
            where = f"default_agent = {value!r} in the config file {utf8_or_escaped(os.fspath(config.path))}:"
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"{where} {value!r}: {exc}") from exc
    if not words:
        raise ConfigError(f"{where} is empty: give an agent name (see `tinyacp agents`) or use --agent-command")
    spec = config.agents.get(words[0]) or config.agents.get(ALIASES.get(words[0], ""))
    if spec is not None:
        return spec.with_args(words[1:])
    if len(words) > 1 or os.sep in words[0]:
        return _command(value, "--agent")
    import difflib

    try:
        text_argument(f"{where} {utf8_or_escaped(words[0])!r}", words[0], "agent names are text")
    except UsageProblem as exc:
        raise ConfigError(str(exc)) from None
    close = difflib.get_close_matches(words[0], list(config.agents), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else ""
    prefix = f"{where} " if where != "--agent" else ""
    raise ConfigError(
        f"{prefix}unknown agent {words[0]!r}{hint} (known agents: {', '.join(config.agents)}; "
        f'to run a program of your own, use --agent-command "CMD ARGS")'
    )


def _command(value: str, flag: str) -> AgentSpec:
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"{flag} {value!r}: {exc}") from exc
    if not words:
        raise ConfigError(f"{flag} is empty: give a command line")
    launcher, package = launcher_of(tuple(words))
    return AgentSpec(os.path.basename(words[0]), tuple(words), source=flag, launcher=launcher, package=package)
