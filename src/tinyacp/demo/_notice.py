"""``with-notice``: a ``notice`` update before the plan, warning "Model fallback" (opt-in ``session.notices``);
without the opt-in, the same text heads the reply, ``**Model fallback:** ...``, as Claude's adapter writes it."""

from __future__ import annotations

from ._wire import chunk

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._turn import Turn
    from ._wire import JsonObject

FALLBACK_TITLE = "Model fallback"
FALLBACK_TEXT = "demo-large is overloaded; this turn uses demo-small."


def preface(agent: DemoAgent, turn: Turn) -> list[JsonObject]:
    """The notice, in the shape the client opted in to."""
    if "notices" in agent.features:
        notice = {"severity": "warning", "title": FALLBACK_TITLE, "description": FALLBACK_TEXT}
        return [{"sessionUpdate": "notice", **notice}]
    # As Claude's adapter does: the warning becomes part of the reply.
    return [chunk("agent_message_chunk", f"**{FALLBACK_TITLE}:** {FALLBACK_TEXT}\n\n")]
