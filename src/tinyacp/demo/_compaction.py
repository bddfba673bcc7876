"""``with-compaction``: the context is summed up and its usage drops, before the plan. ``compaction_update``
in_progress, two ``compaction_summary_chunk``, ``compaction_update`` completed with the summary (opt-in
``session.compaction``); without the opt-in, a ``tool_call`` named ``Compact`` says so."""

from __future__ import annotations

from ._wire import plural, text, tool_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._turn import Turn
    from ._wire import JsonObject


def preface(agent: DemoAgent, turn: Turn) -> list[JsonObject]:
    """The compaction's updates, in the shape the client opted in to; the session's usage shrinks at once."""
    session = turn.session
    prompts = [update["content"]["text"] for update in session.history[::2]]
    summary = f"{plural(len(prompts), 'earlier turn')} in {session.cwd}."
    if prompts:
        summary += f" The last prompt was: {prompts[-1][:80]}"
    session.used = len(summary) // 4 + 1
    if "compaction" not in agent.features:
        tool_call_id = agent.new_tool_call_id()
        done = tool_status(tool_call_id, "completed")
        done["content"] = [{"type": "content", "content": {"type": "text", "text": summary}}]
        call = {"toolCallId": tool_call_id, "title": "Compact the conversation", "name": "Compact"}
        return [{"sessionUpdate": "tool_call", **call, "kind": "other", "status": "in_progress"}, done]
    compaction_id = f"compaction-{agent.count('compaction')}"
    half = len(summary) // 2
    return [
        {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "in_progress"},
        *(
            {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id, "content": text(piece)}
            for piece in (summary[:half], summary[half:])
        ),
        {
            "sessionUpdate": "compaction_update",
            "compactionId": compaction_id,
            "status": "completed",
            "summary": [text(summary)],
        },
    ]
