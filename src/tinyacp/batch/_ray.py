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
* One connection per actor. Ray places, starts and watches the actors; the turns and their records go over one
  TCP connection from each actor to the driver (JSON lines), where a Ray call per turn would cost more CPU than
  the turn's own client (measured: 1.6 ms in the actor and 1.1 ms in the driver per call, on 2 cores). The
  driver listens on its node's address (127.0.0.1 for a cluster of its own), on a port the system picks, and an
  actor proves itself with a secret it got through Ray. An actor whose connection ends before the driver closed
  it has died: its turns in flight are records with ``ActorDied``. Ray's own view of the actor (its ``serve``
  call) is checked once a second, for a node that vanished without closing the connection.
* Loopback. A cluster started for the batch listens on 127.0.0.1 only, without the dashboard:
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before Ray is imported (Ray then takes the loopback address as
  the machine's) and the node's address is 127.0.0.1. Joining a cluster, the variable is left alone: a driver
  that calls itself 127.0.0.1 could not be reached by the other nodes.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import secrets
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from .._errors import BatchEngineError, BatchStorageError
from .._journal import last_epoch
from ._items import Item, journal_path
from ._plan import Run, cpu_seconds
from ._turn import HOST, PermissionCounts, TurnError, TurnRecord, TurnSettings, agent_of_item, turn

__all__ = ["RESOURCE", "TurnActor", "load_ray", "run_on_ray"]

RESOURCE = "tinyacp_turns"
"""The custom resource a node advertises to say how many turns it may run at once."""

# How long actors may take to start and answer their first call: a new worker process imports Ray and tinyacp
# (a few seconds on a loaded 2-core machine); a node short of the resource would otherwise wait for ever.
_START_TIMEOUT = 120.0
# Room for the actor's own calls (info, serve, cpu, stop) beside its turns.
_CONTROL_CALLS = 4
# How often the driver asks Ray whether an actor it has not heard from is still alive, in seconds.
_CHECK_EVERY = 1.0
_CONNECTIONS = True
"""Turns go over connections when the actors can reach the driver (tests set it False to try the Ray calls)."""
# The longest line on a connection: an order carries its item's prompt, a record its reply.
_LINE_LIMIT = 1 << 30


class _Hello(msgspec.Struct, array_like=True):
    """An actor's first line: the batch's secret, and which actor it is."""

    secret: str
    key: int


class _Order(msgspec.Struct, array_like=True):
    """Driver to actor: run this item (``n`` names the turn on this connection)."""

    n: int
    item: Item
    attempt: int


class _Done(msgspec.Struct, array_like=True):
    """Actor to driver: the turn ``n`` ended, with its record, or with the error that kept it from making one."""

    n: int
    record: TurnRecord | None
    error: TurnError | None = None


_encode = msgspec.json.Encoder().encode
_decode_hello = msgspec.json.Decoder(_Hello).decode
_decode_order = msgspec.json.Decoder(_Order).decode
_decode_done = msgspec.json.Decoder(_Done).decode


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
        info = {"node": self._node, "host": HOST, "pid": os.getpid(), "niceness": niceness, "problem": problem}
        return info | {"cpu": cpu_seconds()}

    async def cpu(self) -> float:
        """CPU seconds this process used so far (its agents not included)."""
        return cpu_seconds()

    async def run(self, item: Item, attempt: int) -> TurnRecord:
        """Run one turn of the batch (see :meth:`info`) and return its record: a Ray call per turn, for a driver
        that the actors cannot reach (a Ray Client)."""
        path = journal_path(self._journals, item.id)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await turn(item, path, self._settings, attempt, node=self._node)
        finally:
            self._tasks.discard(task)

    async def serve(self, host: str, port: int, secret: str, key: int) -> None:
        """Connect to the driver and run the turns it sends (see :meth:`info` for the settings), many at once,
        sending each record back as its turn ends; until the driver closes the connection, which cancels the
        turns still running (their agents are torn down, and no record is made)."""
        reader, writer = await asyncio.open_connection(host, port, limit=_LINE_LIMIT)
        writer.write(_encode(_Hello(secret, key)) + b"\n")
        tasks = self._tasks

        async def one(order: _Order) -> None:
            try:
                item = order.item
                path = journal_path(self._journals, item.id)
                record = await turn(item, path, self._settings, order.attempt, node=self._node)
                done = _Done(order.n, record)
            except Exception as exc:  # never a turn's own failure (that is its record): a bug, sent as such
                done = _Done(order.n, None, TurnError(type(exc).__name__, str(exc)[:4096]))
            writer.write(_encode(done) + b"\n")

        try:
            while line := await reader.readline():
                task = asyncio.create_task(one(_decode_order(line)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            running = list(tasks)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            writer.close()

    async def stop(self) -> None:
        """Cancel the turns in flight: their agents are torn down, and no record is made."""
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class _Slot:
    """One node's actor, how many of its slots are busy, and (connection mode) its connection."""

    handle: Any
    node: str
    capacity: int
    key: int
    host: str = "?"
    running: int = 0
    dead: bool = False
    cpu: float = 0.0
    """The actor's CPU seconds once it had started (its start-up is a cost per batch, not per turn)."""
    serving: Any = None
    """The actor's ``serve`` call (connection mode): it ends when the connection does, or when the actor dies."""
    link: _Link | None = None
    """The driver's end of the actor's connection, once the actor connected and proved itself."""
    since: float = field(default_factory=time.monotonic)


@dataclass
class _Flight:
    slot: _Slot
    item: Item
    attempt: int
    first: int
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class _Contact:
    """Where the actors connect to the driver, and the secret that proves an actor is one of this batch's."""

    host: str
    port: int
    secret: str


class _Pool:
    """The actors of the batch, one per node."""

    def __init__(self, ray: Any, run: Run, out: Path, contact: _Contact | None) -> None:
        self._ray = ray
        self._run = run
        self._contact = contact
        self._keys = 0
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
        self._keys += 1
        return _Slot(handle, node["NodeID"], capacity, self._keys)

    def _start(self) -> None:
        nodes = self._nodes()
        if not nodes:
            raise BatchEngineError("the Ray cluster has no alive node")
        self.slots = [self._actor(node) for node in nodes]
        self._check(self.slots)

    def _check(self, slots: list[_Slot]) -> None:
        """Wait for the actors' start; hand them the settings; have them connect (connection mode).

        Raises:
            BatchEngineError: an actor did not start in time.
            BatchStorageError: an actor's node cannot use the output directory.
        """
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
        contact = self._contact
        if contact is not None:
            for slot in slots:
                slot.serving = slot.handle.serve.remote(contact.host, contact.port, contact.secret, slot.key)
                slot.since = time.monotonic()

    def pick(self) -> _Slot | None:
        """The actor with the most free slots, or None when all are full, gone or not connected yet."""
        best: _Slot | None = None
        connections = self._contact is not None
        for slot in self.slots:
            if slot.dead or slot.running >= slot.capacity or (connections and slot.link is None):
                continue
            if best is None or slot.capacity - slot.running > best.capacity - best.running:
                best = slot
        return best

    def live(self) -> list[_Slot]:
        """The actors that are not known to be dead."""
        return [slot for slot in self.slots if not slot.dead]

    @property
    def window(self) -> int:
        """At most this many turns in flight over the cluster."""
        return min(self._run.concurrency, sum(slot.capacity for slot in self.slots if not slot.dead))

    def lost(self, slot: _Slot) -> None:
        """The slot's actor died: replace it if its node is alive, else drop the node."""
        if slot.dead:
            return
        slot.dead = True
        if slot.link is not None:
            slot.link.close()
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
        for slot in live:
            if slot.link is not None:
                slot.link.close()  # the actor's serve() ends, cancelling what still runs
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


class _Link:
    """The driver's end of one actor's connection: non-blocking, lines in and out."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbox = bytearray()
        self.outbox = bytearray()

    def send(self, line: bytes) -> None:
        """Queue a line and write what the socket takes now."""
        self.outbox += line
        self.flush()

    def flush(self) -> None:
        """Write what the socket takes of the queued bytes."""
        while self.outbox:
            try:
                sent = self.sock.send(self.outbox)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.outbox.clear()  # the connection is gone: its end shows as EOF on the read side
                return
            del self.outbox[:sent]

    def lines(self) -> list[bytes] | None:
        """The complete lines read now; None once the connection ended."""
        try:
            data = self.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            return None
        if not data:
            return None
        self.inbox += data
        end = self.inbox.rfind(b"\n")
        if end < 0:
            return []
        lines = bytes(self.inbox[:end]).split(b"\n")
        del self.inbox[: end + 1]
        return lines

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


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
    path = journal_path(run.journals, flight.item.id)
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
        agent=agent_of_item(flight.item, run.settings).name,
        node=flight.slot.node,
    )


class _Driver(abc.ABC):
    """The global window: submit turns to the least busy actor, collect records, retry as asked."""

    def __init__(self, ray: Any, run: Run, pool: _Pool) -> None:
        self._ray = ray
        self._run = run
        self._pool = pool
        self._flights: dict[Any, _Flight] = {}

    def _settle(self, flight: _Flight, record: TurnRecord) -> None:
        """A turn ended: run it again if it failed and retries are left, else hand its record on."""
        if not record.ok and flight.attempt - flight.first < self._run.retries:
            slot = self._pool.pick()
            if slot is not None:
                self._submit(slot, flight.item, flight.attempt + 1, flight.first)
                return
        self._run.sink(record)

    def _died(self, flight: _Flight, why: str) -> None:
        message = (
            f"the Ray actor running the turn on node {flight.slot.node} ({flight.slot.host}) died; "
            f"the turn was not run again: {why}"
        )
        self._settle(flight, _engine_record(self._run, flight, TurnError("ActorDied", message[:4096])))

    @abc.abstractmethod
    def _submit(self, slot: _Slot, item: Item, attempt: int, first: int) -> None:
        """Send the turn to the slot's actor."""

    def _fill(self) -> None:
        run = self._run
        pool = self._pool
        while (
            len(self._flights) < pool.window
            and (slot := pool.pick()) is not None
            and (planned := run.take()) is not None
        ):
            self._submit(slot, planned[0], planned[1], planned[1])

    def drive(self) -> None:
        """Run every item of the plan.

        Raises:
            BatchItemError: a malformed item (after the turns in flight are recorded).
            BatchEngineError: no node is left, or an actor cannot reach the driver.
        """
        run = self._run
        try:
            while True:
                self._fill()
                if not self._flights and (run.exhausted or run.stop is not None or not self._waiting()):
                    break
                self._step()
        finally:
            self._end()
        run.raise_stop()
        if not run.exhausted:
            raise BatchEngineError("no Ray node is left to run turns; run the batch again to finish it")

    def _waiting(self) -> bool:
        """Whether an actor may still take turns, though none can now."""
        return False

    @abc.abstractmethod
    def _step(self) -> None:
        """Wait for what comes next (a record, an actor's death or connection) and handle it."""

    @abc.abstractmethod
    def _end(self) -> None:
        """Release what the driver holds (the pool closes the actors)."""


class _CallPerTurnDriver(_Driver):
    """A Ray call per turn: for a driver the actors cannot connect to (a Ray Client)."""

    def _submit(self, slot: _Slot, item: Item, attempt: int, first: int) -> None:
        ref = slot.handle.run.remote(item, attempt)
        slot.running += 1
        self._flights[ref] = _Flight(slot, item, attempt, first)

    def _step(self) -> None:
        ray = self._ray
        ready, _ = ray.wait(list(self._flights), num_returns=1)
        for ref in ready:
            flight = self._flights.pop(ref)
            flight.slot.running -= 1
            try:
                record: TurnRecord = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                self._pool.lost(flight.slot)
                self._died(flight, str(exc))
                continue
            except ray.exceptions.RayError as exc:
                record = _engine_record(self._run, flight, TurnError(type(exc).__name__, str(exc)[:4096]))
            self._settle(flight, record)

    def _end(self) -> None:
        """Nothing to release: the calls in flight end with their actors."""


class _ConnectionDriver(_Driver):
    """The turns go over one connection per actor (see the module's docstring)."""

    def __init__(self, ray: Any, run: Run, pool: _Pool, listener: socket.socket, contact: _Contact) -> None:
        super().__init__(ray, run, pool)
        self._listener = listener
        self._contact = contact
        self._numbers = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, None)
        self._checked = time.monotonic()

    def _submit(self, slot: _Slot, item: Item, attempt: int, first: int) -> None:
        link = slot.link
        assert link is not None
        self._numbers += 1
        self._flights[self._numbers] = _Flight(slot, item, attempt, first)
        slot.running += 1
        link.send(_encode(_Order(self._numbers, item, attempt)) + b"\n")
        self._want_write(slot)

    def _want_write(self, slot: _Slot) -> None:
        link = slot.link
        if link is not None:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if link.outbox else 0)
            self._selector.modify(link.sock, events, slot)

    def _waiting(self) -> bool:
        return any(slot.link is None for slot in self._pool.live())

    def _step(self) -> None:
        for key, events in self._selector.select(_CHECK_EVERY):
            data = key.data
            if data is None:
                self._accept()
            elif isinstance(data, bytearray):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)  # a bytearray is the inbox of an accepted connection
                self._hello(sock, data)
            elif not data.dead:  # a slot, unless an earlier event of this batch found its actor dead
                if events & selectors.EVENT_WRITE and data.link is not None:
                    data.link.flush()
                    self._want_write(data)
                if events & selectors.EVENT_READ:
                    self._read(data)
        if time.monotonic() - self._checked >= _CHECK_EVERY:
            self._check_actors()

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            sock, _ = self._listener.accept()
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, bytearray())

    def _hello(self, sock: socket.socket, inbox: bytearray) -> None:
        """A new connection's first line: which actor, and the secret; anything else is closed."""
        try:
            data = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        inbox += data
        end = inbox.find(b"\n")
        if end < 0 and data and len(inbox) < 4096:
            return
        self._selector.unregister(sock)
        slot = None
        with contextlib.suppress(msgspec.MsgspecError):
            hello = _decode_hello(bytes(inbox[:end])) if end >= 0 else None
            secret = self._contact.secret.encode()
            if hello is not None and secrets.compare_digest(hello.secret.encode("utf-8", "replace"), secret):
                slot = next((s for s in self._pool.live() if s.key == hello.key and s.link is None), None)
        if slot is None:
            sock.close()
            return
        slot.link = _Link(sock)
        self._selector.register(sock, selectors.EVENT_READ, slot)
        early = bytes(inbox[end + 1 :])  # what the actor sent after its hello, read with it
        if early:
            self._records(slot, early.split(b"\n")[:-1])
            slot.link.inbox += early.rpartition(b"\n")[2]

    def _read(self, slot: _Slot) -> None:
        link = slot.link
        if link is None or slot.dead:
            return
        lines = link.lines()
        if lines is None:
            self._lose(slot, "its connection to the driver ended")
        else:
            self._records(slot, lines)

    def _records(self, slot: _Slot, lines: list[bytes]) -> None:
        for line in lines:
            try:
                done = _decode_done(line)
            except msgspec.MsgspecError as exc:
                self._lose(slot, f"it sent a line the driver cannot read: {exc}")
                return
            flight = self._flights.pop(done.n, None)
            if flight is None:
                continue
            slot.running -= 1
            if done.record is not None:
                self._settle(flight, done.record)
            else:
                self._settle(flight, _engine_record(self._run, flight, done.error or TurnError("RayError", "")))

    def _lose(self, slot: _Slot, why: str) -> None:
        """The actor died: a record for each of its turns in flight; a new actor takes its node if it is alive."""
        if slot.dead:
            return
        if slot.link is not None:
            self._selector.unregister(slot.link.sock)
        self._pool.lost(slot)
        for number, flight in list(self._flights.items()):
            if flight.slot is slot:
                del self._flights[number]
                slot.running -= 1
                self._died(flight, why)

    def _check_actors(self) -> None:
        """Ask Ray about the actors: a ``serve`` call that ended means the actor is gone (a node that vanished
        leaves a connection open); one that did not connect in time cannot reach the driver.

        Raises:
            BatchEngineError: an actor could not connect to the driver.
        """
        self._checked = time.monotonic()
        ray = self._ray
        live = [slot for slot in self._pool.live() if slot.serving is not None]
        if not live:
            return
        ready, _ = ray.wait([slot.serving for slot in live], num_returns=len(live), timeout=0)
        ended = set(ready)
        contact = self._contact
        for slot in live:
            if slot.serving not in ended:
                if slot.link is None and time.monotonic() - slot.since > _START_TIMEOUT:
                    raise BatchEngineError(
                        f"the Ray actor on node {slot.node} ({slot.host}) did not connect to the driver at "
                        f"{contact.host}:{contact.port} within {_START_TIMEOUT:.0f} s; the nodes must reach the "
                        "driver's machine on that address"
                    )
                continue
            try:
                ray.get(slot.serving)
                why = "its connection to the driver ended"
            except ray.exceptions.RayActorError as exc:
                why = str(exc)
            except ray.exceptions.RayError as exc:
                if slot.link is None:
                    raise BatchEngineError(
                        f"the Ray actor on node {slot.node} ({slot.host}) could not connect to the driver at "
                        f"{contact.host}:{contact.port}: {exc}"
                    ) from None
                why = str(exc)
            self._lose(slot, why)

    def _end(self) -> None:
        for slot in self._pool.slots:
            if slot.link is not None:
                slot.link.close()
        for key in list(self._selector.get_map().values()):
            if isinstance(key.data, bytearray) and isinstance(key.fileobj, socket.socket):
                key.fileobj.close()
        self._selector.close()
        self._listener.close()


def _driver_host(ray: Any) -> str | None:
    """The address the actors reach this process at: its Ray node's; None for a Ray Client, whose process the
    cluster's nodes usually cannot reach."""
    with contextlib.suppress(Exception):
        if ray.util.client.ray.is_connected():
            return None
    node = ray.get_runtime_context().get_node_id()
    for entry in ray.nodes():
        if entry.get("NodeID") == node:
            return str(entry["NodeManagerAddress"])
    return None


def load_ray(address: str | None) -> Any:
    """Import Ray for a batch that joins ``address`` (a cluster of our own when none is given or connected).

    Raises:
        BatchEngineError: Ray is not installed.
    """
    already = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    return import_ray(loopback=not already and address is None and not os.environ.get("RAY_ADDRESS"))


def run_on_ray(run: Run, out: Path, address: str | None) -> None:
    """Run the plan on a Ray cluster: the one this process is connected to, ``address``, or a local one.

    Raises:
        BatchEngineError: Ray is missing or unreachable, actors do not start, or every node is gone.
        BatchStorageError: a node cannot see or write ``out``.
        BatchItemError: a malformed item (after the turns in flight are recorded).
    """
    ray = load_ray(address)
    connected = ray.is_initialized()
    if not connected:
        _connect(ray, address)
    try:
        host = _driver_host(ray) if _CONNECTIONS else None
        listener = None
        contact = None
        if host is not None:
            listener = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
            listener.setblocking(False)
            contact = _Contact(host, listener.getsockname()[1], secrets.token_hex(16))
        try:
            pool = _Pool(ray, run, out, contact)
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        try:
            if listener is not None and contact is not None:
                _ConnectionDriver(ray, run, pool, listener, contact).drive()
            else:
                _CallPerTurnDriver(ray, run, pool).drive()
        finally:
            pool.close()
    finally:
        if not connected:
            ray.shutdown()
