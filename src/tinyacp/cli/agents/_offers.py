"""What an agent's answer to ``initialize`` says it offers, as ``tinyacp probe`` and ``tinyacp agents --check``
both report it: who the agent is, its protocol version, capabilities, auth methods (and what each needs), session
capabilities and the newer calls (see https://agentclientprotocol.com/protocol/initialization).

The report is built from the decoded answer and from the raw line (the newer capabilities and what an auth
method needs are read from the JSON as the agent sent it); text from the agent is left as it came, and each
printer sanitizes it.
"""

from __future__ import annotations

import json
from typing import Any

from ..._messages import Initialize
from ..._observer import BaseObserver
from ..._records import AgentMessage, MessageKind
from ..._startup_watch import StartupWatch
from ..shared._display import one_line
from ..shared._features import newer_offers
from ._resolve import AgentSpec
from ._session import auth_needs, raw_auth_methods

__all__ = [
    "InitializeAnswer",
    "auth_method_line",
    "initialize_report",
    "loads",
    "newer_offered",
    "session_capability_names",
    "yes",
]


class InitializeAnswer(BaseObserver):
    """Keeps the agent's raw answer to ``initialize`` and watches its first line (a program that does not speak
    ACP is stopped there); records nothing else."""

    raw: bytes = b""

    def __init__(self) -> None:
        self.watch = StartupWatch()

    def on_message(self, message: AgentMessage) -> None:
        """Keep the answer to ``initialize``; refuse a first line that is not JSON-RPC.

        Raises:
            NotAcp: the agent's first line is not JSON-RPC.
        """
        if message.kind == MessageKind.RESPONSE and message.method == "initialize":
            self.raw = message.raw
        self.watch.seen(message.raw, message)


def loads(raw: bytes) -> dict[str, Any]:
    """A raw JSON line as an object; an empty one when it is not a JSON object."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def session_capability_names(capabilities: dict[str, Any]) -> list[str]:
    """The session capabilities an agent advertises (``list``, ``resume``, ``fork``, …), by name."""
    return [name for name, value in capabilities.items() if value is not None]


def initialize_report(agent: AgentSpec, init: Initialize, raw: bytes) -> dict[str, Any]:
    """What the agent's answer to ``initialize`` offers, as plain JSON values with snake_case keys.

    Args:
        agent: the agent's entry (what its auth methods need is read with it).
        init: the decoded answer.
        raw: the answer's line as the agent sent it.
    """
    info = init.agent_info
    caps = init.agent_capabilities
    methods = raw_auth_methods(raw)
    result = loads(raw).get("result")
    return {
        "agent": {"name": info.name, "version": info.version, "title": info.title} if info else None,
        "protocol_version": init.protocol_version,
        "prompt_capabilities": {
            "image": caps.prompt_capabilities.image,
            "audio": caps.prompt_capabilities.audio,
            "embedded_context": caps.prompt_capabilities.embedded_context,
        },
        "mcp_capabilities": {"http": caps.mcp_capabilities.http, "sse": caps.mcp_capabilities.sse},
        "load_session": caps.load_session,
        "session_capabilities": caps.session_capabilities,
        "auth_methods": [
            {
                "id": method.id,
                "name": method.name,
                "description": method.description,
                "type": method.type,
                "needs": auth_needs(method, agent, methods),
            }
            for method in init.auth_methods
        ],
        "newer": newer_offers(result),
        "initialize": result,
    }


def newer_offered(newer: dict[str, Any]) -> list[str]:
    """The newer calls an agent offers (a report's ``newer``), in words: ``fork``, ``system prompt (append,
    override)``, ``session titles``, ``providers``."""
    offered = []
    if newer["fork"]:
        offered.append("fork")
    if newer["system_prompt"]:
        offered.append(f"system prompt ({', '.join(newer['system_prompt'])})")
    if newer["title"]:
        offered.append("session titles")
    if newer["providers"]:
        offered.append("providers")
    return offered


def auth_method_line(method: dict[str, Any]) -> str:
    """One auth method of a report, sanitized: its id, name and what it needs."""
    return f"{one_line(method['id'], 60)} ({one_line(method['name'], 60)}): {one_line(method['needs'], 200)}"


def yes(value: object) -> str:
    """``yes`` or ``no``."""
    return "yes" if value else "no"
