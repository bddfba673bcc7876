"""Validators against the ACP v1 schemas, for the tests that check what tinyacp writes.

``SCHEMA_PATH`` (release schema-v1.21.0) is the default; ``STABLE`` and ``UNSTABLE`` name the schemas of the
TypeScript SDK 2.4.0 (stable, and stable plus unstable), which the newer parts of ACP are checked against.

A line is checked twice: against a top-level branch (``Client`` for what we send), and against the precise
definition of its params, result or error, because the branch alone also accepts any extension message.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from helpers import ACP, SCHEMA_PATH

STABLE = ACP / "sdk-2.4.0" / "v1" / "schema.json"
UNSTABLE = ACP / "sdk-2.4.0" / "v1" / "schema.unstable.json"


@functools.cache
def schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def validator(name: str, path: Path = SCHEMA_PATH) -> Draft202012Validator:
    """A validator for one ``$defs`` entry, or for a top-level branch: ``"Client"``, ``"Agent"``."""
    whole = schema(path)
    branches = [branch for branch in whole["anyOf"] if branch.get("title") == name]
    if branches:
        (branch,) = branches
        return Draft202012Validator({**branch, "$defs": whole["$defs"]})
    if name not in whole["$defs"]:
        raise KeyError(f"the schema has no branch or definition named {name!r}")
    return Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": whole["$defs"]})


def errors(name: str, instance: object, path: Path = SCHEMA_PATH) -> list[str]:
    """Every way ``instance`` breaks the named schema part, in words (empty when it is valid)."""
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator(name, path).iter_errors(instance)
    ]


def check_client_line(raw: bytes, part: str, path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """Assert one line we write is a valid ``Client`` message and its params/result/error is a valid ``part``.

    Returns the parsed line.
    """
    message: dict[str, Any] = json.loads(raw)
    found = errors("Client", message, path)
    assert not found, f"{raw!r} is not a Client message: {found}"
    if "params" in message:
        inner = message["params"]
    elif "result" in message:
        inner = message["result"]
    else:
        inner = message["error"]
    found = errors(part, inner, path)
    assert not found, f"{raw!r} does not fit {part}: {found}"
    return message


@functools.cache
def _parts_by_method(path: Path) -> dict[tuple[str, str], str]:
    """``(method, suffix)`` -> the ``$defs`` entry for it, from the schema's ``x-method`` annotations."""
    parts: dict[tuple[str, str], str] = {}
    for name, definition in schema(path)["$defs"].items():
        method = definition.get("x-method")
        for suffix in ("Request", "Notification", "Response"):
            if method is not None and name.endswith(suffix):
                parts[(method, suffix)] = name
    return parts


def check_sent_line(raw: bytes, answered: str | None = None) -> dict[str, Any]:
    """Assert one line the client wrote is valid against the SDK 2.4.0 schemas: the stable file when the stable
    protocol defines its method, and always the unstable file (stable plus unstable), which also checks the
    unstable fields a stable method may carry (``systemPrompt`` on ``session/new``).

    A request or notification is checked against its method's definition; a response against the definition of
    the result of ``answered`` (the method of the agent's request it answers), an error answer against
    ``Error``. An ``_`` extension method has no definition of its own and is checked against the ``Client``
    branch only. Returns the parsed line.

    Raises:
        AssertionError: when the line breaks a schema, or names a method neither schema knows.
    """
    message: dict[str, Any] = json.loads(raw)
    method = message.get("method", answered)
    assert isinstance(method, str), f"{raw!r} answers a request whose method was not given"
    suffix = "Response" if "method" not in message else "Request" if "id" in message else "Notification"
    checked = False
    for path in (STABLE, UNSTABLE):
        if "error" in message:
            part: str | None = "Error"
        elif method.startswith("_"):
            part = None
        else:
            part = _parts_by_method(path).get((method, suffix))
            if part is None:
                continue
        checked = True
        if part is None:
            broken = errors("Client", message, path)
            assert not broken, f"{raw!r} is not a Client message: {broken}"
        else:
            check_client_line(raw, part, path)
    assert checked, f"{raw!r}: neither schema defines a {suffix} for {method!r}"
    return message


def check_every_sent_line(events: list[tuple[str, Any]]) -> int:
    """Check every line a recording observer saw the client write (``on_send``) with :func:`check_sent_line`,
    each answer against the method of the agent's request it answers. Returns how many lines were checked.

    ``events`` are a ``Recorder``'s, in order: the agent's requests are seen (``on_message``,
    ``on_permission_request``) before our answers to them.
    """
    asked: dict[Any, str] = {}
    checked = 0
    for name, value in events:
        if name in ("message", "permission_request"):
            line = json.loads(value.raw)
            if isinstance(line, dict) and isinstance(line.get("method"), str) and "id" in line:
                asked[line["id"]] = line["method"]
        elif name == "send":
            check_sent_line(value.raw, None if value.method is not None else asked.get(value.id))
            checked += 1
    return checked
