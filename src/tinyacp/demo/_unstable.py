"""The unstable provider methods (``providers/list``, ``providers/set``, ``providers/disable`` for the one provider
``demo``) and the extension method ``_tinyacp/echo``, named in `REQUESTS`."""

from __future__ import annotations

from ._wire import INVALID_PARAMS, RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ._agent import DemoAgent
    from ._wire import JsonObject

PROVIDER_PROTOCOLS = ["openai", "anthropic"]
ECHO_METHOD = "_tinyacp/echo"


def list_providers(agent: DemoAgent, params: JsonObject) -> JsonObject:
    providers = [
        {"providerId": name, "supported": PROVIDER_PROTOCOLS, "required": False, "current": current}
        for name, current in agent.providers.items()
    ]
    return {"providers": providers}


def set_provider(agent: DemoAgent, params: JsonObject) -> JsonObject:
    """``providers/set`` (unstable): points a provider at a base URL; its headers are taken and never shown."""
    name = _provider(agent, params)
    api_type, base_url = params.get("apiType"), params.get("baseUrl")
    if api_type not in PROVIDER_PROTOCOLS or not isinstance(base_url, str) or not base_url:
        raise RpcError(INVALID_PARAMS, "Invalid params: apiType must be openai or anthropic, with a baseUrl")
    agent.providers[name] = {"apiType": api_type, "baseUrl": base_url}
    return {}


def disable_provider(agent: DemoAgent, params: JsonObject) -> JsonObject:
    agent.providers[_provider(agent, params)] = None
    return {}


def _provider(agent: DemoAgent, params: JsonObject) -> str:
    name = params.get("providerId")
    if not isinstance(name, str) or name not in agent.providers:
        raise RpcError(INVALID_PARAMS, "Invalid params: unknown providerId")
    return name


def echo(agent: DemoAgent, params: JsonObject) -> JsonObject:
    """The extension method: the params back, and the extension notifications received so far."""
    return {"params": params, "notifications": list(agent.extension_notes)}


REQUESTS: dict[str, Callable[[DemoAgent, JsonObject], JsonObject]] = {
    "providers/list": list_providers,
    "providers/set": set_provider,
    "providers/disable": disable_provider,
    ECHO_METHOD: echo,
}
