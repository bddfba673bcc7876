"""``with-login``: after the thought, ``elicitation/create`` in ``url`` mode asks the user to sign in at a link,
then ``elicitation/complete`` once accepted (opt-in ``elicitation.url``); without the opt-in, the link is in the
reply."""

from __future__ import annotations

from ._wire import elicitation_action

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._turn import Turn

LOGIN_URL = "https://example.com/tinyacp-demo/login"


def ask(agent: DemoAgent, turn: Turn) -> bool:
    """Asks the user to sign in, if the client takes URLs; False if the turn got cancelled."""
    url = f"{LOGIN_URL}?session={turn.session.session_id}"
    if "elicitation.url" not in agent.features:
        turn.notes.append(f"Sign in at {url} (this client opens no links).\n")
        return True
    elicitation_id = f"login-{agent.count('login')}"
    params = {
        "sessionId": turn.session.session_id,
        "mode": "url",
        "message": "Sign in to the demo service.",
        "elicitationId": elicitation_id,
        "url": url,
    }
    answer = agent.ask(turn, "elicitation/create", params)
    if answer is None:
        return False
    if elicitation_action(answer) == "accept":
        agent.send({"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": elicitation_id}})
        turn.notes.append("You signed in.\n")
    else:
        turn.notes.append("You did not sign in.\n")
    return True
