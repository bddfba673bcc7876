"""The session requests: ``initialize``, authentication, and the sessions' life (new, load, resume, fork, list,
close, delete, title, mode and config options). Each request is a function of the agent and the params, named in
`REQUESTS`; sessions are kept by ``_store.py``."""

from __future__ import annotations

import os

from tinyacp._version import __version__

from ._store import Session, now
from ._wire import AUTH_REQUIRED, INVALID_PARAMS, NOT_FOUND, RpcError, notification

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ._agent import DemoAgent
    from ._wire import JsonObject

API_KEY_ENV = "TINYACP_DEMO_API_KEY"

AUTH_METHODS: list[JsonObject] = [
    {"id": "demo-login", "name": "Demo login", "description": "Always succeeds."},
    {
        "id": "demo-api-key",
        "name": "Demo API key",
        "description": f"Uses ${API_KEY_ENV} from the agent's environment, or a key sent as _meta.api-key.",
    },
]
MODES: list[JsonObject] = [
    {"id": "default", "name": "Default", "description": "Asks before reading files."},
    {"id": "auto", "name": "Auto", "description": "Reads files without asking."},
]
MODELS: list[JsonObject] = [
    {"value": "demo-small", "name": "Demo small"},
    {"value": "demo-large", "name": "Demo large"},
]
PAGE_SIZE = 20


def initialize(agent: DemoAgent, params: JsonObject) -> JsonObject:
    version = params.get("protocolVersion")
    if type(version) is not int:
        raise RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be an integer")
    agent.features = client_features(params.get("clientCapabilities"))
    # We speak version 1 only; the client disconnects if it cannot.
    return {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                "additionalDirectories": {},
                "systemPrompt": {"mode": {"override": {}}},
                "fork": {},
                "title": {},
            },
            "auth": {"logout": {}},
            "providers": {},
        },
        "authMethods": AUTH_METHODS,
        "agentInfo": {"name": "tinyacp-demo", "title": "tinyacp demo agent", "version": __version__},
    }


def authenticate(agent: DemoAgent, params: JsonObject) -> JsonObject:
    method = params.get("methodId")
    if method == "demo-api-key":
        meta = params.get("_meta")
        sent = meta.get("api-key") if isinstance(meta, dict) else None
        known = os.environ.get(API_KEY_ENV) or None
        if not (sent or known):
            raise RpcError(AUTH_REQUIRED, f"Authentication required: set {API_KEY_ENV} or send _meta.api-key")
        if sent and known and sent != known:
            raise RpcError(AUTH_REQUIRED, "Authentication required: the key does not match")
    elif method != "demo-login":
        raise RpcError(INVALID_PARAMS, "Invalid params: unknown methodId")
    agent.authenticated = True
    return {}


def logout(agent: DemoAgent, params: JsonObject) -> JsonObject:
    agent.authenticated = False
    return {}


def check_auth(agent: DemoAgent) -> None:
    if agent.options.require_auth and not agent.authenticated:
        raise RpcError(AUTH_REQUIRED, "Authentication required")


def new_session(agent: DemoAgent, params: JsonObject) -> JsonObject:
    check_auth(agent)
    cwd = cwd_of(params)
    if not isinstance(params.get("mcpServers"), list):
        raise RpcError(INVALID_PARAMS, "Invalid params: mcpServers must be a list")
    number = agent.store.claim(agent.next_session)
    agent.next_session = number + 1
    session = Session(f"demo-{number}", cwd, updated_at=now())
    open_session(agent, session, params)
    return {"sessionId": session.session_id, **setup(session)}


def load_session(agent: DemoAgent, params: JsonObject) -> JsonObject:
    session = stored(agent, params)
    open_session(agent, session, params)
    for update in session.history:
        agent.send(notification(session.session_id, update))
    return setup(session)


def resume_session(agent: DemoAgent, params: JsonObject) -> JsonObject:
    session = stored(agent, params)
    open_session(agent, session, params)
    return setup(session)


def stored(agent: DemoAgent, params: JsonObject) -> Session:
    """The session a load or resume names, from memory or the state directory; its cwd must match."""
    check_auth(agent)
    cwd = cwd_of(params)
    session = known(agent, params)
    if session.cwd != cwd:
        raise RpcError(INVALID_PARAMS, "Invalid params: cwd differs from the session's")
    return session


def open_session(agent: DemoAgent, session: Session, params: JsonObject, *, inherit: bool = False) -> None:
    """Checks the directories and the system prompt, keeps the session in memory and saves it.

    Without a ``systemPrompt`` a load or resume gets the default instructions, a fork (``inherit``) the source's.
    """
    extra = params.get("additionalDirectories", [])
    if not isinstance(extra, list) or not all(isinstance(p, str) and os.path.isabs(p) for p in extra):
        raise RpcError(INVALID_PARAMS, "Invalid params: additionalDirectories must be absolute paths")
    system = params.get("systemPrompt")
    if system is not None:
        session.system_prompt_mode, session.system_prompt = system_prompt_of(system)
    elif not inherit:
        session.system_prompt = None
    agent.sessions[session.session_id] = session
    agent.save(session)


def fork_session(agent: DemoAgent, params: JsonObject) -> JsonObject:
    """A new session with the source's history, mode, model and context; the source is left as it was."""
    check_auth(agent)
    source = known(agent, params)
    cwd = cwd_of(params)
    if not isinstance(params.get("mcpServers", []), list):
        raise RpcError(INVALID_PARAMS, "Invalid params: mcpServers must be a list")
    number = agent.store.claim(agent.next_session)
    agent.next_session = number + 1
    session = Session(
        f"demo-{number}",
        cwd,
        title=source.title,
        updated_at=now(),
        mode=source.mode,
        model=source.model,
        used=source.used,
        history=list(source.history),
        system_prompt=source.system_prompt,
        system_prompt_mode=source.system_prompt_mode,
    )
    open_session(agent, session, params, inherit=True)
    return {"sessionId": session.session_id, **setup(session)}


def set_title(agent: DemoAgent, params: JsonObject) -> JsonObject:
    """``session/set_title`` (unstable): any stored session; reported as ``session_info_update`` to an open one."""
    check_auth(agent)
    session = known(agent, params)
    title = params.get("title")
    if not isinstance(title, str) or not title.strip():
        raise RpcError(INVALID_PARAMS, "Invalid params: title must be a non-empty string")
    session.title = title.strip()[:200]
    session.updated_at = now()
    if session.session_id in agent.sessions:
        update = {"sessionUpdate": "session_info_update", "title": session.title, "updatedAt": session.updated_at}
        agent.send(notification(session.session_id, update))
    agent.save(session)
    return {"title": session.title}


def list_sessions(agent: DemoAgent, params: JsonObject) -> JsonObject:
    check_auth(agent)
    cwd = params.get("cwd")
    cursor = params.get("cursor")
    start = 0
    if cursor is not None:
        if not isinstance(cursor, str) or not cursor.isdigit():
            raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
        start = int(cursor)
    sessions = sorted(agent.store.all(), key=lambda s: (s.updated_at, s.session_id), reverse=True)
    matching = [s for s in sessions if cwd is None or s.cwd == cwd]
    page = matching[start : start + PAGE_SIZE]
    result: JsonObject = {"sessions": [info(session) for session in page]}
    if start + PAGE_SIZE < len(matching):
        result["nextCursor"] = str(start + PAGE_SIZE)
    return result


def close_session(agent: DemoAgent, params: JsonObject) -> JsonObject:
    session = known(agent, params)
    agent.sessions.pop(session.session_id, None)
    return {}


def delete_session(agent: DemoAgent, params: JsonObject) -> JsonObject:
    session = known(agent, params)
    agent.sessions.pop(session.session_id, None)
    agent.store.delete(session.session_id)
    return {}


def known(agent: DemoAgent, params: JsonObject) -> Session:
    """The session named, from memory or the state directory."""
    session_id = params.get("sessionId")
    session = agent.sessions.get(session_id) if isinstance(session_id, str) else None
    if session is None and isinstance(session_id, str):
        session = agent.store.load(session_id)
    if session is None:
        raise RpcError(NOT_FOUND, "Resource not found: unknown session")
    return session


def active(agent: DemoAgent, params: JsonObject) -> Session:
    """A session opened, loaded or resumed in this process."""
    session_id = params.get("sessionId")
    session = agent.sessions.get(session_id) if isinstance(session_id, str) else None
    if session is None:
        raise RpcError(NOT_FOUND, "Resource not found: unknown session (load or resume it first)")
    return session


def set_mode(agent: DemoAgent, params: JsonObject) -> JsonObject:
    session = active(agent, params)
    switch(agent, session, "mode", params.get("modeId"))
    return {}


def set_config_option(agent: DemoAgent, params: JsonObject) -> JsonObject:
    session = active(agent, params)
    config_id = params.get("configId")
    if config_id not in ("mode", "model") or params.get("type", "select") != "select":
        raise RpcError(INVALID_PARAMS, "Invalid params: unknown configId")
    switch(agent, session, config_id, params.get("value"), report_options=False)
    return {"configOptions": config_options(session)}


def switch(agent: DemoAgent, session: Session, what: str, value: Any, *, report_options: bool = True) -> None:
    """Set the mode or the model, and report it before the answer."""
    allowed = [mode["id"] for mode in MODES] if what == "mode" else [model["value"] for model in MODELS]
    if value not in allowed:
        raise RpcError(INVALID_PARAMS, f"Invalid params: unknown {what}")
    if what == "mode":
        session.mode = value
        agent.send(notification(session.session_id, {"sessionUpdate": "current_mode_update", "currentModeId": value}))
    else:
        session.model = value
    if report_options:
        update = {"sessionUpdate": "config_option_update", "configOptions": config_options(session)}
        agent.send(notification(session.session_id, update))
    agent.save(session)


def cwd_of(params: JsonObject) -> str:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise RpcError(INVALID_PARAMS, "Invalid params: cwd must be an absolute path")
    return cwd


def system_prompt_of(value: Any) -> tuple[str, str]:
    """(mode, text) of a ``systemPrompt``: ``append`` or ``override`` (both advertised), with its text blocks."""
    blocks = value.get("content") if isinstance(value, dict) else None
    mode = value.get("mode") if isinstance(value, dict) else None
    if not isinstance(blocks, list) or mode not in ("append", "override"):
        raise RpcError(INVALID_PARAMS, "Invalid params: systemPrompt must be an append or override of content blocks")
    return mode, "".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


def client_features(capabilities: Any) -> set[str]:
    """What ``initialize``'s ``clientCapabilities`` opt in to, read as the adapters read it: an object (``{}``
    included) opts in; absent, null or anything else does not. Names: ``notices``, ``compaction``, ``plan``,
    ``subagents``, ``elicitation.form``, ``elicitation.url``; and the services a client offers when true:
    ``fs.readTextFile``, ``fs.writeTextFile``, ``terminal``."""
    if not isinstance(capabilities, dict):
        return set()
    session, elicitation = capabilities.get("session"), capabilities.get("elicitation")
    found = {name for name in ("plan", "subagents") if isinstance(capabilities.get(name), dict)}
    if isinstance(session, dict):
        found.update(name for name in ("notices", "compaction") if isinstance(session.get(name), dict))
    if isinstance(elicitation, dict):
        found.update(f"elicitation.{mode}" for mode in ("form", "url") if isinstance(elicitation.get(mode), dict))
    fs = capabilities.get("fs")
    if isinstance(fs, dict):
        found.update(f"fs.{name}" for name in ("readTextFile", "writeTextFile") if fs.get(name) is True)
    if capabilities.get("terminal") is True:
        found.add("terminal")
    return found


def config_options(session: Session) -> list[JsonObject]:
    mode_values = [{"value": mode["id"], "name": mode["name"]} for mode in MODES]
    return [
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": session.mode,
            "options": mode_values,
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": session.model,
            "options": MODELS,
        },
    ]


def setup(session: Session) -> JsonObject:
    """The modes and config options of a session answer."""
    return {
        "modes": {"currentModeId": session.mode, "availableModes": MODES},
        "configOptions": config_options(session),
    }


def info(session: Session) -> JsonObject:
    return {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "title": session.title,
        "updatedAt": session.updated_at,
    }


REQUESTS: dict[str, Callable[[DemoAgent, JsonObject], JsonObject]] = {
    "initialize": initialize,
    "authenticate": authenticate,
    "logout": logout,
    "session/new": new_session,
    "session/load": load_session,
    "session/resume": resume_session,
    "session/list": list_sessions,
    "session/close": close_session,
    "session/delete": delete_session,
    "session/set_mode": set_mode,
    "session/set_config_option": set_config_option,
    "session/fork": fork_session,
    "session/set_title": set_title,
}
