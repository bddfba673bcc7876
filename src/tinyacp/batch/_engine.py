"""``run_batch``: the items still to run, read lazily; at most ``concurrency`` turns in flight; one writer of
the results; a summary. The local engine lives here; the Ray engine in :mod:`tinyacp.batch._ray`."""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Unpack

from .._errors import BatchItemError
from ._items import Item, ItemSource, item_key, parse_item, read_items
from ._results import ResultsFile
from ._turn import TurnOptions, TurnRecord, TurnSettings, check_item, turn

__all__ = ["AgentSummary", "BatchProgress", "BatchSummary", "Plan", "run_batch"]

Engine = Literal["local", "ray"]


@dataclass(frozen=True)
class AgentSummary:
    """The turns one agent ran in this call."""

    ok: int
    failed: int
    median_seconds: float | None
    cost: dict[str, float]
    """Total cost per currency, when the agent reported one."""


@dataclass(frozen=True)
class BatchSummary:
    """How a batch stands after a call of :func:`run_batch`.

    ``ok``, ``failed`` and ``missing`` cover every item of the input by its latest record (a record of an earlier
    run counts); ``agents`` covers the turns this call ran.
    """

    ok: int
    failed: int
    missing: int
    """Items without a record: the call was stopped (or the engine failed) before they ran."""
    ran: int
    """Turns this call ran (records it wrote)."""
    skipped: int
    """Items that already had a record (and were not retried)."""
    seconds: float
    agents: dict[str, AgentSummary]
    results: Path
    journals: Path
    client_cpu_seconds: float = 0.0
    """CPU seconds tinyacp spent on the batch, the agents' own not included: this process during the call, plus
    (Ray) the actors while they ran turns (their start-up and that of the cluster are not counted)."""

    @property
    def all_ok(self) -> bool:
        """Every item has a record, and each latest record is ok."""
        return self.failed == 0 and self.missing == 0


@dataclass
class BatchProgress:
    """Where a running batch is; handed to ``on_progress`` after every start and every record."""

    to_run: int | None
    """Turns this call is to run, when known in advance (the input is a file); else None."""
    started_at: float = field(default_factory=time.monotonic)
    done: int = 0
    failed: int = 0
    running: int = 0

    @property
    def rate(self) -> float:
        """Finished turns per second so far."""
        elapsed = time.monotonic() - self.started_at
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds until the last turn ends, at the rate so far; None when unknown."""
        rate = self.rate
        if self.to_run is None or rate <= 0:
            return None
        return max(0, self.to_run - self.done) / rate


class Plan:
    """The items still to run, read one at a time, each with its attempt number.

    An item with a record is skipped, unless ``retry_failed`` and that record is not ok.
    """

    def __init__(
        self, source: ItemSource, outcomes: dict[str, int], retry_failed: bool, settings: TurnSettings
    ) -> None:
        self._raw = read_items(source)
        self._outcomes = outcomes
        self._retry_failed = retry_failed
        self._settings = settings
        self.seen: set[str] = set()
        self.skipped = 0

    def next(self) -> tuple[Item, int] | None:
        """The next item to run and its attempt number; None at the end.

        Raises:
            BatchItemError: a malformed item or a repeated id.
            OSError: the input file cannot be read.
        """
        for line, raw in self._raw:
            item = parse_item(raw, line=line)
            key = item_key(item.id)
            if key in self.seen:
                raise BatchItemError(f"the id {item.id!r} appears more than once", line=line)
            check_item(item, self._settings)
            self.seen.add(key)
            outcome = self._outcomes.get(key)
            if outcome is not None and (outcome > 0 or not self._retry_failed):
                self.skipped += 1
                continue
            return item, abs(outcome or 0) + 1
        return None


class Tally:
    """Counts records as they are written and keeps the latest outcome per id."""

    def __init__(self, outcomes: dict[str, int], progress: BatchProgress) -> None:
        self.outcomes = outcomes
        self.progress = progress
        self.ran = 0
        self._seconds: dict[str, list[float]] = {}
        self._ok: dict[str, int] = {}
        self._cost: dict[str, dict[str, float]] = {}

    def add(self, record: TurnRecord) -> None:
        """Count one written record."""
        self.ran += 1
        self.outcomes[item_key(record.id)] = record.attempt if record.ok else -record.attempt
        self.progress.done += 1
        self.progress.failed += not record.ok
        self._seconds.setdefault(record.agent, []).append(record.seconds)
        self._ok[record.agent] = self._ok.get(record.agent, 0) + record.ok
        cost = (record.usage or {}).get("cost")
        if isinstance(cost, dict) and isinstance(cost.get("amount"), int | float):
            totals = self._cost.setdefault(record.agent, {})
            currency = str(cost.get("currency", ""))
            totals[currency] = totals.get(currency, 0.0) + cost["amount"]

    def summary(self, plan: Plan, started: float, results: Path, journals: Path, cpu: float) -> BatchSummary:
        """The summary over the ids the plan saw."""
        ok = failed = 0
        for key in plan.seen:
            outcome = self.outcomes.get(key)
            if outcome is not None:
                ok += outcome > 0
                failed += outcome < 0
        agents = {
            name: AgentSummary(
                ok=self._ok[name],
                failed=len(seconds) - self._ok[name],
                median_seconds=statistics.median(seconds) if seconds else None,
                cost=self._cost.get(name, {}),
            )
            for name, seconds in sorted(self._seconds.items())
        }
        return BatchSummary(
            ok=ok,
            failed=failed,
            missing=len(plan.seen) - ok - failed,
            ran=self.ran,
            skipped=plan.skipped,
            seconds=time.monotonic() - started,
            agents=agents,
            results=results,
            journals=journals,
            client_cpu_seconds=cpu,
        )


def cpu_seconds() -> float:
    """CPU seconds this process used so far, every thread, its children not included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _check_call(concurrency: int, retries: int, engine: str) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive int, not {concurrency!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, not {retries!r}")
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', not {engine!r}")


def _count_to_run(source: ItemSource, outcomes: dict[str, int], retry_failed: bool, settings: TurnSettings) -> int:
    """Check a whole input file before any agent starts, and count the turns it asks for."""
    plan = Plan(source, outcomes, retry_failed, settings)
    count = 0
    while plan.next() is not None:
        count += 1
    return count


def run_batch(
    items: ItemSource,
    out_dir: str | os.PathLike[str],
    *,
    concurrency: int = 4,
    engine: Engine = "local",
    ray_address: str | None = None,
    retries: int = 0,
    retry_failed: bool = False,
    on_record: Callable[[TurnRecord], Any] | None = None,
    on_progress: Callable[[BatchProgress], Any] | None = None,
    **options: Unpack[TurnOptions],
) -> BatchSummary:
    """Run a batch of turns and append each one's record to ``out_dir/results.jsonl``; journals go to
    ``out_dir/journals/``.

    Resumable: an item that already has a record in ``out_dir`` is skipped (with ``retry_failed``, run again
    when that record is not ok). Bounded: at most ``concurrency`` turns in flight, and the items are read one
    at a time as turns finish. A file of items is checked whole first (streaming), so a malformed line stops the
    batch before any agent starts. A turn that is not ok is run again up to ``retries`` times, each attempt a
    new epoch of its journal; only the last attempt's record is written.

    Args:
        items: dicts, or the path of a JSON Lines file of them (see :class:`tinyacp.batch.Item`).
        out_dir: the output directory, created if missing. With Ray on several nodes it must be on storage
            every node sees at the same path.
        concurrency: the most turns in flight at once (with Ray: over the whole cluster).
        engine: ``"local"`` (asyncio in this process) or ``"ray"`` (``pip install "tinyacp[ray]"``).
        ray_address: the cluster to join (default: the one this process is connected to, else ``RAY_ADDRESS``,
            else a local cluster started for the batch and stopped after it).
        retries: extra attempts for a turn that is not ok (default 0: a turn edits files; never re-run silently).
        retry_failed: run again the items whose latest record is not ok.
        on_record: called with each record after it is written.
        on_progress: called with the progress after each start and each record.
        **options: the defaults of every item and how turns run (:class:`~tinyacp.batch.TurnOptions`).

    Returns:
        The summary; ``summary.all_ok`` tells whether every item ended ok.

    Raises:
        BatchItemError: a malformed item or a repeated id (turns in flight finish and are recorded first).
        BatchBusy: another batch is writing to ``out_dir``.
        BatchStorageError: a Ray node cannot see or write ``out_dir``.
        BatchEngineError: Ray is not installed, cannot be reached, or lost every node.
        TypeError: an unknown option.
        ValueError: a bad concurrency, retries, engine or option value.
        OSError: ``out_dir`` or the input file cannot be used.
    """
    _check_call(concurrency, retries, engine)
    settings = TurnSettings.from_options(options)
    started = time.monotonic()
    cpu = cpu_seconds()
    out = Path(out_dir).absolute()  # turns may run on other nodes, in other directories
    out.mkdir(parents=True, exist_ok=True)
    journals = out / "journals"
    journals.mkdir(mode=0o700, exist_ok=True)
    with ResultsFile(out / "results.jsonl") as results:
        outcomes = results.outcomes()
        to_run = None
        if isinstance(items, str | os.PathLike):
            to_run = _count_to_run(items, outcomes, retry_failed, settings)
        progress = BatchProgress(to_run)
        tally = Tally(outcomes, progress)
        plan = Plan(items, outcomes, retry_failed, settings)

        def on_start() -> None:
            progress.running += 1
            if on_progress is not None:
                on_progress(progress)

        def sink(record: TurnRecord) -> None:
            results.append(record)
            progress.running -= 1
            tally.add(record)
            if on_record is not None:
                on_record(record)
            if on_progress is not None:
                on_progress(progress)

        run = Run(plan, settings, journals, concurrency, retries, on_start, sink)
        if engine == "ray":
            from ._ray import run_on_ray

            run_on_ray(run, out, ray_address)
        else:
            asyncio.run(run_local(run))
        cpu = cpu_seconds() - cpu + run.engine_cpu
        return tally.summary(plan, started, results.path, journals, cpu)


@dataclass
class Run:
    """What an engine needs: the plan, the settings, where journals go, the bounds, and where records go."""

    plan: Plan
    settings: TurnSettings
    journals: Path
    concurrency: int
    retries: int
    on_start: Callable[[], None]
    sink: Callable[[TurnRecord], None]
    exhausted: bool = False
    """Every item was read."""
    engine_cpu: float = 0.0
    """CPU seconds the engine spent outside this process on running turns (the Ray actors)."""
    stop: BaseException | None = None
    """A malformed item (or an unreadable input) ended the reading; raised once the turns in flight are done."""

    def take(self) -> tuple[Item, int] | None:
        """The next item to start and its attempt number; None at the end of the items or after a bad one."""
        if self.exhausted or self.stop is not None:
            return None
        try:
            planned = self.plan.next()
        except (BatchItemError, OSError) as exc:
            self.stop = exc
            return None
        if planned is None:
            self.exhausted = True
            return None
        self.on_start()
        return planned

    def raise_stop(self) -> None:
        """Raise what stopped the reading, if anything did."""
        if self.stop is not None:
            raise self.stop


async def _with_retries(run: Run, item: Item, attempt: int) -> TurnRecord:
    record = await turn(item, run.journals, run.settings, attempt)
    for extra in range(1, run.retries + 1):
        if record.ok:
            break
        record = await turn(item, run.journals, run.settings, attempt + extra)
    return record


async def run_local(run: Run) -> None:
    """The local engine: ``concurrency`` workers in this event loop, each running one turn after another.

    A malformed item stops new turns; those in flight finish and are recorded, then the error is raised.
    If this coroutine is cancelled (Ctrl-C), the turns in flight are cancelled: their agents are torn down
    and no record is written for them, so a later run does them again. A failure to write a record stops
    the batch the same way and is raised.
    """
    workers = [asyncio.create_task(_worker(run)) for _ in range(run.concurrency)]
    try:
        done, _ = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for worker in done:
            worker.result()
    finally:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    run.raise_stop()


async def _worker(run: Run) -> None:
    """Take the next item, run it, record it; until the items end (or a bad one stops the reading)."""
    while (planned := run.take()) is not None:
        run.sink(await _with_retries(run, *planned))
