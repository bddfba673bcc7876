"""The typed shape of ``config.toml``: one struct per table, unknown keys refused.

A new key is one new field here (default ``None``: not set in the file), then read where the entry becomes an
:class:`~tinyacp.cli.agents._resolve.AgentSpec`. The file's own words stay in the messages: every error names the key
and the table it is in (``agents.claude.mode``), and an unknown key gets the closest known ones.
"""

from __future__ import annotations

import difflib
from typing import Any, TypeVar

import msgspec

from ._table import Distribution, SandboxFields

__all__ = ["AgentTable", "ConfigFile", "typed"]

_T = TypeVar("_T", bound=msgspec.Struct)


class AgentTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One ``[agents.NAME]`` table; a key left out keeps the built-in agent's value (or the default)."""

    command: list[str] | str | None = None
    """An argv, or a command line whose first word may name a known agent (``"demo --delay 0.1"``)."""
    distribution: Distribution | None = None
    """How the agent starts, in the ACP registry's shape (``npx``, ``uvx`` or ``binary``), instead of ``command``."""
    executable: str | None = None
    """The program a ``uvx`` package installs, when it is not named as the package is."""
    version: str | None = None
    offline: str | None = None
    notes: list[str] | None = None
    # The ACP registry's descriptive keys, so that a registry entry can be pasted in: read, and not used.
    id: str | None = None
    name: str | None = None
    repository: str | None = None
    authors: list[str] | None = None
    license: str | None = None
    icon: str | None = None
    env: dict[str, str] | None = None
    description: str | None = None
    install: str | None = None
    login: str | None = None
    needs: str | None = None
    key_method: str | None = None
    key_env: list[str] | str | None = None
    auth: str | None = None
    mode: str | None = None
    model: str | None = None
    options: dict[str, str | int | float | bool] | None = None
    mcp_config: str | None = None
    system_prompt: str | None = None
    system_prompt_mode: str | None = None
    allow_tools: list[str] | None = None
    """Tools allowed by name in every run of this agent, as ``--allow-tool`` (the flags add to them)."""
    deny_tools: list[str] | None = None
    """Tools never allowed in a run of this agent, as ``--deny-tool`` (the flags add to them)."""
    sandbox: SandboxFields | None = None
    """``[agents.NAME.sandbox]``: ``enabled``, ``writable``, ``readable``, ``network``; each key left out keeps the
    agent table's."""
    serve: list[str] | None = None
    """What tinyacp serves this agent (``read``, ``write``, ``terminal``), as ``--serve`` (the flags add to it)."""
    roots: list[str] | None = None
    """Folders served besides the session's, as ``--root`` (the flags add to them; ``~`` is the home folder)."""
    allow_commands: list[str] | None = None
    """Command lines allowed in a served terminal, as ``--allow-command`` (the flags add to them)."""
    deny_commands: list[str] | None = None
    """Command lines never run in a served terminal, as ``--deny-command`` (the flags add to them)."""


class ConfigFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The file's top level. Each agent's table is typed on its own, so a message can name the agent."""

    default_agent: str = "demo"
    agents: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


def typed(where: str, path: str, table: dict[str, Any], kind: type[_T]) -> _T:
    """``table`` (the TOML table at ``path``, ``""`` for the top) as a ``kind``.

    Raises:
        ValueError: a key ``kind`` does not have (with "did you mean"), a value of the wrong type, or a NUL byte
            in a key or a text; the message starts with ``where`` and names the key by its full path.
    """
    nul = _nul_at(table, path)
    if nul is not None:
        # No program, argument, variable or package name can hold one: the kernel takes them as C strings, and
        # Python refuses to start a program with one ("embedded null byte"), far from the file's line.
        raise ValueError(f"{where}: {nul}: a NUL byte (\\u0000) is not allowed in a key or a value")
    known = kind.__struct_fields__
    for key in table:
        if key not in known:
            close = _closest(key, known)
            hint = f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else ""
            raise ValueError(
                f"{where}: unknown key {_dotted(path, key)!r}{hint} (known keys{' of ' + path if path else ''}: "
                f"{', '.join(known)})"
            )
    try:
        return msgspec.convert(table, kind, strict=True)
    except msgspec.ValidationError as exc:
        problem, _, at = str(exc).rpartition(" - at `")
        key = at.rstrip("`").removeprefix("$").replace("[...]", ".*").lstrip(".")
        problem = problem.replace("`", "")
        raise ValueError(f"{where}: {_dotted(path, key)}: {problem[:1].lower()}{problem[1:]}") from None


def _nul_at(value: Any, path: str) -> str | None:
    """The dotted path of the first key or text in ``value`` that holds a NUL byte; None when none does."""
    if isinstance(value, str):
        return path if "\0" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            at = _dotted(path, str(key))
            if "\0" in str(key):
                return at
            found = _nul_at(item, at)
            if found is not None:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _nul_at(item, path)
            if found is not None:
                return found
    return None


def _closest(key: str, known: tuple[str, ...]) -> list[str]:
    """The one or two known keys ``key`` is closest to; a second only when it is about as close as the first."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, key, name).ratio(), name) for name in known), key=lambda pair: -pair[0]
    )
    best = scored[0][0] if scored else 0.0
    return [name for ratio, name in scored[:2] if ratio >= 0.6 and ratio >= best - 0.1]


def _dotted(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key
