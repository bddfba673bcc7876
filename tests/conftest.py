"""Shared test fixtures: scripted agents, a recording observer, and one client API over both shells.

Every client a test makes through ``make_client`` is checked after the test: its agent's process group must
have no live member left, and the client must be closed.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from tinyacp._process import _live_group_members

TESTS = Path(__file__).resolve().parent
AGENTS = TESTS / "agents"
ACP = TESTS / "acp"
"""The copy of the ACP schema and examples the tests read (see acp/README.md for its origin and licence)."""
SCHEMA_PATH = ACP / "schema" / "v1" / "schema.json"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: without it (``-p no:xdist``) it is never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n``, a worker that runs out of tests takes some from another's queue (``worksteal``) instead of
    the fixed shares of ``load``: the suite's tests last from milliseconds to seconds, and with fixed shares one
    worker sat idle while the other finished (about 20 s of 170 on 2 cores). A ``--dist`` other than ``load``
    is left as asked."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped]  # xdist ships no types

    return WorkStealingScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: two workers per core. A quarter of the suite's time is spent waiting on agents (their start,
    deadlines that must pass, a grace before a kill), and a second worker on each core runs tests meanwhile: on 2
    cores the suite took about 155 s with 2 workers and 130 s with 4. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still
    decides when it is set, and ``-n logical`` is left to xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.getoption("numprocesses") == "logical":
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cores


@pytest.hookimpl(trylast=True)  # after pytest has selected the tests by -m and -k
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``pytest -m core`` is the fast loop: the first layer's modules mark their tests ``core`` (``pytestmark``),
    and their slow tests (a gibibyte through the reader, hypothesis at hundreds of examples) are left out of it;
    any other expression (``-m "core and slow"``) selects as written.

    Under pytest-xdist the slow tests are spread over the workers' first shares (see :func:`spread_slow_tests`).
    """
    if config.getoption("markexpr").strip() == "core":
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if os.environ.get("PYTEST_XDIST_WORKER") and workers > 1:
        items[:] = spread_slow_tests(items, workers)


def spread_slow_tests(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The order that starts every slow test early and on every worker alike.

    xdist's first distribution gives each of ``workers`` idle workers the next ``len(left) // (workers - i)``
    items, in order; a worker that runs out takes tests from the end of the longest queue, but never the last two
    of a queue. So the slow tests go at the head of each share, dealt in turn in the order they were collected,
    and the quick tests fill the shares: none of the slow ones is left to run alone at the end, and
    what is taken from a busy worker is quick tests.
    """
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    quick = iter([item for item in items if item.get_closest_marker("slow") is None])
    ordered: list[pytest.Item] = []
    left = len(items)
    for worker in range(workers):
        share = left // (workers - worker)
        left -= share
        head = slow[worker::workers]
        ordered += head
        ordered += itertools.islice(quick, max(0, share - len(head)))
    ordered += quick
    return ordered


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    """Every test leaves the process's signal handling as it found it: the handlers, the main thread's mask and
    the wake-up fd. A test that leaves SIGINT blocked or handled breaks every later Ctrl-C test of its worker."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD)
    handlers = [signal.getsignal(sig) for sig in watched]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup)
    yield
    after_wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(after_wakeup)
    assert [signal.getsignal(sig) for sig in watched] == handlers, "a signal handler was left changed"
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask, "the main thread's signal mask was left changed"
    assert after_wakeup == wakeup, "the signal wake-up fd was left changed"


UPDATE_KINDS = [
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
]
"""The 11 stable ``sessionUpdate`` kinds of ACP v1, in the schema's order."""

INIT_RESULT: dict[str, Any] = {
    "protocolVersion": 1,
    "agentCapabilities": {"promptCapabilities": {"image": False, "audio": False, "embeddedContext": False}},
    "agentInfo": {"name": "scripted", "version": "1"},
}


def handshake(session: str = "s1", init: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Steps that answer initialize and session/new, then wait for the prompt."""
    return [
        {"op": "expect", "method": "initialize"},
        {"op": "reply", "result": init or INIT_RESULT},
        {"op": "expect", "method": "session/new"},
        {"op": "reply", "result": {"sessionId": session}},
        {"op": "expect", "method": "session/prompt"},
    ]


def chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def end_turn(reason: str = "end_turn") -> dict[str, Any]:
    return {"op": "reply", "result": {"stopReason": reason}}


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll a condition until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except FileNotFoundError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] != b"Z"


class Recorder(tinyacp.BaseObserver):
    """Records every call in order: ``events`` is a list of (callback name, record)."""

    def __init__(
        self,
        decide: Callable[[tinyacp.PermissionRequest], tinyacp.PermissionReply | None] | None = None,
        on_decision: Callable[[tinyacp.PermissionRequest], None] | None = None,
    ) -> None:
        self.events: list[tuple[str, Any]] = []
        self._decide = decide
        self._on_decision = on_decision
        self.lock = threading.Lock()

    def _add(self, name: str, value: Any) -> None:
        with self.lock:
            self.events.append((name, value))

    def on_update(self, update: tinyacp.Update) -> None:
        self._add("update", update)

    def on_permission_request(self, request: tinyacp.PermissionRequest) -> tinyacp.PermissionReply | None:
        self._add("permission_request", request)
        return self._decide(request) if self._decide else None

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        self._add("permission_decision", request)
        if self._on_decision:
            self._on_decision(request)

    def on_message(self, message: tinyacp.AgentMessage) -> None:
        self._add("message", message)

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        self._add("send", message)

    def of(self, name: str) -> list[Any]:
        with self.lock:
            return [value for event, value in self.events if event == name]

    @property
    def updates(self) -> list[tinyacp.Update]:
        return self.of("update")


class Journaled(Recorder):
    """A Recorder that also forwards every call to a journal, so the two records can be compared."""

    def __init__(self, journal: tinyacp.JsonlJournal, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.journal = journal

    def on_update(self, update: tinyacp.Update) -> None:
        self.journal.on_update(update)
        super().on_update(update)

    def on_permission_request(self, request: tinyacp.PermissionRequest) -> tinyacp.PermissionReply | None:
        self.journal.on_permission_request(request)
        return super().on_permission_request(request)

    def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
        self.journal.on_permission_decision(request)
        super().on_permission_decision(request)

    def on_message(self, message: tinyacp.AgentMessage) -> None:
        self.journal.on_message(message)
        super().on_message(message)

    def on_send(self, message: tinyacp.OutgoingMessage) -> None:
        self.journal.on_send(message)
        super().on_send(message)

    def flush(self) -> None:
        self.journal.flush()


class Background:
    """Run a function in a thread; ``join`` waits (bounded) and re-raises what it raised."""

    def __init__(self, function: Callable[[], Any], timeout: float = 20.0) -> None:
        self.error: BaseException | None = None
        self.result: Any = None
        self.timeout = timeout

        def run() -> None:
            try:
                self.result = function()
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Any:
        self.thread.join(self.timeout)
        assert not self.thread.is_alive(), "the background call did not return"
        if self.error is not None:
            raise self.error
        return self.result


class Scripted:
    """A scripted agent's command line and the log of what it received."""

    def __init__(self, tmp_path: Path, steps: list[dict[str, Any]], name: str = "agent") -> None:
        self.script = tmp_path / f"{name}.json"
        self.log = tmp_path / f"{name}.log"
        self.script.write_text(json.dumps(steps))
        self.argv = [sys.executable, str(AGENTS / "scripted.py"), str(self.script), str(self.log)]

    def received(self) -> list[dict[str, Any]]:
        """Every JSON line the agent received, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_bytes().splitlines() if line.strip()]

    def methods(self) -> list[str | None]:
        return [message.get("method") for message in self.received()]


class AsyncFacade:
    """The sync client API over an AsyncClient, each call run to completion on a private event loop.

    ``cancel`` and ``kill`` may be called from another thread while a call runs, as with ``Client``.
    """

    def __init__(self, options: tinyacp.Options) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._client: tinyacp.AsyncClient = self._loop.run_until_complete(self._make(options))
        except BaseException:
            self._loop.close()  # a client that failed to start must not leak its loop's fds
            raise

    @staticmethod
    async def _make(options: tinyacp.Options) -> tinyacp.AsyncClient:
        return tinyacp.AsyncClient(options)

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    @property
    def inner(self) -> tinyacp.AsyncClient:
        return self._client

    @property
    def pid(self) -> int:
        return self._client.pid

    @property
    def closed(self) -> bool:
        return self._client.closed

    @property
    def returncode(self) -> int | None:
        return self._client.returncode

    def stderr_tail(self) -> bytes | None:
        return self._client.stderr_tail()

    def initialize(self, **kwargs: Any) -> tinyacp.Initialize:
        return self._run(self._client.initialize(**kwargs))  # type: ignore[no-any-return]

    def new_session(self, *args: Any, **kwargs: Any) -> tinyacp.Session:
        return self._run(self._client.new_session(*args, **kwargs))  # type: ignore[no-any-return]

    def prompt(self, *args: Any, **kwargs: Any) -> tinyacp.PromptResult:
        return self._run(self._client.prompt(*args, **kwargs))  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        """Every other call of the client: a coroutine method is run to completion, anything else returned."""
        if name.startswith("_"):
            raise AttributeError(name)
        attribute = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._run(attribute(*args, **kwargs))

        return run

    def cancel(self, session_id: str, *, meta: dict[str, Any] | None = None) -> None:
        if self._loop.is_running() and threading.current_thread() is not threading.main_thread():
            future = asyncio.run_coroutine_threadsafe(self._client.cancel(session_id, meta=meta), self._loop)
            future.result(timeout=10)
        else:
            self._run(self._client.cancel(session_id, meta=meta))

    def kill(self) -> None:
        self._client.kill()

    def close(self) -> None:
        self._run(self._client.close())

    def dispose(self) -> None:
        """Close the client if still open, then the private loop (the fixture does this after the test)."""
        try:
            if not self._client.closed:
                self._run(self._client.close())
        finally:
            self._loop.close()

    def __enter__(self) -> AsyncFacade:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ClientLike = tinyacp.Client | AsyncFacade
MakeClient = Callable[..., ClientLike]
MakeScripted = Callable[..., Scripted]


@pytest.fixture(autouse=True)
def demo_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's demo agents keep their sessions in a fresh directory, never in the user's state home."""
    directory = tmp_path_factory.mktemp("demo-state")
    monkeypatch.setenv("TINYACP_DEMO_STATE_DIR", str(directory))
    return directory


@pytest.fixture(params=["sync", "async"])
def client_kind(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def make_client(client_kind: str) -> Iterator[Callable[..., ClientLike]]:
    """Build a Client or an AsyncClient (behind the same API) from Options; check no process is left after."""
    made: list[ClientLike] = []

    def make(options: tinyacp.Options | None = None, **kwargs: Any) -> ClientLike:
        if options is None:
            kwargs.setdefault("observer", tinyacp.BaseObserver())
            options = tinyacp.Options(**kwargs)
        client: ClientLike = tinyacp.Client(options) if client_kind == "sync" else AsyncFacade(options)
        made.append(client)
        return client

    yield make
    for client in made:
        if isinstance(client, AsyncFacade):
            client.dispose()
        else:
            client.close()
    for client in made:
        pid = client.pid
        wait_for(lambda: not _live_group_members(pid), timeout=10, what=f"agent group {pid} gone")  # noqa: B023  called at once
        with pytest.raises(ChildProcessError):
            os.waitpid(client.pid, os.WNOHANG)


@pytest.fixture
def scripted(tmp_path: Path) -> Callable[..., Scripted]:
    def make(steps: list[dict[str, Any]], name: str = "agent") -> Scripted:
        return Scripted(tmp_path, steps, name)

    return make
