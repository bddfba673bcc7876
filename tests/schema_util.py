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

from conftest import ACP, SCHEMA_PATH

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
