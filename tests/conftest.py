"""The fixtures the tests share: scripted agents, one client API over both shells, a scratch home for the
command. Their helpers (and every other helper) are in ``tests/helpers/``.

Every client a test makes through ``make_client`` is checked after the test: its agent's process group must
have no live member left, and the client must be closed.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import AsyncFacade, ClientLike, Scripted, wait_for
from helpers.cli import Cli, marked_processes
from helpers.traces import Phoenix, running_phoenix
from tinyacp._process import _live_group_members


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


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(tmp_path)
    yield runner
    runner.close()
    wait_for(lambda: not marked_processes(runner.marker), timeout=10, what="no process of the run left")


@pytest.fixture(params=[None, 1], ids=["whole", "bytewise"])
def piece(request: pytest.FixtureRequest) -> int | None:
    value: int | None = request.param
    return value


@pytest.fixture(scope="session")
def phoenix() -> Iterator[Phoenix]:
    """One Phoenix server per test process, on loopback, for the tests that read spans back (each its own
    project): tests/helpers/traces.py."""
    with running_phoenix() as server:
        yield server
