"""Bounded whatever the agent sends, on the newer surface: random notices, compaction, plans, subagents (chains,
loops, ids of any length) and forms, fed to the conversation core that both clients run, within limits drawn at
random, and to the command's display. No exception escapes but a documented one, what a turn keeps stays within
its limits with what was left out counted, nothing of a turn's children outlives it, and the display keeps only
what it shows."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.core import Driver
from tinyacp import (
    ClientFeatures,
    ClientInfo,
    LineReader,
    Notice,
    PermissionPolicy,
    PromptResult,
    ReaderLimits,
    TinyAcpError,
    TransferLimits,
)
from tinyacp._conversation import Conversation
from tinyacp.cli.run._display import Display
from tinyacp.cli.run._questions import fields_of, prompt_of

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

SESSION = "s1"
KiB = 1024
MiB = 1024 * KiB
LINE = 4 * MiB
"""The line and update limit here: the longest line drawn (a child's title and description of 100,000 escaped
characters each) fits, so every example reaches the newer bounds rather than the line limit."""

SIZED = "__sized__"
# Text of any size up to 100,000 characters, drawn as a marker that ``expanded`` turns into a short random head and a
# long run of one character (so that a failing example's repr stays short).
sized_texts = st.builds(
    lambda head, size, fill: [SIZED, head, size, fill],
    st.text(max_size=6),
    st.sampled_from([0, 1, 40, 1000, 20_000, 100_000]),
    st.sampled_from(["x", "é", "\x1b", "漢"]),
)


def expanded(value: Any) -> Any:
    """``value`` with each sized-text marker made its text."""
    if isinstance(value, list):
        if len(value) == 4 and value[0] == SIZED:
            return value[1] + value[3] * value[2]
        return [expanded(item) for item in value]
    if isinstance(value, dict):
        return {key: expanded(item) for key, item in value.items()}
    return value


session_pool = st.sampled_from([SESSION, "c1", "c2", "c3", "other"])
child_ids = st.one_of(session_pool, st.builds(lambda n: f"c{n}", st.integers(0, 60)), sized_texts)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
json_values = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


NEWER_UPDATES: list[st.SearchStrategy[dict[str, Any]]] = [
    st.fixed_dictionaries(
        {
            "sessionUpdate": st.just("notice"),
            "severity": st.sampled_from(["info", "warning", "error", "_x"]),
            "title": st.text(min_size=1, max_size=3) | sized_texts,
        },
        optional={"description": st.one_of(st.none(), sized_texts)},
    ),
    st.fixed_dictionaries(
        {
            "sessionUpdate": st.just("compaction_update"),
            "compactionId": st.sampled_from(["k1", "k2"]) | sized_texts,
            "status": st.sampled_from(["in_progress", "completed", "failed", "cancelled", "_x"]),
        },
        optional={"summary": st.lists(st.builds(text_block, sized_texts), max_size=2), "error": sized_texts},
    ),
    st.fixed_dictionaries(
        {
            "sessionUpdate": st.just("compaction_summary_chunk"),
            "compactionId": st.sampled_from(["k1", "k2"]) | sized_texts,
            "content": st.builds(text_block, sized_texts),
        }
    ),
    st.fixed_dictionaries(
        {
            "sessionUpdate": st.just("plan_update"),
            "plan": st.fixed_dictionaries(
                {"type": st.just("markdown"), "planId": st.sampled_from(["p1", "p2"]), "content": sized_texts}
            ),
        }
    ),
    st.fixed_dictionaries({"sessionUpdate": st.just("plan_removed"), "planId": st.sampled_from(["p1", "p2"])}),
    st.fixed_dictionaries(
        {
            "sessionUpdate": st.just("plan"),
            "entries": st.lists(
                st.fixed_dictionaries(
                    {"content": sized_texts, "priority": st.just("high"), "status": st.just("pending")}
                ),
                max_size=3,
            ),
        }
    ),
    st.fixed_dictionaries(
        {"sessionUpdate": st.just("subagent_update"), "sessionId": child_ids},
        optional={
            "title": st.one_of(st.none(), sized_texts),
            "description": st.one_of(st.none(), sized_texts),
            "state": st.one_of(st.none(), st.fixed_dictionaries({"state": st.sampled_from(["running", "idle"])})),
            "capabilities": json_values,
        },
    ),
    st.fixed_dictionaries(
        {"sessionUpdate": st.just("agent_thought_chunk"), "content": st.builds(text_block, sized_texts)}
    ),
    st.fixed_dictionaries(
        {"sessionUpdate": st.just("agent_message_chunk"), "content": st.builds(text_block, sized_texts)}
    ),
]

form_fields = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean", "array", "object", 5])},
    optional={
        "default": json_values,
        "enum": st.lists(json_leaf, max_size=3),
        "items": json_values,
        "minimum": json_leaf,
        "title": json_leaf,
    },
)
forms = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(st.text(max_size=5), form_fields, max_size=3)},
    optional={"required": json_values},
)


@st.composite
def newer_lines(draw: st.DrawFn) -> dict[str, Any]:
    """One line of the agent: a newer update (on the turn's session, a child's, another's) or a form."""
    if draw(st.integers(0, 9)) == 0:
        params = {"sessionId": draw(session_pool), "mode": "form", "message": "?", "requestedSchema": draw(forms)}
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(st.integers(100, 200)), "method": "elicitation/create"}
        message["params"] = params
    else:
        update = draw(st.one_of(*NEWER_UPDATES))
        params = {"sessionId": draw(session_pool), "update": update}
        message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return message


class Tally(list[tuple[str, Any]]):
    """The driver's event log, keeping nothing (so what is measured is what the core keeps): it counts the
    notices recorded for the turn's session."""

    def __init__(self) -> None:
        super().__init__()
        self.notices = 0

    def append(self, event: tuple[str, Any]) -> None:
        name, value = event
        if name == "on_update" and isinstance(value.payload, Notice) and value.session_id == SESSION:
            self.notices += 1


def _utf8(text: str | None) -> int:
    return len((text or "").encode())


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    stream=st.lists(newer_lines(), min_size=1, max_size=30),
    max_notices=st.sampled_from([1, 3, 1000]),
    max_notice_bytes=st.sampled_from([1, 2 * KiB, 100 * KiB]),
    max_subagents=st.sampled_from([1, 4, 1000]),
    max_subagent_bytes=st.sampled_from([1, 2 * KiB, 100 * KiB]),
    piece=st.sampled_from([None, 997]),  # whole, or cut across every line (7 bytes a poll took minutes on a big id)
)
def test_random_newer_updates_keep_a_turn_within_its_limits_and_count_what_was_left_out(
    *,
    stream: list[dict[str, Any]],
    max_notices: int,
    max_notice_bytes: int,
    max_subagents: int,
    max_subagent_bytes: int,
    piece: int | None,
) -> None:
    limits = TransferLimits(
        max_update_bytes=LINE,
        max_notices=max_notices,
        max_notice_bytes=max_notice_bytes,
        max_subagents=max_subagents,
        max_subagent_bytes=max_subagent_bytes,
    )
    core = Conversation(
        epoch=1,
        transfer_limits=limits,
        reader_limits=ReaderLimits(LINE),
        policy=PermissionPolicy(allow_all=True),
        client_info=ClientInfo("fuzz", "1"),
        has_observer=True,
        features=ClientFeatures(True, True, True, True, True),
    )
    driver = Driver(core, piece)
    driver.reader = LineReader(None, ReaderLimits(LINE))
    tally = driver.events = Tally()
    driver.send(core.initialize().message)
    driver.feed(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n')
    driver.send(core.new_session("/w").message)
    driver.feed(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}\n')
    driver.send(core.prompt(SESSION, "go").message)
    messages = [expanded(message) for message in stream]
    lines = [json.dumps(message, ensure_ascii=False).encode() + b"\n" for message in messages]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        try:
            driver.feed(b"".join(lines))
        except TinyAcpError as exc:  # pragma: no cover - the property is that none does
            raise AssertionError(f"{exc!r} escaped") from exc
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # What the turn holds on to: its notices and children, within their byte limits (Python's objects cost more
    # than their text: a generous factor, and a constant for the small ones), never what the agent sent.
    assert kept <= 8 * (max_notice_bytes + max_subagent_bytes) + 256 * KiB, kept
    assert len(core._children) <= max_subagents
    assert core._children_bytes <= max_subagent_bytes

    driver.feed(b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n')
    result = driver.done[-1]
    assert isinstance(result, PromptResult)
    assert len(result.notices) + result.notices_dropped == tally.notices
    assert len(result.notices) <= max_notices
    assert sum(_utf8(n.severity) + _utf8(n.title) + _utf8(n.description) for n in result.notices) <= max_notice_bytes
    assert len(result.subagents) <= max_subagents
    assert all(child.session_id != SESSION for child in result.subagents)
    assert core._children == {} and core._children_bytes == 0  # forgotten when the turn ends


class Sink:
    """A stream that keeps nothing: what is measured is what the display keeps."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class Shown(list[tuple[str, Any]]):
    """The driver's event log, keeping nothing: each update goes to the command's display as the command's
    observer sends it, and each form is read as the command reads it."""

    def __init__(self, display: Display) -> None:
        super().__init__()
        self.display = display

    def append(self, event: tuple[str, Any]) -> None:
        name, value = event
        if name == "on_update":
            self.display.update(value)
        elif name == "on_elicitation":
            fields = fields_of(value.requested_schema)
            for spec in fields if isinstance(fields, list) else ():
                prompt_of(spec)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(stream=st.lists(newer_lines(), min_size=1, max_size=30), repeat=st.sampled_from([1, 4]))
def test_the_commands_display_shows_random_newer_updates_keeping_only_what_it_shows(
    *, stream: list[dict[str, Any]], repeat: int
) -> None:
    core = Conversation(
        epoch=1,
        transfer_limits=TransferLimits(max_update_bytes=LINE),
        reader_limits=ReaderLimits(LINE),
        policy=PermissionPolicy(allow_all=True),
        client_info=ClientInfo("fuzz", "1"),
        has_observer=True,
        features=ClientFeatures(True, True, True, True, True),
    )
    display = Display(Sink(), None)  # type: ignore[arg-type]  # a stream that keeps nothing
    driver = Driver(core, None)
    driver.reader = LineReader(None, ReaderLimits(LINE))
    driver.events = Shown(display)
    driver.send(core.initialize().message)
    driver.feed(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n')
    driver.send(core.new_session("/w").message)
    driver.feed(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}\n')
    driver.send(core.prompt(SESSION, "go").message)
    data = b"".join(json.dumps(expanded(message), ensure_ascii=False).encode() + b"\n" for message in stream)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(repeat):  # the same traffic again and again: nothing it keeps may grow with it
            driver.feed(data)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The turn's own limits (1 MiB of notices, 1 MiB of children) and the display's few lines and names.
    assert kept <= 8 * MiB, kept
    display.stop()
