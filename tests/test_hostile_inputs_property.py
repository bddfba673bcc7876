"""Property tests: whatever bytes a file holds, or whatever text an argument carries, each parser of the command
and the batch gives a result or its own clear, typed error, within a time bound, and never another exception.

Covered here: batch items (a file, and any JSON value as an item), ``config.toml``, ``--mcp-config``, the
session index, journals as the library reads them, and the ``--agent`` value. ``show`` and ``replay`` over any
journal bytes are in ``test_hostile_property.py``.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyacp
from tinyacp._journal import read_journal
from tinyacp.batch._items import journal_name, parse_item, read_items
from tinyacp.cli.agents._load import load_config
from tinyacp.cli.agents._resolve import BUILTIN_AGENTS, Config, ConfigError, resolve_agent
from tinyacp.cli.run._mcp import McpConfigError, read_mcp_config
from tinyacp.cli.shared._index import SessionIndex

BOUND = settings(
    max_examples=150,
    deadline=5000,  # ms: the time bound of one parse, generous for a loaded machine; a hang fails it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=15,
)


@st.composite
def nested(draw: st.DrawFn, opener: str, closer: str) -> str:
    depth = draw(st.integers(0, 200_000))
    return opener * depth + closer * draw(st.integers(0, depth))


def _text_of(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def file_bytes(*shaped: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Any bytes, or shaped ones, or deep nesting, alone or joined by newlines."""
    pieces = st.one_of(
        st.binary(max_size=200),
        json_values.map(_text_of),
        nested("[", "]").map(str.encode),
        nested('{"a":', "}").map(str.encode),
        *shaped,
    )
    return st.lists(pieces, max_size=5).map(b"\n".join)


@given(data=file_bytes(st.fixed_dictionaries({"id": st.text(), "prompt": st.text()}).map(_text_of)))
@BOUND
def test_any_items_file_gives_items_or_a_batch_item_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(data)
    try:
        for line, value in read_items(path):
            item = parse_item(value, line=line)
            name = journal_name(str(item.id))
            assert "/" not in name and name not in (".", "..") and name.endswith(".jsonl")
    except tinyacp.BatchItemError:
        pass


@given(value=json_values)
@BOUND
def test_any_json_value_as_an_item_is_an_item_or_a_batch_item_error(value: Any) -> None:
    with contextlib.suppress(tinyacp.BatchItemError):
        parse_item(value)


_toml_pieces = st.sampled_from(
    [
        'default_agent = "demo"',
        "[agents.a]",
        'command = ["x"]',
        'command = "demo --delay 0.1"',
        'command = "demo \'open"',
        "mode = 3",
        "options = { a = 1, b = [1] }",
        "env = { A = 1 }",
        'key_env = "K"',
        "[agents]",
        "agents = 3",
        "defualt_agent = 1",
        'system_prompt_mode = "x"',
    ]
)
toml_text = st.lists(
    st.one_of(_toml_pieces.map(str.encode), st.binary(max_size=40), nested("a = [", "]").map(str.encode)),
    max_size=8,
).map(b"\n".join)


@given(data=st.one_of(file_bytes(), toml_text))
@BOUND
def test_any_config_file_gives_a_config_or_a_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(data)
    try:
        config = load_config(path)
    except ConfigError as exc:
        assert str(exc).startswith(f"config file {path}")
        return
    assert isinstance(config, Config) and set(BUILTIN_AGENTS) <= set(config.agents)
    assert all(spec.command and all(isinstance(word, str) for word in spec.command) for spec in config.agents.values())


_mcp_entries = st.dictionaries(
    st.sampled_from(["command", "args", "env", "url", "type", "headers"]), json_values, max_size=4
)
mcp_documents = st.dictionaries(st.just("mcpServers"), st.dictionaries(st.text(max_size=5), _mcp_entries)).map(_text_of)


@given(data=file_bytes(mcp_documents))
@BOUND
def test_any_mcp_config_gives_servers_or_an_mcp_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(data)
    try:
        servers = read_mcp_config(path)
    except McpConfigError as exc:
        assert str(exc).startswith(f"--mcp-config {path}")
        return
    assert all(server.name is not None for server in servers)


_index_entries = st.fixed_dictionaries(
    {"agent": json_values, "cwd": json_values, "session_id": json_values, "time": json_values},
    optional={"journal": json_values, "title": json_values},
).map(_text_of)


@given(data=file_bytes(_index_entries))
@BOUND
def test_any_session_index_gives_entries_with_finite_times_and_strict_json(tmp_path: Path, data: bytes) -> None:
    index = SessionIndex(tmp_path / "sessions.jsonl")
    index.path.write_bytes(data)
    entries = index.entries()
    for entry in entries:
        assert isinstance(entry.session_id, str) and math.isfinite(entry.time) and entry.time >= 0
    json.dumps([entry.__dict__ for entry in entries], allow_nan=False)
    index.record("demo", tmp_path, "s-new", None)  # appending (and compacting) over any bytes works
    assert index.latest("demo", tmp_path) is not None


@given(data=file_bytes())
@BOUND
def test_any_journal_bytes_read_as_records_or_left_out(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(data)
    contents = read_journal(path)
    for record in contents.records:
        assert isinstance(record["type"], str) and type(record["epoch"]) is int
    assert tinyacp.JsonlJournal.read(path) == contents.records


@given(value=st.text() | st.sampled_from(["demo", "demo --delay 1", "'", "cluade", "./x", " ", "a b 'c"]))
@BOUND
def test_any_agent_value_is_an_agent_or_a_config_error(value: str) -> None:
    config = Config(dict(BUILTIN_AGENTS))
    try:
        spec = resolve_agent(value, config)
    except ConfigError:
        return
    assert spec.command and all(isinstance(word, str) for word in spec.command)


@pytest.mark.parametrize("reverse", [False, True])
@given(values=st.lists(st.text(st.sampled_from('ab"\\\n\x00é'), min_size=1, max_size=6), min_size=1, max_size=4))
@BOUND
def test_every_secret_is_gone_from_a_recorded_line_whatever_their_overlap(values: list[str], reverse: bool) -> None:
    from helpers.hostile import sent_line

    secrets = [tinyacp.Secret(value) for value in values]
    meta = {f"k{n}": secret for n, secret in enumerate(reversed(secrets) if reverse else secrets)}
    message = sent_line({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"_meta": meta}})
    stored = json.loads(message.redacted())["params"]["_meta"]
    assert stored == dict.fromkeys(meta, "<secret>")


@given(
    text=st.text(max_size=30)
    | st.from_regex(r"\s*[0-9]{1,40}\s*[kKmMgG]?(i?[bB])?\s*", fullmatch=True)
    | st.floats().map(repr)
)
@BOUND
def test_any_number_argument_is_a_bounded_value_or_an_argument_error(text: str) -> None:
    import argparse

    from tinyacp.cli.shared._args import concurrency, count, positive, seconds, size

    for parse, least, most in (
        (size, 1, 1 << 30),
        (seconds, 0, 1_000_000),
        (count, 0, 1_000_000),
        (positive, 1, 1_000_000),
        (concurrency, 1, 10_000),
    ):
        try:
            value = parse(text)
        except argparse.ArgumentTypeError:
            continue
        assert least <= value <= most, (parse, text, value)
