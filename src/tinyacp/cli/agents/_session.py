"""Opening the session the command runs in: logging in, continuing an earlier session, the agent's settings.

- **Login.** ``--auth METHOD`` sends ``authenticate`` after ``initialize``. Without it, when the agent answers
  ``session/new`` (or a load or resume) with *authentication required*, the command logs in by itself only with a
  method that takes its key from the environment and whose variables are all set: a method the agent marks as
  an environment-variable one (``type: "env_var"``), or the key method a built-in agent names (the Codex
  adapter's ``api-key`` with ``OPENAI_API_KEY``). It says so on stderr. Never before the agent asks: a person
  logged in another way (a ChatGPT subscription) keeps that login.
- **Continuing.** ``--session ID`` (or ``--continue``: the most recent session of the agent in the directory)
  uses ``session/resume`` when the agent offers it, else ``session/load``; never a new session in their place.
  ``--fork ID`` (and ``/fork`` in ``chat``) forks the session with ``session/fork`` and works in the fork; an agent
  that does not offer it is refused before anything is sent.
- **Settings.** ``--mode``, ``--model`` and ``--set KEY=VALUE`` are applied before the first prompt; what the
  agent does not offer is refused, naming what it does offer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._client import Client
from ..._errors import AuthRequired, NotAdvertised, SessionNotFound
from ..._messages import AnyMcpServer, AuthMethod, Initialize, Session, SessionState, SystemPrompt
from ..shared._display import one_line
from ..shared._exit import SettingUnavailable
from ..shared._index import SessionIndex
from ._resolve import AgentSpec

__all__ = [
    "SessionPlan",
    "apply_settings",
    "auth_needs",
    "fork_session",
    "login_method",
    "offered_lines",
    "open_session",
    "set_one",
]


@dataclass(frozen=True)
class SessionPlan:
    """How to open the session and what to set in it."""

    cwd: Path
    mcp_servers: tuple[AnyMcpServer, ...] = ()
    auth: str | None = None
    session_id: str | None = None
    """``--session ID``: continue this session."""
    continue_last: bool = False
    """``--continue``: continue the most recent session of this agent in ``cwd``."""
    fork: str | None = None
    """``--fork ID``: fork this session and work in the fork."""
    mode: str | None = None
    model: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    system_prompt: SystemPrompt | None = None


@dataclass(frozen=True)
class Opened:
    """The session the command runs in, and how it came to be."""

    session: Session
    how: str
    """``new``, ``resumed``, ``loaded`` or ``forked``."""
    replayed: int = 0


Say = Callable[[str], None]


def env_var_names(raw_method: Any) -> list[str] | None:
    """The variables an environment-variable auth method reads, from the method as the agent sent it (the
    experiment's ``varName`` or ``vars``); None for a method of another type."""
    if not isinstance(raw_method, dict) or raw_method.get("type") != "env_var":
        return None
    if isinstance(raw_method.get("varName"), str):
        return [raw_method["varName"]]
    names = []
    for var in raw_method.get("vars") or []:
        if isinstance(var, dict) and isinstance(var.get("name"), str) and not var.get("optional"):
            names.append(var["name"])
    return names


def raw_auth_methods(initialize_answer: bytes) -> dict[str, Any]:
    """The auth methods of the agent's raw ``initialize`` answer, by id, with every field it sent."""
    try:
        methods = json.loads(initialize_answer).get("result", {}).get("authMethods", [])
    except (ValueError, AttributeError):
        return {}
    if not isinstance(methods, list):
        return {}
    return {m["id"]: m for m in methods if isinstance(m, dict) and isinstance(m.get("id"), str)}


def login_method(
    init: Initialize, agent: AgentSpec, raw: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[str, list[str]] | None:
    """The method to log in with by itself, and the variables it reads: an environment-variable method whose
    variables are all set, else the agent's named key method when its variables are set; None if neither."""
    offered = {method.id for method in init.auth_methods}
    for method in init.auth_methods:
        names = env_var_names(raw.get(method.id))
        if names and all(env.get(name) for name in names):
            return method.id, names
    if agent.key_method in offered and agent.key_env and all(env.get(name) for name in agent.key_env):
        return agent.key_method, list(agent.key_env)
    return None


def auth_needs(method: AuthMethod, agent: AgentSpec, raw: Mapping[str, Any]) -> str:
    """What one auth method needs, in words: the variables it reads, or that it is a terminal login."""
    names = env_var_names(raw.get(method.id))
    if names:
        return "set " + ", ".join(names)
    if method.id == agent.key_method and agent.key_env:
        return "set " + ", ".join(agent.key_env)
    if method.type == "terminal":
        return "an interactive login in a terminal: " + (agent.login or "see the agent's documentation")
    return method.description or "the agent handles it"


def open_session(
    client: Client,
    init: Initialize,
    agent: AgentSpec,
    plan: SessionPlan,
    *,
    index: SessionIndex | None,
    raw_methods: Mapping[str, Any],
    say: Say,
    timeout: Callable[[], float | None],
) -> Opened:
    """Log in (``--auth``), then open the session: a new one, or the one to continue. On *authentication
    required*, log in by itself once when an environment method allows (saying so), and try again.

    Raises:
        SettingUnavailable: an auth method the agent does not offer, no earlier session to continue, an agent that
            can neither resume nor load, a system prompt it does not take.
        AuthRequired: the agent needs a login the command cannot do by itself.
        SessionNotFound: the session to continue is unknown to the agent.
        RequestError: the agent answered a call with another error.
        AgentError: the agent exited, timed out or broke the protocol, as the client's calls raise it.
        ObserverError: recording failed (the journal could not be written).
    """
    if plan.auth is not None:
        _authenticate(client, init, plan.auth, say=say, words=f"logging in with {plan.auth} (--auth)", timeout=timeout)
    try:
        return _open(client, init, agent, plan, index=index, timeout=timeout)
    except AuthRequired:
        if plan.auth is not None:
            raise
        found = login_method(init, agent, raw_methods, os.environ)
        if found is None:
            raise
        method, names = found
        words = f"logging in with {method}: {', '.join(names)} {'is' if len(names) == 1 else 'are'} set"
        _authenticate(client, init, method, say=say, words=words, timeout=timeout)
        return _open(client, init, agent, plan, index=index, timeout=timeout)


def _authenticate(
    client: Client, init: Initialize, method: str, *, say: Say, words: str, timeout: Callable[[], float | None]
) -> None:
    offered = [m.id for m in init.auth_methods]
    if method not in offered:
        raise SettingUnavailable(
            f"the agent offers no auth method {method!r} (it offers: {', '.join(offered) or 'none'})"
        )
    say(words)
    try:
        client.authenticate(method, timeout=timeout())
    except NotAdvertised as exc:
        raise SettingUnavailable(f"cannot log in with {method!r}: {exc}") from None


def _open(
    client: Client,
    init: Initialize,
    agent: AgentSpec,
    plan: SessionPlan,
    *,
    index: SessionIndex | None,
    timeout: Callable[[], float | None],
) -> Opened:
    target = plan.session_id
    if target is None and plan.continue_last:
        try:
            entry = index.latest(agent.key, plan.cwd) if index is not None else None
        except OSError as exc:
            raise SettingUnavailable(
                f"cannot read the index of sessions for --continue: {exc.filename}: {exc.strerror}"
            ) from None
        if entry is None:
            raise SettingUnavailable(
                f"no earlier session of {agent.name} in {plan.cwd} to continue (`tinyacp sessions` lists them; "
                "leave out --continue to start a new one)"
            )
        target = entry.session_id
    extras: dict[str, Any] = {"system_prompt": plan.system_prompt} if plan.system_prompt is not None else {}
    try:
        if plan.fork is not None:
            return Opened(fork_session(client, plan.fork, plan.cwd, plan.mcp_servers, timeout(), **extras), "forked")
        if target is None:
            return Opened(client.new_session(plan.cwd, plan.mcp_servers, timeout=timeout(), **extras), "new")
        if "resume" in init.agent_capabilities.session_capabilities:
            session = client.resume_session(target, plan.cwd, plan.mcp_servers, timeout=timeout(), **extras)
            return Opened(session, "resumed")
        if init.load_session:
            loaded = client.load_session(target, plan.cwd, plan.mcp_servers, timeout=timeout(), **extras)
            return Opened(loaded.session, "loaded", loaded.replayed_updates)
    except NotAdvertised as exc:
        raise SettingUnavailable(str(exc)) from None
    raise SettingUnavailable(
        f"{agent.name} can neither resume nor load a session (it advertises neither sessionCapabilities.resume nor "
        f"loadSession): session {target} cannot be continued, and no new session was started in its place"
    )


SESSIONS_HINT = "`tinyacp sessions --agent NAME` lists the agent's own"
"""Where to find a session the agent knows, said when it does not know the one asked for (fork or continue)."""


def fork_session(
    client: Client,
    session_id: str,
    cwd: Path,
    mcp_servers: tuple[AnyMcpServer, ...] = (),
    timeout: float | None = None,
    **extras: Any,
) -> Session:
    """``session/fork``, or why the agent cannot fork, in words.

    Raises:
        SettingUnavailable: the agent does not offer ``session/fork`` (nothing was sent), or a system prompt; or
            it does not know the session.
        RequestError, AgentError, ObserverError: as the call raises them.
    """
    try:
        return client.fork_session(session_id, cwd, mcp_servers, timeout=timeout, **extras)
    except NotAdvertised as exc:
        raise SettingUnavailable(f"cannot fork session {one_line(session_id, 80)}: {exc}") from None
    except SessionNotFound as exc:
        raise SettingUnavailable(
            f"cannot fork session {one_line(session_id, 80)}: the agent does not know it "
            f"({one_line(exc.message, 200)}; {SESSIONS_HINT})"
        ) from None


def apply_settings(client: Client, session_id: str, plan: SessionPlan, say: Say, timeout: float | None) -> None:
    """Set the mode, the model and the config options asked for, in that order.

    Raises:
        SettingUnavailable: the agent does not offer one of them (the message names what it offers).
    """
    if plan.mode is not None:
        set_one(client, session_id, "mode", plan.mode, say=say, timeout=timeout)
    if plan.model is not None:
        set_one(client, session_id, "model", plan.model, say=say, timeout=timeout)
    for key, value in plan.options.items():
        set_one(client, session_id, key, value, say=say, timeout=timeout, option=True)


def set_one(
    client: Client,
    session_id: str,
    what: str,
    value: str,
    *,
    say: Say,
    timeout: float | None,
    option: bool = False,
) -> None:
    """Set the mode (``what="mode"``), the model (``"model"``) or a config option (``option=True``).

    Raises:
        SettingUnavailable: the agent does not offer it (the message names what it offers).
    """
    state = client.session_state(session_id)
    try:
        if option:
            _set_option(client, session_id, state, what, value, timeout=timeout)
        elif what == "mode":
            client.set_mode(session_id, value, timeout=timeout)
        else:
            client.set_model(session_id, value, timeout=timeout)
    except NotAdvertised:
        raise SettingUnavailable(_not_offered(state, what, value, option)) from None
    say(f"{what}: {one_line(value, 80)}")


def _set_option(
    client: Client, session_id: str, state: SessionState, key: str, value: str, *, timeout: float | None
) -> None:
    found = state.option(key)
    if found is not None and found.type == "boolean":
        if value.lower() not in ("true", "false"):
            raise SettingUnavailable(f"config option {key!r} is true or false, not {value!r}")
        client.set_config_option(session_id, key, value.lower() == "true", timeout=timeout)
        return
    client.set_config_option(session_id, key, value, timeout=timeout)


def offered_lines(state: SessionState, what: str) -> list[str]:
    """The modes (``what="mode"``) or the models the session offers, the current one marked ``*``, with their
    names: what ``/mode`` and ``/model`` without an id show."""
    choices: list[tuple[str, str]] = []
    current: object = None
    if what == "mode" and state.modes is not None:
        choices = [(mode.id, mode.name) for mode in state.modes.available_modes]
        current = state.modes.current_mode_id
    elif what == "model" and (option := state.model_option()) is not None:
        choices = [(value, "") for value in option.values]
        current = option.current_value
    elif what == "model" and state.models is not None:
        choices = [(model.model_id, model.name) for model in state.models.available_models]
        current = state.models.current_model_id
    if not choices:
        return [f"the agent offers no {what} in this session"]
    width = max(len(one_line(choice, 40)) for choice, _ in choices)
    lines = [f"{what}s of this session (/{what} ID switches; * is the current one):"]
    for choice, name in choices:
        mark = "*" if choice == current else " "
        lines.append(f"  {mark} {one_line(choice, 40).ljust(width)}  {one_line(name, 60)}".rstrip())
    return lines


def _not_offered(state: SessionState, what: str, value: str, option: bool) -> str:
    if option:
        found = state.option(what)
        if found is None:
            ids = ", ".join(o.id for o in state.config_options) or "none"
            return f"the agent has no config option {what!r} (it offers: {ids})"
        values = ", ".join(found.values) or ("true, false" if found.type == "boolean" else "none")
        return f"config option {what!r} cannot be {value!r} (it takes: {values})"
    if what == "mode":
        modes = ", ".join(m.id for m in state.modes.available_modes) if state.modes else "none"
        return f"the agent offers no mode {value!r} (it offers: {modes})"
    model_option = state.model_option()
    if model_option is not None:
        models = ", ".join(model_option.values)
    elif state.models is not None:
        models = ", ".join(m.model_id for m in state.models.available_models)
    else:
        models = "none"
    return f"the agent offers no model {value!r} (it offers: {models or 'none'})"
