"""Our requests' shapes: pure functions from what the caller asked (and what the agent advertised) to each
request's ``params``. No I/O, no state.

The conversation core (:mod:`tinyacp._conversation`) numbers, encodes and tracks the requests; here is only what
each one carries: the checks against the agent's ``initialize`` answer (a method or capability it did not
advertise raises :class:`~tinyacp.NotAdvertised` before anything is written), the checks of the caller's values,
and ``_meta``. A check that the caller may override with ``force=True`` is returned as a *refusal* (why the
agent would not take it) beside the params, rather than raised. What an answer decodes to is
:mod:`tinyacp._answers`' part.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ._errors import NotAdvertised, UnsupportedContent, UsageError
from ._features import ClientFeatures
from ._messages import (
    PROTOCOL_VERSION,
    AnyMcpServer,
    ClientInfo,
    ConfigOption,
    Initialize,
    PromptCapabilities,
    PromptContent,
    SessionState,
    SystemPrompt,
    prompt_blocks,
    required_capability,
    wire_blocks,
)
from ._sandbox import check_within

__all__ = [
    "OWN_CALLS",
    "UNSTABLE_METHODS",
    "Meta",
    "Params",
    "Refusal",
    "absolute",
    "agent_for",
    "authenticate_params",
    "config_params",
    "extension_params",
    "fork_params",
    "initialize_params",
    "list_params",
    "mode_params",
    "model_params",
    "prompt_params",
    "require_load",
    "require_logout",
    "session_capability",
    "session_params",
    "with_meta",
]

Meta = dict[str, Any]
"""A ``_meta`` object: JSON values, and :class:`~tinyacp.Secret` anywhere among them."""

Params = dict[str, Any]
"""A request's ``params`` object, ready to encode."""

Refusal = str | None
"""Why the agent did not advertise what a request asks for (None: it did); ``force=True`` sends it anyway."""


def with_meta(params: Params, meta: Meta | None) -> Params:
    """``params`` with ``_meta`` set to ``meta`` (a JSON object), when given.

    Raises:
        TypeError: ``meta`` is not a dict.
    """
    if meta is not None:
        if not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict (a JSON object), not {type(meta).__name__}")
        params["_meta"] = meta
    return params


def absolute(path: str) -> str:
    """``path``, which the protocol requires to be absolute.

    Raises:
        ValueError: ``path`` is relative.
    """
    if not os.path.isabs(path):
        raise ValueError(f"a session's directories must be absolute paths, not {path!r}")
    return path


def agent_for(agent: Initialize | None, method: str) -> Initialize:
    """The agent's ``initialize`` answer, which ``method`` needs to be checked against.

    Raises:
        NotAdvertised: there is no answer yet.
    """
    if agent is None:
        raise NotAdvertised(f"{method} needs the agent's initialize answer first; nothing was written")
    return agent


def session_capability(agent: Initialize | None, name: str, method: str) -> Any:
    """The value the agent advertised for ``sessionCapabilities.<name>``.

    Raises:
        NotAdvertised: the agent did not advertise it (or did not answer ``initialize``).
    """
    capability = agent_for(agent, method).agent_capabilities.session_capabilities.get(name)
    if capability is None:
        raise NotAdvertised(f"the agent did not advertise sessionCapabilities.{name}; nothing was written")
    return capability


def require_load(agent: Initialize | None) -> None:
    """Check that ``session/load`` may be sent.

    Raises:
        NotAdvertised: the agent did not advertise ``loadSession``.
    """
    if not agent_for(agent, "session/load").load_session:
        raise NotAdvertised("the agent did not advertise loadSession; nothing was written")


def require_logout(agent: Initialize | None) -> None:
    """Check that ``logout`` may be sent.

    Raises:
        NotAdvertised: the agent did not advertise ``agentCapabilities.auth.logout``.
    """
    if agent_for(agent, "logout").agent_capabilities.auth.get("logout") is None:
        raise NotAdvertised("the agent did not advertise auth.logout; nothing was written")


def initialize_params(client_info: ClientInfo, features: ClientFeatures, meta: Meta | None) -> Params:
    """``initialize``: protocol version 1, our info, and our client capabilities (with the features on)."""
    params = {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": features.capabilities(),
        "clientInfo": client_info,
    }
    return with_meta(params, meta)


def session_params(
    agent: Initialize | None,
    session_id: str | None,
    cwd: str,
    mcp_servers: Sequence[AnyMcpServer],
    *,
    meta: Meta | None,
    system_prompt: SystemPrompt | None,
    additional_directories: Sequence[str],
    roots: Sequence[str] | None = None,
) -> Params:
    """``session/new`` (no ``session_id``), ``session/load`` and ``session/resume``.

    ``roots``: the sandbox's writable roots (None: no sandbox); a directory outside them is refused.

    Raises:
        OutsideSandbox: ``cwd`` or an additional directory lies outside ``roots``.
        NotAdvertised: a system prompt (or its override mode) or additional directories the agent did not
            advertise.
        TypeError: ``system_prompt`` is not a :class:`~tinyacp.SystemPrompt`.
        ValueError: a directory is not absolute.
    """
    params: Params = {} if session_id is None else {"sessionId": session_id}
    params["cwd"] = absolute(cwd)
    params["mcpServers"] = list(mcp_servers)
    if additional_directories:
        session_capability(agent, "additionalDirectories", "additionalDirectories")
        params["additionalDirectories"] = [absolute(path) for path in additional_directories]
    check_within(cwd, additional_directories, roots)
    if system_prompt is not None:
        if not isinstance(system_prompt, SystemPrompt):
            raise TypeError("system_prompt must be a tinyacp.SystemPrompt")
        capability = session_capability(agent, "systemPrompt", "systemPrompt")
        if system_prompt.mode == "override" and not _offers_override(capability):
            raise NotAdvertised(
                "the agent did not advertise sessionCapabilities.systemPrompt.mode.override; nothing was written"
            )
        params["systemPrompt"] = system_prompt._wire()
    return with_meta(params, meta)


def _offers_override(capability: Any) -> bool:
    """Whether ``sessionCapabilities.systemPrompt`` offers the ``override`` mode: ``{"mode": {"override": {}}}``."""
    modes = capability.get("mode") if isinstance(capability, dict) else None
    return isinstance(modes, dict) and modes.get("override") is not None


def fork_params(
    agent: Initialize | None,
    session_id: str,
    cwd: str,
    mcp_servers: Sequence[AnyMcpServer],
    *,
    meta: Meta | None,
    system_prompt: SystemPrompt | None,
    additional_directories: Sequence[str] | None,
    roots: Sequence[str] | None = None,
) -> tuple[Params, Refusal]:
    """``session/fork``, refused if the agent did not advertise ``sessionCapabilities.fork``.

    Raises:
        OutsideSandbox: ``cwd`` or an additional directory lies outside the sandbox's writable ``roots``.
        NotAdvertised: no ``initialize`` answer yet, or a system prompt or additional directories the agent
            did not advertise.
        TypeError: ``system_prompt`` is not a :class:`~tinyacp.SystemPrompt`.
        ValueError: a directory is not absolute.
    """
    offered = agent_for(agent, "session/fork").agent_capabilities.session_capabilities.get("fork") is not None
    refusal = None if offered else "the agent did not advertise sessionCapabilities.fork"
    params = session_params(
        agent,
        session_id,
        cwd,
        mcp_servers,
        meta=meta,
        system_prompt=system_prompt,
        additional_directories=additional_directories or (),
        roots=roots,
    )
    return params, refusal


OWN_CALLS: dict[str, str] = {
    "initialize": "initialize",
    "authenticate": "authenticate",
    "logout": "logout",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/resume": "resume_session",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "session/list": "list_sessions",
    "session/fork": "fork_session",
    "session/set_mode": "set_mode",
    "session/set_config_option": "set_config_option",
    "session/set_model": "set_model",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
}
"""The methods that have a call of their own, and that call: ``request`` and ``notify`` refuse them."""

UNSTABLE_METHODS: frozenset[str] = frozenset(
    {
        "auth/status",
        "mcp/message",
        "providers/disable",
        "providers/list",
        "providers/set",
        "session/archive",
        "session/set_title",
        "session/status",
        "session/unarchive",
    }
)
"""The agent's methods in the unstable schema of the TypeScript SDK 2.4.0 that have no call of their own."""


def extension_params(method: str, params: Params | None) -> Params:
    """The params of an extension method (``_`` first) or of an unstable one, sent by ``request``/``notify``.

    Raises:
        UsageError: ``method`` has a call of its own, or is neither an extension nor an unstable method.
        TypeError: ``method`` is not a str, or ``params`` is not a dict.
    """
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, not {type(method).__name__}")
    own = OWN_CALLS.get(method)
    if own is not None:
        raise UsageError(f"{method} has a call of its own: use {own}(); nothing was written")
    if not (method.startswith("_") or method in UNSTABLE_METHODS):
        raise UsageError(
            f"{method!r} is neither an extension method (its name begins with '_') nor one of the unstable methods "
            f"{sorted(UNSTABLE_METHODS)}; nothing was written"
        )
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict (a JSON object) or None, not {type(params).__name__}")
    return params


def list_params(cwd: str | None, cursor: str | None, meta: Meta | None) -> Params:
    """``session/list``, filtered by ``cwd`` and continued from ``cursor``.

    Raises:
        ValueError: ``cwd`` is not absolute.
        TypeError: ``meta`` is not a dict.
    """
    params: Params = {}
    if cwd is not None:
        params["cwd"] = absolute(cwd)
    if cursor is not None:
        params["cursor"] = cursor
    return with_meta(params, meta)


def authenticate_params(agent: Initialize | None, method_id: str, meta: Meta | None) -> Params:
    """``authenticate`` with one of the methods the agent offered.

    Raises:
        NotAdvertised: the agent did not offer ``method_id``, or it is a ``terminal`` method (which the user runs
            themselves, outside the protocol).
    """
    offered = {method.id: method for method in agent_for(agent, "authenticate").auth_methods}
    method = offered.get(method_id)
    if method is None:
        raise NotAdvertised(
            f"the agent offers no auth method {method_id!r} (it offers {sorted(offered)}); nothing was written"
        )
    if method.type == "terminal":
        raise NotAdvertised(
            f"auth method {method_id!r} is a terminal method: the user runs the agent's own login; nothing was written"
        )
    return with_meta({"methodId": method_id}, meta)


def mode_params(state: SessionState, mode_id: str, meta: Meta | None) -> tuple[Params, Refusal]:
    """``session/set_mode``, refused if ``mode_id`` is not among the session's available modes."""
    modes = state.modes
    refusal = None
    if modes is None or all(mode.id != mode_id for mode in modes.available_modes):
        offered = [mode.id for mode in modes.available_modes] if modes is not None else []
        refusal = f"mode {mode_id!r} is not among the session's available modes {offered}"
    return with_meta({"sessionId": state.session_id, "modeId": mode_id}, meta), refusal


def model_params(state: SessionState, model_id: str, meta: Meta | None) -> tuple[Params, Refusal]:
    """The legacy ``session/set_model``, refused if the session does not list ``model_id`` in its models."""
    models = state.models
    refusal = None
    if models is None or all(model.model_id != model_id for model in models.available_models):
        refusal = f"the session has no model config option and does not list model {model_id!r} in its models"
    return with_meta({"sessionId": state.session_id, "modelId": model_id}, meta), refusal


def config_params(state: SessionState, config_id: str, value: str | bool, meta: Meta | None) -> tuple[Params, Refusal]:
    """``session/set_config_option``: a value id for a select option, a bool for a boolean one; refused if the
    session's options do not allow the value.

    Raises:
        TypeError: ``value`` is neither a str nor a bool.
    """
    if not isinstance(value, str | bool):
        raise TypeError(f"a config value is a value id (str) or a bool, not {type(value).__name__}")
    params: Params = {"sessionId": state.session_id, "configId": config_id}
    if isinstance(value, bool):
        params["type"] = "boolean"
    params["value"] = value
    return with_meta(params, meta), _config_refusal(state.option(config_id), config_id, value)


def _config_refusal(option: ConfigOption | None, config_id: str, value: str | bool) -> Refusal:
    if option is None:
        return f"the session has no config option {config_id!r}"
    if option.type == "select":
        if isinstance(value, bool) or value not in option.values:
            return f"config option {config_id!r} does not offer the value {value!r} (it offers {list(option.values)})"
        return None
    if option.type == "boolean":
        return None if isinstance(value, bool) else f"config option {config_id!r} is boolean, not {value!r}"
    return f"config option {config_id!r} is of a type tinyacp does not know ({option.type!r})"


def prompt_params(
    agent: Initialize | None, session_id: str, content: str | Sequence[PromptContent], meta: Meta | None
) -> Params:
    """``session/prompt``: the content as blocks, each allowed by the agent's prompt capabilities.

    Raises:
        UnsupportedContent: a block needs a capability the agent did not advertise.
        TypeError: ``content`` is neither a str nor a sequence of content blocks.
    """
    blocks = prompt_blocks(content)
    capabilities = agent.prompt_capabilities if agent is not None else PromptCapabilities()
    for block in blocks:
        needed = required_capability(block)
        if needed is not None and not capabilities.allows(needed):
            raise UnsupportedContent(type(block).__name__, needed)
    return with_meta({"sessionId": session_id, "prompt": wire_blocks(blocks)}, meta)
