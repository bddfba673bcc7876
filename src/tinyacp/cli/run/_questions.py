"""The agent's questions to the person (``elicitation/create``), answered on the terminal.

A form is asked field by field, in the order of its schema, with the agent's message first: a string (with its
length bounds), a choice among values (``enum``, or ``oneOf`` with titles: answered by number, value or title), an
integer or a number (with its bounds), a boolean (y or n), several choices (comma-separated). Enter keeps the
default shown in brackets, or leaves out a field that is not required. Ctrl-D declines the form; Ctrl-C answers
it ``cancel`` and cancels the turn. Without a terminal (or with ``--no-input``) every form is declined. A URL
question (``mode: url``) is shown, link and all, and declined: the command never opens a link. See
https://agentclientprotocol.com/protocol/overview and the MCP forms it follows.

Reading an answer (:func:`parse`) is pure, so every field kind is tested without a terminal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..._elicitation import ElicitationReply, ElicitationRequest
from ..shared._display import one_line
from ._display import Display, Styled
from ._terminal import Asker

__all__ = ["Field", "Questions", "fields_of", "parse"]

_BOOLEANS = {"y": True, "yes": True, "true": True, "1": True, "n": False, "no": False, "false": False, "0": False}
_MAX_FIELDS = 50
"""A form longer than this is declined unasked: a person does not answer a hundred questions an agent made up."""


@dataclass(frozen=True)
class Field:
    """One field of a form, as the command asks it."""

    name: str
    kind: str
    """``string``, ``integer``, ``number``, ``boolean`` or ``array`` (several choices)."""
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[tuple[str, str], ...] = ()
    """(value, title) of a choice field (and of each item of a several-choices one)."""
    low: float | None = None
    """The least value (``minimum``), length (``minLength``) or count of choices (``minItems``)."""
    high: float | None = None
    """The greatest value, length or count."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def fields_of(schema: Any) -> list[Field] | str:
    """The fields of a form's ``requestedSchema``, in its order; or why the command cannot ask it (a field of a
    kind it does not know that is required, too many fields, a ``required`` that is not a list of names: a form
    read wrong could leave out a field the agent needs, so it is declined). Any JSON is read without an error."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties", {}), dict):
        return "its form has no fields the command can read"
    properties: dict[str, Any] = schema.get("properties", {})
    if len(properties) > _MAX_FIELDS:
        return f"its form has {len(properties)} fields (the command asks at most {_MAX_FIELDS})"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return f"its form's required is not a list of field names ({one_line(required, 40)})"
    found: list[Field] = []
    for name, spec in properties.items():
        made = _field(str(name), spec, name in required)
        if isinstance(made, str):
            if name in required:
                return made
            continue  # a field the command cannot ask and need not: left out
        found.append(made)
    return found


def _field(name: str, spec: Any, required: bool) -> Field | str:
    if not isinstance(spec, dict) or spec.get("type") not in ("string", "integer", "number", "boolean", "array"):
        kind = spec.get("type") if isinstance(spec, dict) else None
        return f"its field {one_line(name, 40)!r} is of a kind the command cannot ask ({one_line(kind, 20)})"
    kind = spec["type"]
    title = _text(spec.get("title")) or name
    description = _text(spec.get("description"))
    source = spec.get("items") if kind == "array" else spec
    choices = _choices(source if isinstance(source, dict) else {})
    if kind == "array" and not choices:
        return f"its field {one_line(name, 40)!r} asks for several values without saying which"
    bounds = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems")}.get(kind, ("minimum", "maximum"))
    low, high = (spec.get(key) if _is_number(spec.get(key)) else None for key in bounds)
    made = Field(name, kind, title, description, required, None, choices, low, high)
    default = spec.get("default")
    # A default is offered (and sent, on Enter) only when it is an answer the field takes: one the agent got
    # wrong (an object for a string, numbers for choices) is ignored, and the field is asked without one.
    return replace(made, default=default) if _fits(default, made) else made


def _fits(value: Any, spec: Field) -> bool:
    """Whether ``value`` is an answer ``spec`` takes, of its type and among its choices (bounds aside: a
    default outside them is the agent's own word)."""
    if value is None:
        return False
    if spec.kind == "boolean":
        return isinstance(value, bool)
    if spec.kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec.kind == "number":
        return _is_number(value)
    values = {choice for choice, _ in spec.choices}
    if spec.kind == "array":
        return isinstance(value, list) and all(isinstance(item, str) and item in values for item in value)
    return isinstance(value, str) and (not spec.choices or value in values)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _choices(spec: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(value, title) of ``enum`` (its ``enumNames`` as titles, if any), ``oneOf`` or ``anyOf`` options."""
    if isinstance(spec.get("enum"), list):
        values = [value for value in spec["enum"] if isinstance(value, str)]
        names: list[Any] = spec["enumNames"] if isinstance(spec.get("enumNames"), list) else values
        return tuple((value, str(names[i]) if i < len(names) else value) for i, value in enumerate(values))
    for key in ("oneOf", "anyOf"):
        if isinstance(spec.get(key), list):
            return tuple(
                (option["const"], str(option.get("title") or option["const"]))
                for option in spec[key]
                if isinstance(option, dict) and isinstance(option.get("const"), str)
            )
    return ()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse(text: str, spec: Field) -> tuple[bool, Any]:
    """Read one answer: (True, the value) or (False, why it does not fit, in words). ``text`` is not empty."""
    if spec.kind == "boolean":
        answer = _BOOLEANS.get(text.lower())
        return (True, answer) if answer is not None else (False, "answer y or n")
    if spec.kind in ("integer", "number"):
        return _number(text, spec)
    if spec.kind == "array":
        picked = [_choice(part.strip(), spec) for part in text.split(",") if part.strip()]
        if any(value is None for value in picked):
            return False, "answer with the numbers, values or titles shown, separated by commas"
        values = list(dict.fromkeys(value for value in picked if value is not None))
        return _within(len(values), spec, "choose at least {}", "choose at most {}", values)
    if spec.choices:
        value = _choice(text, spec)
        return (True, value) if value is not None else (False, "answer with one of the numbers, values or titles")
    return _within(len(text), spec, "at least {} characters", "at most {} characters", text)


def _number(text: str, spec: Field) -> tuple[bool, Any]:
    try:
        value: float = int(text) if spec.kind == "integer" else float(text)
    except ValueError:
        return False, f"answer with {'a whole number' if spec.kind == 'integer' else 'a number'}"
    if not math.isfinite(value):
        return False, "answer with a finite number"
    return _within(value, spec, "at least {}", "at most {}", value)


def _within(size: float, spec: Field, low_words: str, high_words: str, value: Any) -> tuple[bool, Any]:
    """``value`` if ``size`` (the value, a length, a count) is within the field's bounds, else why not; the words
    hold ``{}`` for the bound."""
    if spec.low is not None and size < spec.low:
        return False, low_words.format(_plain(spec.low))
    if spec.high is not None and size > spec.high:
        return False, high_words.format(_plain(spec.high))
    return True, value


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _choice(text: str, spec: Field) -> str | None:
    """The value a choice answer names: its number in the list shown, the value itself, or its title."""
    # ASCII digits only, and no more than a list's length can need: "²" is a digit no int() reads, and a number
    # of 5,000 digits is past int()'s limit.
    if text.isascii() and text.isdigit() and len(text) <= 6 and 1 <= int(text) <= len(spec.choices):
        return spec.choices[int(text) - 1][0]
    for value, title in spec.choices:
        if text == value or text.lower() == title.lower():
            return value
    return None


def prompt_of(spec: Field) -> str:
    """What the command prints before reading one field: its title, what it takes, the default in brackets."""
    words = [spec.title]
    if spec.kind == "boolean":
        words.append("(y/n)")
    elif spec.kind in ("integer", "number"):
        bounds = _bounds(spec)
        words.append(f"({'whole number' if spec.kind == 'integer' else 'number'}{bounds})")
    elif spec.choices:
        several = "one or more, comma-separated: " if spec.kind == "array" else ""
        words.append(f"({several}" + ", ".join(f"{i}: {title}" for i, (_, title) in enumerate(spec.choices, 1)) + ")")
    if spec.required and spec.default is None:
        words.append("(required)")
    if spec.default is not None:
        default = spec.default
        shown = "y" if default is True else "n" if default is False else default
        words.append(f"[{one_line(', '.join(shown) if isinstance(shown, list) else shown, 60)}]")
    return f"  {one_line(' '.join(str(word) for word in words), 300)}: "


def _bounds(spec: Field) -> str:
    if spec.low is not None and spec.high is not None:
        return f", {_plain(spec.low)} to {_plain(spec.high)}"
    if spec.low is not None:
        return f", at least {_plain(spec.low)}"
    if spec.high is not None:
        return f", at most {_plain(spec.high)}"
    return ""


class _Interrupted(Exception):
    """Ctrl-C while a field was asked."""


class Questions:
    """Answers the agent's questions: on the terminal when there is one to ask on, else declined.

    Args:
        display: where the question and its outcome are shown.
        asker: the terminal to ask on, or None (no terminal, or ``--no-input``).
        no_ask_reason: why nobody is asked, in words, when ``asker`` is None.
        child_name: the name of the child session (a subagent) that asks, or None for the session itself.
    """

    def __init__(
        self,
        display: Display,
        asker: Asker | None,
        no_ask_reason: str,
        child_name: Callable[[str], str | None],
    ) -> None:
        self._display = display
        self._asker = asker
        self._no_ask_reason = no_ask_reason
        self._child_name = child_name

    def answer(self, request: ElicitationRequest) -> tuple[ElicitationReply, str]:
        """The reply to one question, and how it came, in words for the display."""
        child = self._child_name(request.session_id) if request.session_id is not None else None
        who = "the agent" if child is None else f"its subagent [{child}]"
        if request.mode == "url":
            link = one_line(request.url, 2000)
            self._display.lines([f"? {who} asks you to open a link: {one_line(request.message, 400)}", f"  {link}"])
            return ElicitationReply.decline(), "declined: the command opens no links"
        unknown = "a question of a kind the command cannot ask"
        fields = fields_of(request.requested_schema) if request.mode == "form" else unknown
        if isinstance(fields, str):
            return ElicitationReply.decline(), f"declined: {fields}"
        if self._asker is None:
            return ElicitationReply.decline(), f"declined: {self._no_ask_reason}"
        header = [
            f"? {who} asks: {one_line(request.message, 400)}",
            Styled("  (Enter keeps the value in brackets; Ctrl-D declines the form; Ctrl-C cancels the turn)", "2"),
        ]
        self._display.pause(header)
        try:
            content = {}
            for spec in fields:
                value = self._ask(self._asker, spec)
                if value is not None:
                    content[spec.name] = value
        except EOFError:
            return ElicitationReply.decline(), "declined by you"
        except _Interrupted:
            return ElicitationReply.cancel(), "cancelled: Ctrl-C"
        finally:
            self._display.resume()
        return ElicitationReply.accept(content), "answered by you"

    def _ask(self, asker: Asker, spec: Field) -> Any:
        """One field's value; None to leave it out.

        Raises:
            EOFError: Ctrl-D (the form is declined).
            _Interrupted: Ctrl-C.
        """
        if spec.description:
            self._display.pause([Styled(f"  {one_line(spec.description, 300)}", "2")])
        while True:
            self._display.prompt_text(prompt_of(spec))
            text = asker.read_line()
            if text is None:
                raise _Interrupted
            if not text:
                if spec.default is not None:
                    return spec.default
                if not spec.required:
                    return None
                why = "an answer is required (Ctrl-D declines the form)"
            else:
                fits, value = parse(text, spec)
                if fits:
                    return value
                why = str(value)
            self._display.pause([Styled(f"  {why}", "33")])
