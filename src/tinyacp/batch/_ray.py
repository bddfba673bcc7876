"""The Ray engine: one async actor per node runs many turns at once with the asyncio client.

The shape follows what was measured: a Ray task per turn costs a worker process per turn in flight (tens of
MiB and up to 120 ms each), while one async actor per node costs some ms of CPU per turn, flat in the number of
turns in flight (``python -m benchmarks.batch``). Decisions:

* Capacity. A node that advertises the custom resource ``tinyacp_turns`` (``ray start --resources
  '{"tinyacp_turns": 16}'``) runs at most that many turns, and its actor holds the resource; when some node
  advertises it, only such nodes are used. Otherwise every alive node takes up to ``concurrency`` turns. Over
  the cluster, at most ``concurrency`` turns are in flight (the global window); each new turn goes to the
  actor with the most free slots.
* No silent re-runs. A turn edits files: actors have ``max_restarts=0`` and ``max_task_retries=0``; retries are
  tinyacp's (``retries``, default 0), each a new epoch of the journal. A turn whose actor died (the node went
  away, the process was killed) becomes a record with the error ``ActorDied``; a new actor takes the node's
  next turns if the node is still alive.
* Niceness. Ray starts workers at a raised niceness, which the agents would inherit; the actor sets its
  threads back to 0 (needs the privilege to lower it; otherwise it stays as it was).
* Storage. Journals and results are written where the turns run and where the driver runs: on more than one
  node, ``out_dir`` must be shared storage at the same path. Each actor checks it sees a file the driver
  wrote there before any turn starts (:class:`~tinyacp.BatchStorageError` otherwise).
* Loopback. A cluster started for the batch listens on 127.0.0.1 only, without the dashboard:
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before Ray is imported (Ray then takes the loopback address as
  the machine's) and the node's address is 127.0.0.1. Joining a cluster, the variable is left alone: a driver
  that calls itself 127.0.0.1 could not be reached by the other nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import BatchEngineError, BatchStorageError
from .._journal import last_epoch
from ._engine import Run, cpu_seconds
from ._items import Item, item_key, journal_name
from ._turn import _HOST, PermissionCounts, TurnError, TurnRecord, TurnSettings, resolve_agent, turn

__all__ = ["RESOURCE", "TurnActor", "run_on_ray"]

RESOURCE = "tinyacp_turns"
"""The custom resource a node advertises to say how many turns it may run at once."""

# How long actors may take to start and answer their first call: a new worker process imports Ray and tinyacp
# (a few seconds on a loaded 2-core machine); a node short of the resource would otherwise wait for ever.
_START_TIMEOUT = 120.0
# Room for the actor's own calls (info, stop) beside its turns.
_CONTROL_CALLS = 2


def import_ray(loopback: bool) -> Any:
    """Import Ray; for a cluster of our own (``loopback``), with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` set first
    (unless the caller set it), which makes Ray take the loopback address as this machine's on every platform.

    Raises:
        BatchEngineError: Ray is not installed.
    """
    if loopback:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise BatchEngineError('the Ray engine needs Ray: pip install "tinyacp[ray]"') from None
    return ray


def _renice() -> int:
    """Set every thread of this process to niceness 0 (Linux niceness is per thread); return the niceness."""
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, 0)
    return os.getpriority(os.PRIO_PROCESS, 0)


class TurnActor:
    """Runs turns of a batch on one node; made a Ray actor by the engine (an async actor: many turns at once)."""

    def __init__(self) -> None:
        _renice()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._node: str | None = None
        self._settings = TurnSettings()
        self._journals = Path()

    async def info(self, probe: str, journals: str, settings: TurnSettings) -> dict[str, Any]:
        """Who and where the actor is, and whether it sees the driver's probe file and can write journals; keeps
        the batch's settings and journal directory for its turns (sent once, not with every turn)."""
        import ray

        self._settings, self._journals = settings, Path(journals)
        niceness = _renice()  # the event loop's thread, where the agents are started
        self._node = ray.get_runtime_context().get_node_id()
        problem = None
        if not os.path.isfile(probe):
            problem = f"it does not see the file {probe} the driver wrote"
        else:
            try:
                test = Path(journals) / f".probe-{secrets.token_hex(8)}"
                test.write_bytes(b"")
                test.unlink()
            except OSError as exc:
                problem = f"it cannot write to {journals}: {exc}"
        info = {"node": self._node, "host": _HOST, "pid": os.getpid(), "niceness": niceness, "problem": problem}
        return info | {"cpu": cpu_seconds()}

    async def cpu(self) -> float:
        """CPU seconds this process used so far (its agents not included)."""
        return cpu_seconds()

    async def run(self, item: Item, attempt: int) -> TurnRecord:
        """Run one turn of the batch (see :meth:`info`) and return its record."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await turn(item, self._journals, self._settings, attempt, node=self._node)
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        """Cancel the turns in flight: their agents are torn down, and no record is made."""
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class _Slot:
    """One node's actor and how many of its slots are busy."""

    handle: Any
    node: str
    capacity: int
    host: str = "?"
    running: int = 0
    dead: bool = False
    cpu: float = 0.0
    """The actor's CPU seconds once it had started (its start-up is a cost per batch, not per turn)."""


@dataclass
class _Flight:
    slot: _Slot
    item: Item
    attempt: int
    first: int
    started: float = field(default_factory=time.monotonic)


class _Pool:
    """The actors of the batch, one per node."""

    def __init__(self, ray: Any, run: Run, out: Path) -> None:
        self._ray = ray
        self._run = run
        self._probe = out / f".tinyacp-probe-{secrets.token_hex(8)}"
        self._probe.write_bytes(b"")
        self._advertised = False
        self.slots: list[_Slot] = []
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _nodes(self) -> list[dict[str, Any]]:
        nodes = [node for node in self._ray.nodes() if node.get("Alive")]
        advertised = [node for node in nodes if node.get("Resources", {}).get(RESOURCE, 0) >= 1]
        self._advertised = bool(advertised)
        return advertised or nodes

    def _actor(self, node: dict[str, Any]) -> _Slot:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        advertised = int(node.get("Resources", {}).get(RESOURCE, 0))
        capacity = advertised or self._run.concurrency
        options: dict[str, Any] = {
            "num_cpus": 0,
            "max_restarts": 0,
            "max_task_retries": 0,
            "max_concurrency": capacity + _CONTROL_CALLS,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        }
        if advertised:
            options["resources"] = {RESOURCE: advertised}
        handle = self._ray.remote(TurnActor).options(**options).remote()
        return _Slot(handle, node["NodeID"], capacity)

    def _start(self) -> None:
        nodes = self._nodes()
        if not nodes:
            raise BatchEngineError("the Ray cluster has no alive node")
        self.slots = [self._actor(node) for node in nodes]
        self._check(self.slots)

    def _check(self, slots: list[_Slot]) -> None:
        ray = self._ray
        run = self._run
        refs = [slot.handle.info.remote(str(self._probe), str(run.journals), run.settings) for slot in slots]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=_START_TIMEOUT)
        if pending:
            raise BatchEngineError(
                f"{len(pending)} Ray actor(s) did not start within {_START_TIMEOUT:.0f} s "
                f"(is the {RESOURCE} resource held by another batch?)"
            )
        for slot, info in zip(slots, ray.get(refs), strict=True):
            slot.host = info["host"]
            slot.cpu = info["cpu"]
            if info["problem"] is not None:
                raise BatchStorageError(
                    f"node {slot.node} ({slot.host}) cannot use the output directory: {info['problem']}. "
                    "On a cluster of several nodes, out_dir must be on storage every node sees at the same path."
                )

    def pick(self) -> _Slot | None:
        """The actor with the most free slots, or None when all are full or gone."""
        best: _Slot | None = None
        for slot in self.slots:
            if slot.dead or slot.running >= slot.capacity:
                continue
            if best is None or slot.capacity - slot.running > best.capacity - best.running:
                best = slot
        return best

    @property
    def window(self) -> int:
        """At most this many turns in flight over the cluster."""
        return min(self._run.concurrency, sum(slot.capacity for slot in self.slots if not slot.dead))

    def lost(self, slot: _Slot) -> None:
        """The slot's actor died: replace it if its node is alive, else drop the node."""
        if slot.dead:
            return
        slot.dead = True
        with contextlib.suppress(Exception):
            self._ray.kill(slot.handle)
        alive = {node["NodeID"]: node for node in self._nodes()}
        node = alive.get(slot.node)
        if node is None:
            return
        replacement = self._actor(node)
        try:
            self._check([replacement])
        except BatchEngineError:
            return
        self.slots.append(replacement)

    def close(self) -> None:
        """Stop the turns in flight (agents torn down), then the actors; remove the probe file."""
        ray = self._ray
        live = [slot for slot in self.slots if not slot.dead]
        with contextlib.suppress(Exception):
            used = ray.get([slot.handle.cpu.remote() for slot in live], timeout=30)
            self._run.engine_cpu += sum(after - slot.cpu for slot, after in zip(live, used, strict=True))
        with contextlib.suppress(Exception):
            ray.wait([slot.handle.stop.remote() for slot in live], num_returns=len(live), timeout=30)
        for slot in live:
            with contextlib.suppress(Exception):
                ray.kill(slot.handle)
        with contextlib.suppress(OSError):
            self._probe.unlink()


def _connect(ray: Any, address: str | None) -> None:
    if address is None and not os.environ.get("RAY_ADDRESS"):
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
        return
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise BatchEngineError(f"cannot join the Ray cluster at {address or os.environ['RAY_ADDRESS']}: {exc}") from exc


def _engine_record(run: Run, flight: _Flight, error: TurnError) -> TurnRecord:
    """The record of a turn the engine lost: its journal may hold the start of the attempt."""
    path = run.journals / journal_name(item_key(flight.item.id))
    epoch = last_epoch(path)
    return TurnRecord(
        id=flight.item.id,
        ok=False,
        stop_reason=None,
        text="",
        usage=None,
        updates=0,
        permissions=PermissionCounts(),
        seconds=round(time.monotonic() - flight.started, 6),
        error=error,
        journal=str(path),
        epoch=epoch or None,
        attempt=flight.attempt,
        host=flight.slot.host,
        agent=resolve_agent(flight.item, run.settings).name,
        node=flight.slot.node,
    )


class _Driver:
    """The global window: submit turns to the least busy actor, collect records, retry as asked."""

    def __init__(self, ray: Any, run: Run, pool: _Pool) -> None:
        self._ray = ray
        self._run = run
        self._pool = pool
        self._flights: dict[Any, _Flight] = {}

    def _submit(self, slot: _Slot, item: Item, attempt: int, first: int) -> None:
        ref = slot.handle.run.remote(item, attempt)
        slot.running += 1
        self._flights[ref] = _Flight(slot, item, attempt, first)

    def _outcome(self, ref: Any, flight: _Flight) -> TurnRecord:
        ray = self._ray
        try:
            record: TurnRecord = ray.get(ref)
            return record
        except ray.exceptions.RayActorError as exc:
            self._pool.lost(flight.slot)
            message = (
                f"the Ray actor running the turn on node {flight.slot.node} ({flight.slot.host}) died; "
                f"the turn was not run again: {exc}"
            )
            return _engine_record(self._run, flight, TurnError("ActorDied", message[:4096]))
        except ray.exceptions.RayError as exc:
            return _engine_record(self._run, flight, TurnError(type(exc).__name__, str(exc)[:4096]))

    def _finish(self, ref: Any) -> None:
        flight = self._flights.pop(ref)
        flight.slot.running -= 1
        record = self._outcome(ref, flight)
        if not record.ok and flight.attempt - flight.first < self._run.retries:
            slot = self._pool.pick()
            if slot is not None:
                self._submit(slot, flight.item, flight.attempt + 1, flight.first)
                return
        self._run.sink(record)

    def drive(self) -> None:
        run = self._run
        pool = self._pool
        while True:
            while (
                len(self._flights) < pool.window
                and (slot := pool.pick()) is not None
                and (planned := run.take()) is not None
            ):
                self._submit(slot, planned[0], planned[1], planned[1])
            if not self._flights:
                break
            ready, _ = self._ray.wait(list(self._flights), num_returns=1)
            for ref in ready:
                self._finish(ref)
        run.raise_stop()
        if not run.exhausted:
            raise BatchEngineError("no Ray node is left to run turns; run the batch again to finish it")


def run_on_ray(run: Run, out: Path, address: str | None) -> None:
    """Run the plan on a Ray cluster: the one this process is connected to, ``address``, or a local one.

    Raises:
        BatchEngineError: Ray is missing or unreachable, actors do not start, or every node is gone.
        BatchStorageError: a node cannot see or write ``out``.
        BatchItemError: a malformed item (after the turns in flight are recorded).
    """
    already = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    ray = import_ray(loopback=not already and address is None and not os.environ.get("RAY_ADDRESS"))
    connected = ray.is_initialized()
    if not connected:
        _connect(ray, address)
    try:
        pool = _Pool(ray, run, out)
        try:
            _Driver(ray, run, pool).drive()
        finally:
            pool.close()
    finally:
        if not connected:
            ray.shutdown()
