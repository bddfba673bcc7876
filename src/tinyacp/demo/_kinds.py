"""The update kinds: ``--all-kinds`` (or the word ``all-kinds`` in the prompt) replaces the turn with one update of
each of the eleven v1 kinds, in schema order, and ``end_turn``, with no permission request."""

from __future__ import annotations

from ._wire import chunk
from ._words import ALL_KINDS_KEYWORD

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._wire import JsonObject


def updates(cwd: str, tool_call_id: str, text: str) -> list[JsonObject]:
    """One update of each v1 ``sessionUpdate`` kind, in the order the schema lists them."""
    return [
        chunk("user_message_chunk", text),
        chunk("agent_message_chunk", f"You said: {text}\nHere is one session update of every kind."),
        chunk("agent_thought_chunk", "Showing all eleven kinds."),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": f"Read files in {cwd}",
            "kind": "read",
            "status": "pending",
            "locations": [{"path": cwd}],
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "done"}}],
        },
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "Show every session update kind", "priority": "high", "status": "in_progress"}],
        },
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": ALL_KINDS_KEYWORD, "description": "Show one session update of every kind"},
            ],
        },
        {"sessionUpdate": "current_mode_update", "currentModeId": "default"},
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "id": "mode",
                    "name": "Mode",
                    "category": "mode",
                    "type": "select",
                    "currentValue": "default",
                    "options": [{"value": "default", "name": "Default"}],
                }
            ],
        },
        {"sessionUpdate": "session_info_update", "title": "tinyacp demo"},
        {
            "sessionUpdate": "usage_update",
            "used": len(text),
            "size": 200000,
            "cost": {"amount": 0, "currency": "USD"},
        },
    ]
