"""What the client opts in to: the newer parts of ACP that an agent sends only to a client that asks for them.

A client says in ``initialize`` what it understands (its ``clientCapabilities``); agents then shape what they send
to it. Claude's and Codex's adapters, for one, put their warnings into the reply as message text unless the
client advertises ``session.notices``: an evaluation would then score "**Model fallback:** …" as the model's
answer. See https://agentclientprotocol.com/protocol/initialization#client-capabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._messages import CLIENT_CAPABILITIES

__all__ = ["ClientFeatures"]


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """Which newer parts of ACP the client advertises in ``initialize`` (``Options(features=...)``).

    Notices and compaction are on by default: with them on, an agent's warnings and its compaction progress
    arrive as their own updates (:class:`~tinyacp.Notice`, :class:`~tinyacp.CompactionUpdate`) instead of
    inside the reply, so ``PromptResult.text`` holds only the agent's reply.

    Args:
        notices: ``session.notices``: warnings come as ``notice`` updates, in ``PromptResult.notices``.
        compaction: ``session.compaction``: ``compaction_update`` and ``compaction_summary_chunk`` updates.
        plan_operations: ``plan``: ``plan_update`` and ``plan_removed`` updates instead of the whole ``plan``.
        subagents: ``subagents``: a child session's updates and permission requests arrive under its own
            session id during the parent's prompt (``PromptResult.subagents`` lists the children).
        elicitation: ``elicitation.form``: the agent may ask the user for input (``elicitation/create``),
            which the observer's ``on_elicitation`` answers (declined when it does not).
        elicitation_url: ``elicitation.url``: the agent may ask the user to open a link and say when it is done
            there (``elicitation/create`` in ``url`` mode, then its ``elicitation/complete``), answered by
            ``on_elicitation`` too. Switch it on only when someone can open the link.
    """

    notices: bool = True
    compaction: bool = True
    plan_operations: bool = False
    subagents: bool = False
    elicitation: bool = False
    elicitation_url: bool = False

    def __post_init__(self) -> None:
        for name in ("notices", "compaction", "plan_operations", "subagents", "elicitation", "elicitation_url"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"ClientFeatures.{name} must be a bool, not {getattr(self, name)!r}")

    def capabilities(self) -> dict[str, Any]:
        """The ``clientCapabilities`` of ``initialize``: the fixed ones, plus exactly what is switched on."""
        advertised: dict[str, Any] = _copied(CLIENT_CAPABILITIES)
        session: dict[str, Any] = advertised["session"]
        if self.notices:
            session["notices"] = {}
        if self.compaction:
            session["compaction"] = {}
        if self.plan_operations:
            advertised["plan"] = {}
        if self.subagents:
            advertised["subagents"] = {}
        if self.elicitation or self.elicitation_url:
            modes = (("form", self.elicitation), ("url", self.elicitation_url))
            advertised["elicitation"] = {mode: {} for mode, on in modes if on}
        return advertised


def _copied(value: Any) -> Any:
    """A copy of JSON-shaped data (dicts, lists and scalars), as ``copy.deepcopy`` makes it but without its memo and
    dispatch, which cost each client's ``initialize`` about as much as the rest of its parameters."""
    if value.__class__ is dict:
        return {key: _copied(item) for key, item in value.items()}
    if value.__class__ is list:
        return [_copied(item) for item in value]
    return value
