"""``with-question``: after the thought, ``elicitation/create`` asks a form of five fields: a string, a choice
(``oneOf``), an integer, a number, a boolean (opt-in ``elicitation.form``); the reply repeats the answer, or says it
was declined, dismissed or did not fit the form. Without the opt-in the reply says it would have asked."""

from __future__ import annotations

import json

from ._wire import elicitation_action

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._agent import DemoAgent
    from ._turn import Turn
    from ._wire import JsonObject

QUESTION = "How should I summarise the files?"
QUESTION_FORM: JsonObject = {
    "type": "object",
    "title": "Summary",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 40},
        "style": {
            "type": "string",
            "title": "Style",
            "oneOf": [{"const": "short", "title": "Short"}, {"const": "long", "title": "Long"}],
            "default": "short",
        },
        "lines": {"type": "integer", "title": "Lines at most", "minimum": 1, "maximum": 100, "default": 10},
        "detail": {"type": "number", "title": "Detail, from 0 to 1", "minimum": 0, "maximum": 1, "default": 0.5},
        "sizes": {"type": "boolean", "title": "Show the sizes", "default": True},
    },
    "required": ["name", "style"],
}


def ask(agent: DemoAgent, turn: Turn) -> bool:
    """Asks the form, if the client takes forms; False if the turn got cancelled."""
    if "elicitation.form" not in agent.features:
        turn.notes.append("I would ask how to summarise the files, but this client takes no forms.\n")
        return True
    params = {
        "sessionId": turn.session.session_id,
        "mode": "form",
        "message": QUESTION,
        "requestedSchema": QUESTION_FORM,
    }
    answer = agent.ask(turn, "elicitation/create", params)
    if answer is None:
        return False
    turn.notes.append(answer_note(answer))
    return True


def answer_note(answer: JsonObject) -> str:
    """What the reply says of the answer to the form."""
    action = elicitation_action(answer)
    if action == "accept":
        content = answer["result"].get("content")
        problem = form_problem(content)
        if problem is not None:
            return f"Your answer does not fit the form ({problem}): I use the defaults.\n"
        assert isinstance(content, dict)
        given = [f"{name}={json.dumps(content[name])}" for name in QUESTION_FORM["properties"] if name in content]
        return f"You answered: {', '.join(given)}.\n"
    if action in ("decline", "cancel"):
        return f"You {'declined' if action == 'decline' else 'dismissed'} the question: I use the defaults.\n"
    return "The question got no answer: I use the defaults.\n"


def form_problem(content: Any) -> str | None:
    """Why ``content`` does not fit `QUESTION_FORM`, or None if it does."""
    if not isinstance(content, dict):
        return "no content"
    properties: JsonObject = QUESTION_FORM["properties"]
    missing = [name for name in QUESTION_FORM["required"] if name not in content]
    if missing:
        return f"{missing[0]} is missing"
    for name, value in content.items():
        spec = properties.get(name)
        if spec is None:
            return f"{name} was not asked"
        kind = spec["type"]
        if kind == "string":
            choices = [option["const"] for option in spec.get("oneOf", ())]
            fits = isinstance(value, str) and (value in choices if choices else 1 <= len(value) <= spec["maxLength"])
        elif kind == "boolean":
            fits = type(value) is bool
        else:  # `type(...)`: a JSON true is no number, though Python's True == 1
            fits = type(value) is int or (kind == "number" and type(value) is float)
            fits = fits and spec["minimum"] <= value <= spec["maximum"]
        if not fits:
            return f"{name} is not a valid {kind}"
    return None
