"""Resources over a long life: 500 clients started and closed in a row leave nothing behind.

A bot or an eval harness starts and closes agents for hours; whatever one client leaks, a day of them leaks five
hundred times over. Each test starts :data:`CLIENTS` clients one after the other; each answers ``initialize``
and is closed. The agent is :data:`AGENT`, a shell that answers ``initialize`` and then becomes ``cat`` until
its stdin closes: a whole exchange and a teardown, at a millisecond or two per client, where a Python agent
would cost fifty. After a warm-up of :data:`WARM_UP` clients (imports, the allocator's arenas, asyncio's worker
threads) each test takes a baseline, and after all of them it checks, in this process:

- open fds: exactly the baseline;
- OS threads: at most the baseline (the kill timer and the stderr thread of each client are gone);
- child processes, zombies included: none left;
- Python objects (``gc.get_objects()``): at most :data:`OBJECT_SLACK` more; a leak of one object per client
  would be 500;
- resident memory: at most :data:`RSS_SLACK` more than the baseline, and at most :data:`RSS_SLACK_HALF` between
  the middle and the end (a leak grows with the count; allocator noise does not).

Every other client uses ``stderr="tail"`` (a pipe and a thread each) and every fifth one runs under
``supervise=True``, so those paths are counted too. The bounds are documented in RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import tinyacp
from helpers import wait_for
from tinyacp._process import _live_group_members

CLIENTS = 500
WARM_UP = 20
OBJECT_SLACK = 50
"""More Python objects after 500 clients than after the warm-up: what the interpreter caches (2 measured)."""
RSS_SLACK = 1024 * 1024
"""More resident memory after 500 clients than after the warm-up: allocator noise (at most 24 KiB measured)."""
RSS_SLACK_HALF = 512 * 1024
"""More resident memory after 500 clients than after 250."""
INIT_ANSWER = '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'
AGENT = ["sh", "-c", f"read -r request; printf '%s\\n' '{INIT_ANSWER}'; exec cat"]


@dataclass(frozen=True)
class Footprint:
    fds: int
    threads: int
    children: frozenset[int]
    objects: int
    rss: int

    @classmethod
    def now(cls) -> Footprint:
        gc.collect()
        pids: set[int] = set()
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(FileNotFoundError):
                pids.update(int(pid) for pid in Path(f"/proc/self/task/{task}/children").read_text().split())
        resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
        return cls(
            fds=len(os.listdir("/proc/self/fd")),
            threads=len(os.listdir("/proc/self/task")),
            children=frozenset(pids),
            objects=len(gc.get_objects()),
            rss=resident_pages * os.sysconf("SC_PAGE_SIZE"),
        )


def options(number: int) -> tinyacp.Options:
    return tinyacp.Options(
        command=AGENT,
        stderr="tail" if number % 2 else "discard",
        supervise=number % 5 == 0,
        kill_grace=1.0,
        timeout=10,
        observer=tinyacp.BaseObserver(),
    )


def check(baseline: Footprint, middle: Footprint, after: Footprint) -> None:
    assert after.fds == baseline.fds, f"fds: {baseline.fds} after the warm-up, {after.fds} after {CLIENTS} clients"
    assert after.threads <= baseline.threads, f"threads: {baseline.threads} -> {after.threads}"
    assert after.children <= baseline.children, f"child processes left: {sorted(after.children - baseline.children)}"
    assert after.objects - baseline.objects <= OBJECT_SLACK, f"objects: {baseline.objects} -> {after.objects}"
    assert after.rss - baseline.rss <= RSS_SLACK, f"RSS: {baseline.rss} -> {after.rss} bytes"
    assert after.rss - middle.rss <= RSS_SLACK_HALF, f"RSS: {middle.rss} at {CLIENTS // 2} -> {after.rss} bytes"


def settled(baseline: Footprint) -> Footprint:
    """The footprint once threads that were told to end have ended and children were reaped."""
    wait_for(lambda: Footprint.now().threads <= baseline.threads, what="helper threads to end")
    wait_for(lambda: Footprint.now().children <= baseline.children, what="children reaped")
    return Footprint.now()


@pytest.mark.slow
def test_500_sync_clients_in_a_row_leave_no_fd_thread_process_or_memory_behind() -> None:
    def one(number: int) -> None:
        client = tinyacp.Client(options(number))
        pid = client.pid
        assert client.initialize().protocol_version == 1
        client.close()
        assert client.returncode is not None
        assert not _live_group_members(pid)

    for number in range(WARM_UP):
        one(number)
    baseline = settled(Footprint.now())
    for number in range(CLIENTS // 2):
        one(number)
    middle = settled(baseline)
    for number in range(CLIENTS // 2):
        one(number)

    check(baseline, middle, settled(baseline))


@pytest.mark.slow
def test_500_async_clients_in_a_row_leave_no_fd_thread_process_or_memory_behind() -> None:
    async def one(number: int) -> None:
        async with tinyacp.AsyncClient(options(number)) as client:
            pid = client.pid
            assert (await client.initialize()).protocol_version == 1
        assert client.returncode is not None
        assert not _live_group_members(pid)

    async def main() -> tuple[Footprint, Footprint, Footprint]:
        # One worker thread for the teardowns: the default pool may start up to six when the machine is busy
        # (a worker not yet idle again when the next teardown comes), which is the pool's choice, not a leak.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        for number in range(WARM_UP):
            await one(number)
        baseline = settled(Footprint.now())  # the loop's worker thread exists by now, and is reused
        for number in range(CLIENTS // 2):
            await one(number)
        middle = settled(baseline)
        for number in range(CLIENTS // 2):
            await one(number)
        return baseline, middle, settled(baseline)

    async def bounded() -> tuple[Footprint, Footprint, Footprint]:
        async with asyncio.timeout(120):
            return await main()

    check(*asyncio.run(bounded()))
