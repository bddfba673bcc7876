"""Validators against the ACP v1 schema, for the tests that check what tinyacp writes.

A line is checked twice: against a top-level branch (``Client`` for what we send), and against the precise
definition of its params, result or error, because the branch alone also accepts any extension message.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator

from conftest import SCHEMA_PATH


@functools.cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A validator for one ``$defs`` entry, or for a top-level branch: ``"Client"``, ``"Agent"``."""
    whole = schema()
    branches = [branch for branch in whole["anyOf"] if branch.get("title") == name]
    if branches:
        (branch,) = branches
        return Draft202012Validator({**branch, "$defs": whole["$defs"]})
    if name not in whole["$defs"]:
        raise KeyError(f"the schema has no branch or definition named {name!r}")
    return Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": whole["$defs"]})


def errors(name: str, instance: object) -> list[str]:
    """Every way ``instance`` breaks the named schema part, in words (empty when it is valid)."""
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator(name).iter_errors(instance)
    ]


def check_client_line(raw: bytes, part: str) -> dict[str, Any]:
    """Assert one line we write is a valid ``Client`` message and its params/result/error is a valid ``part``.

    Returns the parsed line.
    """
    message: dict[str, Any] = json.loads(raw)
    found = errors("Client", message)
    assert not found, f"{raw!r} is not a Client message: {found}"
    if "params" in message:
        inner = message["params"]
    elif "result" in message:
        inner = message["result"]
    else:
        inner = message["error"]
    found = errors(part, inner)
    assert not found, f"{raw!r} does not fit {part}: {found}"
    return message
