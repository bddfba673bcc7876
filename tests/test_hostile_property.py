"""Property tests: whatever bytes a journal holds, ``show`` and ``replay`` end with their documented status and
no traceback; whatever lines an agent sends, the screen of ``tinyacp prompt`` shows no control character the
agent put there."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyacp
from helpers import UPDATE_KINDS, end_turn, handshake
from helpers.cli import Cli, Terminal
from helpers.hostile import EVIL, assert_clean
from tinyacp.cli.journals._show import show
from tinyacp.cli.shared._exit import Exit
from tinyacp.replay import EXIT_BAD_JOURNAL, EXIT_MISMATCH, EXIT_OK, JournalUnusable, load_recording, serve

# Text as hostile as it gets: every control, escape sequences whole and cut, bidi controls, lone surrogates.
_HOSTILE_CHARS = st.sampled_from(["\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\r", "\n", "\t", "\x00", "\u202e", "\u2066"])
# Any character but a surrogate: what ``st.text()`` draws, without making hypothesis compute the UTF-8 codec's
# table (two seconds in every worker of a fresh clone, before the first example).
hostile_text = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"])),
    st.lists(st.one_of(st.text(max_size=5), _HOSTILE_CHARS, st.just(EVIL), st.just("\x1b]52;c;")), max_size=12).map(
        "".join
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)
_FIELDS = ["content", "title", "kind", "status", "toolCallId", "entries", "currentModeId", "used", "size", "rawInput"]


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    """An update of a known kind (or not), with some of its fields set to anything."""
    update: dict[str, Any] = {"sessionUpdate": draw(st.sampled_from(UPDATE_KINDS) | hostile_text)}
    for name in draw(st.lists(st.sampled_from(_FIELDS), max_size=4, unique=True)):
        update[name] = draw(json_values)
    if draw(st.booleans()):
        update["content"] = {"type": "text", "text": draw(hostile_text)}
    if draw(st.booleans()):
        update["entries"] = draw(
            st.lists(st.fixed_dictionaries({"content": hostile_text, "status": json_values}), max_size=3)
        )
    return update


def _update_line(update: Any) -> bytes:
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}}
    return json.dumps(message).encode()


def _permission_line(tool: Any) -> bytes:
    options = [{"optionId": "ok", "name": "ok", "kind": "allow_once"}]
    params = {"sessionId": "s1", "toolCall": tool, "options": options}
    return json.dumps({"jsonrpc": "2.0", "id": 99, "method": "session/request_permission", "params": params}).encode()


agent_lines = st.one_of(
    updates().map(_update_line),
    st.dictionaries(st.sampled_from(["toolCallId", "title", "kind", "content", "locations"]), json_values).map(
        _permission_line
    ),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=60).map(lambda data: data.replace(b"\n", b" ")),
)


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """A journal record of any type, epoch and direction, holding an agent line or bad base64, and more fields."""
    record: dict[str, Any] = {
        "type": draw(st.sampled_from(["line", "epoch", "decision"]) | hostile_text),
        "epoch": draw(st.integers(min_value=-1, max_value=3) | json_values),
        "dir": draw(st.sampled_from(["in", "out"]) | json_values),
        "kind": draw(st.sampled_from(["update", "permission_request", "response", "request"]) | json_values),
    }
    line = draw(agent_lines)
    if draw(st.booleans()):
        record["line"] = line.decode("utf-8", "replace")
    else:
        record["line_b64"] = draw(st.just(base64.b64encode(line).decode()) | hostile_text)
    for name in draw(st.lists(st.sampled_from(["id", "method", "detail", "outcome", "decided_by", "ts"]), max_size=3)):
        record[name] = draw(json_values)
    return record


@st.composite
def journals(draw: st.DrawFn) -> bytes:
    """Bytes: anything at all, or lines that look like a journal's and are not quite."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    lines = draw(
        st.lists(
            st.one_of(records().map(json.dumps).map(str.encode), st.binary()),
            max_size=8,
        )
    )
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\n\x00\x1b"]))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@pytest.mark.slow
@settings(
    max_examples=200,
    deadline=5000,  # ms: the time bound of one read by both, generous for a loaded machine; a hang fails it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=journals(), client=st.lists(agent_lines, max_size=4), strict=st.booleans())
def test_show_and_replay_take_any_bytes_with_their_documented_status_and_nothing_a_terminal_acts_on(
    tmp_path: Path, data: bytes, client: list[bytes], strict: bool
) -> None:
    # One property for both readers of a journal: drawing a journal costs far more than reading it twice.
    path = tmp_path / "j.jsonl"
    path.write_bytes(data)
    show_renders_it_with_its_status_and_nothing_a_terminal_acts_on(path)
    replay_serves_it_with_its_documented_status(path, tmp_path / "client", client, strict)


def show_renders_it_with_its_status_and_nothing_a_terminal_acts_on(path: Path) -> None:
    # 0 for a journal, whatever else it holds; 2 for a file without one record (empty, or not a journal).
    status = 0 if tinyacp.JsonlJournal.read(path) else 2
    out, err = io.StringIO(), io.StringIO()
    assert show(path, "text", out, err) == status
    assert_clean(out.getvalue())
    assert_clean(err.getvalue())
    out, err = io.StringIO(), io.StringIO()
    assert show(path, "json", out, err) == status
    assert out.getvalue().isascii()
    for line in out.getvalue().splitlines():
        assert isinstance(json.loads(line, parse_constant=_no_constant), dict)
    assert_clean(err.getvalue())


def replay_serves_it_with_its_documented_status(
    path: Path, client_path: Path, client: list[bytes], strict: bool
) -> None:
    log = io.StringIO()
    try:
        recording = load_recording(path)
    except JournalUnusable:
        return  # `tinyacp replay` says so in one line and exits EXIT_BAD_JOURNAL
    client_path.write_bytes(b"".join(line + b"\n" for line in client))
    in_fd = os.open(client_path, os.O_RDONLY)
    out_fd = os.open(os.devnull, os.O_WRONLY)
    try:
        status = serve(recording, strict=strict, in_fd=in_fd, out_fd=out_fd, log=log)
    finally:
        os.close(in_fd)
        os.close(out_fd)
    assert status in ((EXIT_OK, EXIT_MISMATCH) if strict else (EXIT_OK,))
    assert EXIT_BAD_JOURNAL not in (status,)
    assert_clean(log.getvalue())


_STATUSES = {int(code) for code in Exit}


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(agent_lines, min_size=1, max_size=8), reason=st.sampled_from(["end_turn"]) | hostile_text)
def test_the_live_display_shows_any_agent_lines_without_a_control_character(
    cli: Cli, lines: list[bytes], reason: str
) -> None:
    steps: list[dict[str, Any]] = [*handshake()]
    steps += [{"op": "raw_b64", "data": base64.b64encode(line + b"\n").decode()} for line in lines]
    steps.append(end_turn() | {"result": {"stopReason": reason}})
    terminal = Terminal(cli, "prompt", "-y", "--no-journal", "--agent", cli.scripted(steps), "hi")
    status = terminal.finish()
    assert b"Traceback" not in terminal.output
    assert status in _STATUSES, terminal.output
    assert_clean(terminal.output, ours=True)
