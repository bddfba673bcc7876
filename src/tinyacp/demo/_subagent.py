"""``with-subagent``: a child session ``<id>.sub-<n>`` does the reading (opt-in ``subagents``). A
``subagent_update`` announces it (running) before any of its traffic, a ``session_message`` gives it the task, the
child's own updates and permission request come under its session id, its answer comes back as
``session_message`` and ``session_message_chunk``, and a ``subagent_update`` reports it idle. A cancel of the
parent cancels the child (``_turn.end_cancelled``). Without the opt-in, the ordinary turn."""

from __future__ import annotations

from ._tools import summary, use_tool
from ._wire import child_state, chunk, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._tools import Listing
    from ._turn import Turn
    from ._wire import JsonObject

NEEDS = "subagents"
"""Without the opt-in, the ordinary turn."""
CHILD_TITLE = "File reader"


def work(agent: DemoAgent, turn: Turn) -> Listing | None:
    """A child session reads the files, asking its own permission, and reports back.

    Returns the child's listing (refused if it was not allowed), or None if the turn got cancelled.
    """
    parent, cwd = turn.session.session_id, turn.session.cwd
    child = f"{parent}.sub-{agent.count('child')}"
    task, report = f"msg-{agent.count('message')}", f"msg-{agent.count('message')}"
    announce = {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "title": CHILD_TITLE,
        "description": f"Lists the files in {cwd}",
        "state": {"state": "running"},
    }
    ask = {
        "sessionUpdate": "session_message",
        "messageId": task,
        "senderSessionId": parent,
        "recipientSessionId": child,
        "content": [text(f"List the files in {cwd}.")],
    }
    if not agent.emit_all(turn, [announce, ask]):
        return None
    if not agent.emit(turn, chunk("agent_thought_chunk", f"I will list the files in {cwd}."), child):
        return None
    listing = use_tool(agent, turn, child, "Read")
    if listing is None:
        return None
    answer = f"I was not allowed to read the files in {cwd}.\n" if listing.refused else summary(cwd, listing)
    if not agent.emit(turn, chunk("agent_message_chunk", answer), child):
        return None
    back: list[JsonObject] = [
        {
            "sessionUpdate": "session_message",
            "messageId": report,
            "senderSessionId": child,
            "recipientSessionId": parent,
        },
        {"sessionUpdate": "session_message_chunk", "messageId": report, "content": text(answer)},
        child_state(child, "end_turn"),
    ]
    turn.notes.append(f'My helper "{CHILD_TITLE}" did the reading.\n')
    return listing if agent.emit_all(turn, back) else None
