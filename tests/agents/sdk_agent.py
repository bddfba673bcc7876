"""An ACP agent built on the official Python SDK (``agent-client-protocol``, ``import acp``).

No one here wrote its protocol code, so it keeps tinyacp honest about what a third-party peer sends. Run it as
``python tests/agents/sdk_agent.py [--chunks N]``. On each prompt it streams, for the prompt's session:

* ``--chunks`` agent_message_chunk updates, ``chunk 1 of N`` ... ``chunk N of N``;
* a ``tool_call`` (``tool_1``, ``tool_2``, ... per agent; kind ``edit``, status ``pending``);
* a ``session/request_permission`` request (the SDK numbers its requests from 0) whose options use
  claude's ids: ``allow`` (allow_once), ``allow_always`` (allow_always), ``reject`` (reject_once) and
  ``reject_always`` (reject_always);
* a ``tool_call_update``: ``completed`` if an allow option was chosen, else ``failed``;
* a final agent_message_chunk ``permission: <optionId>`` or ``permission: cancelled``;

and answers ``end_turn``, or ``cancelled`` when a ``session/cancel`` for the session arrived during the turn.
It stops waiting for the permission answer as soon as the turn is cancelled.

Beyond the turn, with the SDK's own models: auth method ``sdk-login`` (``authenticate`` with another id is
``-32000``), ``session/load`` (replays ``earlier`` as a user_message_chunk; ``sdk-missing`` is ``-32002``),
``session/list``, modes ``ask``/``code`` and a ``model``
config option (``sdk-small``/``sdk-large``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    AuthenticateResponse,
    Implementation,
    ListSessionsResponse,
    LoadSessionResponse,
    PermissionOption,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallStatus,
    ToolCallUpdate,
)

OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
]
_ALLOWING = {option.option_id for option in OPTIONS if option.kind.startswith("allow")}
MODES = {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}
MODELS = [{"value": "sdk-small", "name": "Small"}, {"value": "sdk-large", "name": "Large"}]


def _model_option(current: str) -> dict[str, Any]:
    return {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": current,
        "options": MODELS,
    }


class SdkAgent:
    """The methods of ``acp.Agent`` that a prompt turn needs; the SDK answers -32601 to the others."""

    def __init__(self, chunks: int) -> None:
        self._chunks = chunks
        self._client: Client | None = None
        self._session_numbers = itertools.count(1)
        self._tool_numbers = itertools.count(1)
        # One event per session, set by session/cancel while a turn of that session runs.
        self._cancelled: dict[str, asyncio.Event] = {}
        self._cwds: dict[str, str] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        capabilities = {"loadSession": True, "sessionCapabilities": {"list": {}}}
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities.model_validate(capabilities),
            auth_methods=[{"id": "sdk-login", "name": "Log in"}],  # type: ignore[list-item]
            agent_info=Implementation(name="tinyacp-sdk-test-agent", version="0.1.0"),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        if method_id != "sdk-login":
            raise RequestError.auth_required()
        return AuthenticateResponse()

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"sdk-{next(self._session_numbers)}"
        self._cancelled[session_id] = asyncio.Event()
        self._cwds[session_id] = cwd
        return NewSessionResponse.model_validate(
            {"sessionId": session_id, "modes": MODES, "configOptions": [_model_option("sdk-small")]}
        )

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        assert self._client is not None
        if session_id == "sdk-missing":
            raise RequestError.resource_not_found(session_id)
        await self._client.session_update(session_id, update_user_message_text("earlier"))
        self._cwds[session_id] = cwd
        return LoadSessionResponse.model_validate({"modes": MODES})

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        sessions = [{"sessionId": sid, "cwd": where} for sid, where in self._cwds.items() if cwd in (None, where)]
        return ListSessionsResponse.model_validate({"sessions": sessions})

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        return SetSessionConfigOptionResponse.model_validate({"configOptions": [_model_option(str(value))]})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if event := self._cancelled.get(session_id):
            event.set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        cancelled = self._cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()
        try:
            return await self._turn(session_id, cancelled)
        except ConnectionError:
            # The client closed our stdin mid-turn: nobody is left to read an answer or a traceback.
            return PromptResponse(stop_reason="cancelled")

    async def _turn(self, session_id: str, cancelled: asyncio.Event) -> PromptResponse:
        client = self._client
        assert client is not None, "on_connect is called before any request"
        for number in range(1, self._chunks + 1):
            if cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            await client.session_update(session_id, update_agent_message_text(f"chunk {number} of {self._chunks}"))

        tool_call_id = f"tool_{next(self._tool_numbers)}"
        title = "Write notes.txt"
        await client.session_update(session_id, start_tool_call(tool_call_id, title, kind="edit", status="pending"))
        tool_call = ToolCallUpdate(tool_call_id=tool_call_id, title=title, kind="edit", status="pending")
        choice = await self._ask(session_id, tool_call)
        status: ToolCallStatus = "completed" if choice in _ALLOWING else "failed"
        await client.session_update(session_id, update_tool_call(tool_call_id, status=status))
        await client.session_update(session_id, update_agent_message_text(f"permission: {choice}"))
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def _ask(self, session_id: str, tool_call: ToolCallUpdate) -> str:
        """The chosen option id, or "cancelled" (the outcome, or session/cancel before any answer)."""
        assert self._client is not None
        asking = asyncio.ensure_future(
            self._client.request_permission(session_id=session_id, tool_call=tool_call, options=OPTIONS)
        )
        cancelling = asyncio.ensure_future(self._cancelled[session_id].wait())
        done, _ = await asyncio.wait({asking, cancelling}, return_when=asyncio.FIRST_COMPLETED)
        cancelling.cancel()
        if asking not in done:
            # The SDK drops its pending entry when the request task is cancelled; a late answer is ignored.
            asking.cancel()
            return "cancelled"
        outcome = asking.result().outcome
        return outcome.option_id if isinstance(outcome, AllowedOutcome) else "cancelled"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=3, metavar="N", help="message chunks before the tool call")
    args = parser.parse_args()
    # A cast: SdkAgent implements only part of the `Agent` protocol, on purpose.
    asyncio.run(run_agent(cast("Agent", SdkAgent(args.chunks))))


if __name__ == "__main__":
    main()
