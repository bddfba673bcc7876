"""A prompt turn: ``session/prompt`` and ``session/cancel``. The turn runs its steps in order (the features' preface,
the plan, the thought, the features' questions, the work, the reply), keeps itself in the session's history and
reports what it used. What each feature adds is in its own module (see ``_words.py``)."""

from __future__ import annotations

from . import _trace, _words
from ._sessions import active, check_auth
from ._store import now
from ._tools import summary, use_tool
from ._wire import INVALID_PARAMS, RpcError, child_state, chunk, tool_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ._agent import DemoAgent
    from ._store import Session
    from ._wire import JsonObject

# US dollars per token: made-up prices, so that a cost shows and differs by model.
PRICES = {"demo-small": 0.000002, "demo-large": 0.00003}
CONTEXT_SIZE = 200000


class Turn:
    """State of the one prompt turn in progress."""

    def __init__(self, session: Session, extras: set[str]) -> None:
        self.session = session
        self.extras = extras
        self.cancelled = False
        self.updates_sent = 0
        self.open_tool_call: tuple[str, str] | None = None
        """(session id, tool call id) of the tool call started and not finished: a cancel marks it failed."""
        self.open_child: str | None = None
        """The child session at work: a cancel reports it idle."""
        self.plan_id: str | None = None
        self.reply: list[str] = []
        self.notes: list[str] = []
        """Lines the reply carries between its echo and its body (answers to questions, what was skipped)."""


def prompt(agent: DemoAgent, params: JsonObject) -> JsonObject:
    """``session/prompt``: one turn, answered with its stop reason (and its usage, when it ended well)."""
    check_auth(agent)
    session = active(agent, params)
    blocks = params.get("prompt")
    if not isinstance(blocks, list):
        raise RpcError(INVALID_PARAMS, "Invalid params: prompt must be a list of content blocks")
    text = "".join(
        block["text"]
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )
    agent.turn = turn = Turn(session, _words.words_in(text).union(agent.options.extras))
    turn.notes.extend(_trace.joined(params))
    try:
        if agent.options.all_kinds or _words.ALL_KINDS_KEYWORD in text:
            return {"stopReason": _all_kinds_turn(agent, turn, text)}  # its own usage_update, no account
        stop_reason = _read_files_turn(agent, turn, text)
        if stop_reason != "end_turn":
            return {"stopReason": stop_reason}
        return {"stopReason": stop_reason, "usage": _account(agent, turn, text)}
    finally:
        agent.turn = None


def cancel(agent: DemoAgent, params: JsonObject) -> None:
    """``session/cancel``: the turn of that session stops at its next step."""
    turn = agent.turn
    if turn is not None and params.get("sessionId") == turn.session.session_id:
        turn.cancelled = True
    else:
        agent.debug("ignored session/cancel: no turn running for that session")


def _read_files_turn(agent: DemoAgent, turn: Turn, text: str) -> str:
    """The prompt's features, plan, think, read the cwd (or have a feature do the work), reply. Returns the stop
    reason."""
    cwd = turn.session.cwd
    features = [
        feature
        for feature in map(_words.load, (name for name in _words.EXTRAS if name in turn.extras))
        if feature.needs is None or feature.needs in agent.features
    ]
    opening = [update for feature in features if feature.preface for update in feature.preface(agent, turn)]
    opening.append(plan(agent, turn, "pending", "pending"))
    opening.append(chunk("agent_thought_chunk", f"I will list the files in {cwd}."))
    asked = agent.emit_all(turn, opening) and all(feature.ask(agent, turn) for feature in features if feature.ask)
    if not asked:
        return end_cancelled(agent, turn)
    work = next((feature.work for feature in features if feature.work), None)
    listing = use_tool(agent, turn, turn.session.session_id, "Read") if work is None else work(agent, turn)
    if listing is None:
        return end_cancelled(agent, turn)
    if listing.refused:
        rest = _reply(agent, turn, text, f"I was not allowed to read the files in {cwd}.\n")
    else:
        rest = [
            plan(agent, turn, "completed", "in_progress"),
            *_reply(agent, turn, text, summary(cwd, listing)),
            plan(agent, turn, "completed", "completed"),
        ]
    if turn.plan_id is not None:  # a finished turn takes its plan away
        rest.append({"sessionUpdate": "plan_removed", "planId": turn.plan_id})
    return "end_turn" if agent.emit_all(turn, rest) else end_cancelled(agent, turn)


def _all_kinds_turn(agent: DemoAgent, turn: Turn, text: str) -> str:
    """One update of each of the eleven v1 kinds, in schema order. Returns the stop reason."""
    from . import _kinds  # only a turn that asks for it pays for it

    updates = _kinds.updates(turn.session.cwd, agent.new_tool_call_id(), text)
    return "end_turn" if agent.emit_all(turn, updates) else end_cancelled(agent, turn)


def plan(agent: DemoAgent, turn: Turn, read_status: str, summarise_status: str) -> JsonObject:
    """The turn's plan: a ``plan_update`` of items under one id if the client opted in, else the legacy ``plan``."""
    entries = [
        {"content": "Read the files in the working directory", "priority": "high", "status": read_status},
        {"content": "Summarise them", "priority": "medium", "status": summarise_status},
    ]
    if "plan" not in agent.features:
        return {"sessionUpdate": "plan", "entries": entries}
    if turn.plan_id is None:
        turn.plan_id = f"plan-{agent.count('plan')}"
    return {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": turn.plan_id, "entries": entries}}


def _reply(agent: DemoAgent, turn: Turn, prompt_text: str, body: str) -> list[JsonObject]:
    """The reply as ``--chunks`` agent_message_chunk updates, the first one echoing the prompt."""
    echo = f"You said: {prompt_text}\n"
    session = turn.session
    if session.system_prompt:
        how = " (override)" if session.system_prompt_mode == "override" else ""
        echo = f"System prompt{how}: {session.system_prompt}\n" + echo
    pieces = _split_reply(echo + "".join(turn.notes), body, agent.options.chunks)
    return [chunk("agent_message_chunk", piece) for piece in pieces]


def _split_reply(echo: str, body: str, chunks: int) -> list[str]:
    """``chunks`` pieces: the echo first, then ``body`` cut evenly (never an empty piece)."""
    if chunks <= 1:
        return [echo + body]
    count = min(chunks - 1, len(body))
    return [echo] + [body[len(body) * i // count : len(body) * (i + 1) // count] for i in range(count)]


def _account(agent: DemoAgent, turn: Turn, text: str) -> JsonObject:
    """Keep the turn in the session's history and report what it used (before the answer)."""
    session = turn.session
    reply = "".join(turn.reply)
    session.history += [chunk("user_message_chunk", text), chunk("agent_message_chunk", reply)]
    session.title = session.title or (text[:40] or None)
    session.updated_at = now()
    tokens_in, tokens_out = len(text) // 4 + 1, len(reply) // 4 + 1
    session.used = min(CONTEXT_SIZE, session.used + tokens_in + tokens_out)
    session.cost += (tokens_in + tokens_out) * PRICES[session.model]
    agent.update(
        turn,
        {
            "sessionUpdate": "usage_update",
            "used": session.used,
            "size": CONTEXT_SIZE,
            "cost": {"amount": round(session.cost, 6), "currency": "USD"},
        },
    )
    agent.save(session)
    return {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out}


def end_cancelled(agent: DemoAgent, turn: Turn) -> str:
    """Marks the unfinished tool call failed and the working child idle; returns the "cancelled" stop reason."""
    if turn.open_tool_call is not None:
        session_id, tool_call_id = turn.open_tool_call
        agent.update(turn, tool_status(tool_call_id, "failed"), session_id)
    if turn.open_child is not None:
        agent.update(turn, child_state(turn.open_child, "cancelled"))
    return "cancelled"


REQUESTS: dict[str, Callable[[DemoAgent, JsonObject], JsonObject]] = {"session/prompt": prompt}
NOTIFICATIONS: dict[str, Callable[[DemoAgent, JsonObject], None]] = {"session/cancel": cancel}
