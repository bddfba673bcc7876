"""The newer parts of ACP on the command's side: what the command opts in to, what an agent offers, and the
permission policy of the command's flags (tool names among them).

The command shows everything the opt-ins bring (notices on stderr, compaction as a status line, the plan by id,
child sessions under their names, questions asked on the terminal), so it switches all five on; see
https://agentclientprotocol.com/protocol/initialization#client-capabilities. ``tinyacp probe`` reads, from the
agent's answer to ``initialize``, which of the newer calls the agent offers.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from ..._client import Client
from ..._errors import TinyAcpError
from ..._features import ClientFeatures
from ..._permissions import PermissionPolicy, has_rules

__all__ = ["COMMAND_FEATURES", "agent_policy", "newer_offers", "permission_policy", "providers_of"]

COMMAND_FEATURES = ClientFeatures(notices=True, compaction=True, plan_operations=True, subagents=True, elicitation=True)
"""What ``prompt``, ``chat``, ``batch`` and ``probe`` advertise in ``initialize``."""


def newer_offers(initialize_result: Any) -> dict[str, Any]:
    """What the agent offers of the newer calls, from its ``initialize`` result as it sent it (decoded JSON):
    ``fork``, ``system_prompt`` (the modes: ``append``, and ``override`` when advertised the way the schema
    says, ``sessionCapabilities.systemPrompt.mode.override``), ``title`` (``session/set_title``) and
    ``providers`` (``providers/list``, ``/set``, ``/disable``); and what the command opts in to."""
    result = initialize_result if isinstance(initialize_result, dict) else {}
    capabilities = _object(result.get("agentCapabilities"))
    session = _object(capabilities.get("sessionCapabilities"))
    system = session.get("systemPrompt")
    modes: list[str] = []
    if isinstance(system, dict):
        modes.append("append")
        if isinstance(_object(system.get("mode")).get("override"), dict):
            modes.append("override")
    features = COMMAND_FEATURES
    opted = {
        "notices": features.notices,
        "compaction": features.compaction,
        "plan_operations": features.plan_operations,
        "subagents": features.subagents,
        "elicitation": features.elicitation,
    }
    return {
        "fork": isinstance(session.get("fork"), dict),
        "system_prompt": modes,
        "title": isinstance(session.get("title"), dict),
        "providers": isinstance(capabilities.get("providers"), dict),
        "opted_in": [name for name, on in opted.items() if on],
    }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def permission_policy(
    args: argparse.Namespace, allow_tools: Iterable[str] = (), deny_tools: Iterable[str] = ()
) -> PermissionPolicy:
    """The policy of ``--allow-tool``, ``--deny-tool``, ``--allow-kind``, ``--allow-title`` and ``--yes``, with the
    tools the agent's entry in ``config.toml`` allows and denies added to those of the flags."""
    return PermissionPolicy(
        args.allow_kind,
        args.allow_title,
        tools=[*allow_tools, *args.allow_tool],
        deny_tools=[*deny_tools, *args.deny_tool],
        allow_all=args.yes,
    )


def agent_policy(
    args: argparse.Namespace, name: str, allow_tools: Iterable[str], deny_tools: Iterable[str], notes: Iterable[str]
) -> tuple[PermissionPolicy, list[str]]:
    """The run's policy (:func:`permission_policy`, with the tools the agent's entry allows and denies), and the
    agent's behaviour notes (its entry's ``notes``) to say with it, one line each: what it does that a rule does
    not decide. No note without a rule: then every request is rejected, and the agent's own habits are its own."""
    policy = permission_policy(args, allow_tools, deny_tools)
    return policy, [f"note on {name}: {note}" for note in notes] if has_rules(policy) else []


def providers_of(client: Client, timeout: float | None) -> list[dict[str, Any]] | str:
    """The agent's providers (``providers/list``, unstable): each one's id, the API types it takes, whether it
    must be configured, and where it points now (``api_type`` and ``base_url``, or None when disabled); or why
    they could not be listed, in words."""
    try:
        answer = client.request("providers/list", timeout=timeout)
    except TinyAcpError as exc:
        return f"providers/list failed: {exc}"
    listed = answer.get("providers") if isinstance(answer, dict) else None
    if not isinstance(listed, list):
        return "providers/list answered without a list of providers"
    found = []
    for item in listed:
        if not isinstance(item, dict) or not isinstance(item.get("providerId"), str):
            continue
        # Each field read for what it must be (an unstable method: an agent may answer in any shape); a field of
        # another type counts as left out, so the report's types hold whatever the agent said.
        current = _object(item.get("current"))
        supported = item.get("supported")
        kinds = [kind for kind in supported if isinstance(kind, str)] if isinstance(supported, list) else []
        found.append(
            {
                "id": item["providerId"],
                "supported": kinds,
                "required": item.get("required") is True,
                "current": {"api_type": _string(current.get("apiType")), "base_url": _string(current.get("baseUrl"))}
                if current
                else None,
            }
        )
    return found
