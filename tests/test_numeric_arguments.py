"""Property tests: whatever number (or non-number) a caller passes for a duration, a limit or a count of the
public library API, the call works or raises the documented ``ValueError`` naming the argument, within a time
bound, before anything is spawned or written; never an ``OverflowError`` from deep inside, never a hang.

The bounds (docs/limits.md): a timeout or grace is an int or float of seconds from 0 to 1,000,000 (a timeout may
also be None); ``max_line`` an int from 1 to 1 GiB; a transfer limit an int of at least 1; an epoch, an attempt and
``max_turn_bytes`` an int from 1 to 2**53 - 1; a batch's ``concurrency`` from 1 to 10,000 and ``retries`` from 0
to 1,000,000.
"""

from __future__ import annotations

import inspect
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyacp
from helpers import MakeClient
from tinyacp import view
from tinyacp.batch import parse_item, run_batch
from tinyacp.batch._turn import TurnSettings

MAX_SECONDS = 1_000_000
MAX_SAFE_INT = (1 << 53) - 1
DEMO = [sys.executable, "-m", "tinyacp.demo"]
CALL_BOUND = 20.0
"""Seconds one example may take, a real agent's start and teardown included: a hang fails it."""
CHECK_BOUND = 5.0
"""Seconds a refusal may take: it is a comparison, so this only leaves room for a loaded machine."""

EDGES = [
    0,
    -0.0,
    1e-300,
    0.001,
    1,
    MAX_SECONDS,
    MAX_SECONDS + 1,
    MAX_SECONDS + 1e-9,
    2**31,
    2**53,
    2**63,
    2**64,
    10**400,
    -(10**400),
    1e300,
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    False,
    -1,
    1 << 30,
    (1 << 30) + 1,
    10_000,
    10_001,
]
numbers = st.one_of(
    st.sampled_from(EDGES),
    st.floats(),
    st.integers(),
    st.integers(-5, MAX_SECONDS * 2),
    st.floats(0, MAX_SECONDS * 2),
)
anything = st.one_of(numbers, st.none(), st.text(max_size=3), st.just([1]))

PURE = settings(
    max_examples=300, deadline=int(CHECK_BOUND * 1000), suppress_health_check=[HealthCheck.function_scoped_fixture]
)
REAL = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def is_seconds(value: object, *, none: bool = False) -> bool:
    """The oracle of a duration: an int or float (not a bool) from 0 to 1,000,000, or None where allowed."""
    if value is None:
        return none
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= MAX_SECONDS


def is_count(value: object, least: int, most: int | None = None) -> bool:
    """The oracle of a count: an int (not a bool) from ``least`` to ``most``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return least <= value and (most is None or value <= most)


def accepted(make: Callable[[], Any], name: str, expected: bool) -> bool:
    """Call ``make``: it succeeds when ``expected``, else raises ValueError naming ``name``, at once."""
    started = time.monotonic()
    try:
        make()
    except ValueError as exc:
        assert not expected, f"{name}: refused a good value: {exc}"
        assert name in str(exc)
        assert len(str(exc)) < 300  # a huge int is said by its size, not its digits
        return False
    finally:
        assert time.monotonic() - started < CHECK_BOUND
    assert expected, f"{name}: took a bad value"
    return True


# ----------------------------------------------------------------------------------------------------------------
# The values: each is checked where it is made.


@pytest.mark.parametrize("field", ["timeout", "kill_grace", "cancel_grace"])
@given(value=anything)
@PURE
def test_an_options_duration_is_a_number_of_seconds_up_to_a_million_or_a_value_error(field: str, value: Any) -> None:
    accepted(
        lambda: tinyacp.Options(command=["agent"], **{field: value}), field, is_seconds(value, none=field == "timeout")
    )


@given(value=anything)
@PURE
def test_an_epoch_is_an_int_that_json_keeps_exactly_or_a_value_error(value: Any) -> None:
    accepted(lambda: tinyacp.Options(command=["agent"], epoch=value), "epoch", is_count(value, 1, MAX_SAFE_INT))


@given(value=anything)
@PURE
def test_max_line_is_an_int_up_to_one_gib_or_a_value_error(value: Any) -> None:
    accepted(lambda: tinyacp.ReaderLimits(max_line=value), "max_line", is_count(value, 1, 1 << 30))


@pytest.mark.parametrize(
    "field",
    [
        "max_message_bytes",
        "max_update_bytes",
        "max_updates",
        "max_reply_bytes",
        "max_reply_chunks",
        "max_notices",
        "max_notice_bytes",
        "max_subagents",
        "max_subagent_bytes",
    ],
)
@given(value=anything)
@PURE
def test_a_transfer_limit_is_a_positive_int_or_a_value_error(field: str, value: Any) -> None:
    accepted(lambda: tinyacp.TransferLimits(**{field: value}), field, is_count(value, 1))


@pytest.mark.parametrize("field", ["reader_limits", "transfer_limits", "features"])
def test_options_refuse_a_limits_object_of_another_type(field: str) -> None:
    wrong: dict[str, Any] = {field: 2 << 20}
    with pytest.raises(TypeError, match=field):
        tinyacp.Options(command=["agent"], **wrong)


@given(value=anything)
@PURE
def test_an_items_timeout_is_a_number_of_seconds_or_a_batch_item_error(value: Any) -> None:
    try:
        parse_item({"id": "a", "prompt": "hi", "timeout": value})
    except tinyacp.BatchItemError as exc:
        # A value that is not a number at all is refused by the item's types, before its range is looked at.
        assert not is_seconds(value, none=True), exc
    else:
        assert is_seconds(value, none=True)


@pytest.mark.parametrize("field", ["timeout", "kill_grace", "cancel_grace", "attempt"])
@given(value=numbers)
@PURE
def test_a_turn_option_is_checked_when_the_call_is_made(field: str, value: Any) -> None:
    good = is_count(value, 1, MAX_SAFE_INT) if field == "attempt" else is_seconds(value, none=field == "timeout")
    accepted(lambda: TurnSettings.from_options({field: value}), field, good)


# ----------------------------------------------------------------------------------------------------------------
# A client: a bad value starts no agent; a good one gives a working client.


def marking_agent(marker: Path) -> list[str]:
    """The demo agent, started by a program that first leaves ``marker``: proof that something was spawned."""
    code = (
        "import runpy, sys; open(sys.argv[1], 'a').close(); sys.argv = ['tinyacp.demo']; "
        "runpy.run_module('tinyacp.demo', run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", code, str(marker)]


@pytest.mark.parametrize("field", ["timeout", "kill_grace", "cancel_grace", "epoch", "max_line"])
def test_a_client_made_with_any_value_works_or_is_refused_before_its_agent_starts(
    tmp_path: Path, make_client: MakeClient, field: str
) -> None:
    examples = iter(range(10**6))

    @given(value=numbers)
    @REAL
    def check(value: Any) -> None:
        marker = tmp_path / f"started-{next(examples)}"
        started = time.monotonic()
        try:
            options = {field: value} if field != "max_line" else {"reader_limits": tinyacp.ReaderLimits(max_line=value)}
            client = make_client(command=marking_agent(marker), observer=tinyacp.BaseObserver(), **options)
        except ValueError as exc:
            assert field in str(exc)
            assert not marker.exists(), "an agent was started for a refused value"
            return
        try:
            client.initialize(timeout=CALL_BOUND)
            session = client.new_session(tmp_path, timeout=CALL_BOUND)
            assert client.prompt(session.id, "hi", timeout=CALL_BOUND).text
        except tinyacp.AgentTimeout:
            assert field == "timeout"  # none or almost none: the documented error of a deadline that passed
        finally:
            client.close()
        assert marker.exists()
        assert time.monotonic() - started < CALL_BOUND

    check()


@pytest.mark.parametrize("fd", [-1, True, 10**30, 2**31, 2**20])
def test_a_stderr_fd_that_is_not_open_is_refused_before_the_agent_starts(
    tmp_path: Path, make_client: MakeClient, fd: int
) -> None:
    marker = tmp_path / "started"
    with pytest.raises(ValueError, match="stderr"):
        make_client(command=marking_agent(marker), stderr=fd)
    assert not marker.exists()


ARGUMENTS: dict[str, Any] = {
    "method_id": "login",
    "cwd": ".",
    "session_id": "s1",
    "mode_id": "m",
    "config_id": "c",
    "value": "v",
    "model_id": "m",
    "content": "hi",
    "method": "_x/y",
}


def calls_with_a_timeout() -> list[str]:
    names = [
        name
        for name, member in inspect.getmembers(tinyacp.Client)
        if not name.startswith("_") and callable(member) and "timeout" in inspect.signature(member).parameters
    ]
    assert {"initialize", "new_session", "prompt", "prompt_stream", "request"} <= set(names)
    return names


class Sends(tinyacp.BaseObserver):
    """Counts what the client writes."""

    def __init__(self) -> None:
        self.count = 0

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        self.count += 1


@pytest.mark.parametrize("call", calls_with_a_timeout())
def test_every_call_takes_any_timeout_or_refuses_it_before_writing_anything(
    tmp_path: Path, make_client: MakeClient, call: str
) -> None:
    sends = Sends()
    client = make_client(command=DEMO, observer=sends)
    client.initialize(timeout=CALL_BOUND)
    session = client.new_session(tmp_path, timeout=CALL_BOUND)
    parameters = inspect.signature(getattr(tinyacp.Client, call)).parameters
    arguments = {name: ARGUMENTS[name] for name in parameters if name in ARGUMENTS}
    if "session_id" in arguments:
        arguments["session_id"] = session.id

    @given(value=anything)
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    def check(value: Any) -> None:
        before = sends.count
        started = time.monotonic()
        if is_seconds(value, none=True):
            return  # a good value reaches the agent: the working calls are below, one example each
        with pytest.raises(ValueError, match="timeout"):
            getattr(client, call)(**arguments, timeout=value)
        assert sends.count == before, "a refused call wrote something"
        assert time.monotonic() - started < CHECK_BOUND
        assert not client.closed

    check()
    # The client is as usable as before, and a good timeout works (huge, tiny and none at all).
    for timeout in (MAX_SECONDS, float(CALL_BOUND), None):
        assert client.prompt(session.id, "hi", timeout=timeout).text


def test_a_prompt_stream_refuses_a_bad_timeout_when_it_is_made_not_when_it_is_read(
    tmp_path: Path, make_client: MakeClient
) -> None:
    sends = Sends()
    client = make_client(command=DEMO, observer=sends)
    client.initialize(timeout=CALL_BOUND)
    session = client.new_session(tmp_path, timeout=CALL_BOUND)
    before = sends.count
    with pytest.raises(ValueError, match="timeout"):
        client.prompt_stream(session.id, "hi", timeout=1e308)
    assert sends.count == before


def test_the_process_refuses_a_grace_that_would_overflow_its_waits(make_client: MakeClient) -> None:
    client = make_client(command=DEMO)
    proc = client.inner._proc if hasattr(client, "inner") else client._proc
    for grace in (1e300, 2**63, MAX_SECONDS + 1):
        with pytest.raises(ValueError, match="grace"):
            proc.start_kill(grace)
        with pytest.raises(ValueError, match="grace"):
            proc.terminate(grace)
    assert proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# A batch and the page.


@pytest.mark.parametrize("field", ["concurrency", "retries", "timeout", "kill_grace", "cancel_grace"])
def test_run_batch_takes_any_value_or_refuses_it_before_creating_anything(tmp_path: Path, field: str) -> None:
    examples = iter(range(10**6))
    oracle: dict[str, Callable[[object], bool]] = {
        "concurrency": lambda value: is_count(value, 1, 10_000),
        "retries": lambda value: is_count(value, 0, 1_000_000),
        "timeout": lambda value: is_seconds(value, none=True),
    }
    good = oracle.get(field, is_seconds)

    @given(value=numbers)
    @REAL
    def check(value: Any) -> None:
        out = tmp_path / f"out-{next(examples)}"
        started = time.monotonic()
        try:
            summary = run_batch([{"id": "a", "prompt": "hi"}], out, agent="demo", **{field: value})
        except ValueError as exc:
            assert not good(value), exc
            assert field in str(exc)
            assert not out.exists(), "a refused batch created its output directory"
            return
        assert good(value)
        # A timeout of (almost) nothing ends the turn as a recorded failure, never as an exception.
        assert summary.all_ok or field == "timeout"
        assert time.monotonic() - started < CALL_BOUND

    check()


@given(value=anything)
@settings(max_examples=100, deadline=5000, suppress_health_check=list(HealthCheck))
def test_render_html_takes_any_max_turn_bytes_or_refuses_it(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "run.jsonl"
    if not path.exists():
        with tinyacp.JsonlJournal(path) as journal:
            journal.begin_epoch()
    good = is_count(value, 1, MAX_SAFE_INT)
    pages: list[str] = []
    accepted(lambda: pages.append(view.render_html(path, max_turn_bytes=value)), "max_turn_bytes", good)
    assert all(page.startswith("<!") for page in pages)


def test_a_journal_at_the_largest_epoch_refuses_a_next_one_before_writing_it(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"type": "epoch", "epoch": MAX_SAFE_INT - 1, "ts": "2026-01-01T00:00:00Z"}) + "\n")
    with tinyacp.JsonlJournal(path) as journal:
        epoch = journal.begin_epoch()
        assert tinyacp.Options(command=["agent"], observer=journal, epoch=epoch).epoch == MAX_SAFE_INT
        size = path.stat().st_size
        with pytest.raises(tinyacp.UsageError, match="no epoch left"):
            journal.begin_epoch()
        assert path.stat().st_size == size


@given(value=numbers)
@PURE
def test_a_line_readers_source_fd_is_a_c_int_or_a_value_error(value: Any) -> None:
    if isinstance(value, float):
        with pytest.raises(TypeError):
            tinyacp.LineReader(value)
        return
    good = is_count(value, 0, (1 << 31) - 1)
    if isinstance(value, bool):
        with pytest.raises(TypeError):  # a bool is no fd, as before
            tinyacp.LineReader(value)
        return
    accepted(lambda: tinyacp.LineReader(value), "file descriptor", good)


@pytest.mark.parametrize("fd", [-1, 1 << 31, 10**30, True, 1.0])
def test_a_replayer_refuses_an_output_fd_that_is_no_c_int(fd: Any) -> None:
    from tinyacp.replay import Recording, Replayer

    with pytest.raises(ValueError, match="out_fd"):
        Replayer(Recording(epoch=1), strict=True, out_fd=fd)


@pytest.mark.parametrize("value", [0, -1, 1.5, float("nan"), 2**53, 10**400, True])
def test_write_html_refuses_max_turn_bytes_before_writing_the_page(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "run.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        journal.begin_epoch()
    out = tmp_path / "page.html"
    with pytest.raises(ValueError, match="max_turn_bytes"):
        view.write_html(path, out, max_turn_bytes=value)
    assert not out.exists()
    assert view.write_html(path, out, max_turn_bytes=2**53 - 1) == out
