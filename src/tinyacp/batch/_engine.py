"""``run_batch``: the items still to run, read lazily; at most ``concurrency`` turns in flight; one writer of
the results; a summary. The local engine lives here, the Ray engine in :mod:`tinyacp.batch._ray`, and what
both share in :mod:`tinyacp.batch._plan`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Unpack

from .._bounds import MAX_CONCURRENCY, MAX_RETRIES, check_count
from ._items import Item, ItemSource, journal_path
from ._plan import FAILURES_KEPT, BatchProgress, BatchSummary, Plan, Run, Tally, cpu_seconds
from ._preflight import Preflight
from ._results import ResultsFile, journal_directory
from ._turn import TurnOptions, TurnRecord, TurnSettings, turn

__all__ = ["run_batch", "run_local"]

Engine = Literal["local", "ray"]


def _check_call(concurrency: int, retries: int, engine: str) -> None:
    check_count("concurrency", concurrency, 1, MAX_CONCURRENCY)
    check_count("retries", retries, 0, MAX_RETRIES)
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', not {engine!r}")


def _count_to_run(source: ItemSource, outcomes: dict[str, int], retry_failed: bool, preflight: Preflight) -> int:
    """Check a whole input file before any turn starts, and count the turns it asks for: every item, then what
    the items ask of each agent against what it offers (:class:`Preflight`)."""
    plan = Plan(source, outcomes, retry_failed, preflight.settings, preflight)
    count = 0
    while plan.next() is not None:
        count += 1
    preflight.check()
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
    batch before any agent starts; so does a mode, model or config option an item asks of an agent that does not
    offer it (each agent asked one is started once to read its offer, before the first turn; an iterable's item is
    checked as it is read). A field one letter away from an item field warns (:class:`ItemFieldWarning`).
    A turn that is not ok is run again up to ``retries`` times, each attempt a new epoch of its journal; only
    the last attempt's record is written.

    Args:
        items: dicts, or the path of a JSON Lines file of them (see :class:`tinyacp.batch.Item`).
        out_dir: the output directory, created if missing. With Ray on several nodes it must be on storage
            every node sees at the same path.
        concurrency: the most turns in flight at once (with Ray: over the whole cluster), from 1 to 10,000.
        engine: ``"local"`` (asyncio in this process) or ``"ray"`` (``pip install "tinyacp[ray]"``).
        ray_address: the cluster to join (default: the one this process is connected to, else ``RAY_ADDRESS``,
            else a local cluster started for the batch and stopped after it).
        retries: extra attempts for a turn that is not ok (default 0: a turn edits files; never re-run silently),
            at most 1,000,000.
        retry_failed: run again the items whose latest record is not ok.
        on_record: called with each record after it is written.
        on_progress: called with the progress after each start and each record.
        **options: the defaults of every item and how turns run (:class:`~tinyacp.batch.TurnOptions`).

    Returns:
        The summary; ``summary.all_ok`` tells whether every item ended ok.

    Raises:
        BatchItemError: a malformed item or a repeated id, items asking a mode, model or option their agent does
            not offer, or an agent that could not be asked what it offers (turns in flight finish and are
            recorded first).
        BatchBusy: another batch is writing to ``out_dir``.
        BatchStorageError: a Ray node cannot see or write ``out_dir``.
        BatchEngineError: Ray is not installed (checked before anything is created), cannot be reached, or lost
            every node.
        SandboxUnavailable: ``sandbox=`` (or ``Serve(sandbox=...)``) was given and bwrap cannot run here (checked
            before any turn starts).
        TypeError: an unknown option.
        ValueError: a bad engine or option value, a concurrency that is not an int from 1 to 10,000, or retries
            that are not an int from 0 to 1,000,000 (checked before anything is created or started).
        OSError: ``out_dir`` or the input file cannot be used.
    """
    _check_call(concurrency, retries, engine)
    settings = TurnSettings.from_options(options)
    if engine == "local" and settings.cwd is not None and not os.path.isdir(settings.cwd):
        raise ValueError(f"cwd {settings.cwd} is not a directory")  # before any turn fails for it
    if engine == "ray":
        from ._ray import load_ray  # before anything is created: a refused batch leaves no output directory

        load_ray(ray_address)
    started = time.monotonic()
    cpu = cpu_seconds()
    out = Path(out_dir).absolute()  # turns may run on other nodes, in other directories
    out.mkdir(parents=True, exist_ok=True)
    journals = journal_directory(out)  # never a link planted as out/journals
    with ResultsFile(out / "results.jsonl") as results, _traced(settings, out) as settings:
        outcomes = results.outcomes()
        to_run = None
        preflight = Preflight(settings, elsewhere=engine == "ray")
        if isinstance(items, str | os.PathLike):
            to_run = _count_to_run(items, outcomes, retry_failed, preflight)
        progress = BatchProgress(to_run)
        tally = Tally(outcomes, progress)
        plan = Plan(items, outcomes, retry_failed, settings, preflight, checked=to_run is not None)

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
            from ._ray import run_on_ray  # its wire format and sockets only when a batch runs on Ray

            run_on_ray(run, out, ray_address)
        else:
            asyncio.run(run_local(run))
        cpu = cpu_seconds() - cpu + run.engine_cpu
        failures = results.failures(tally.failed_keys(plan), FAILURES_KEPT)
        return tally.summary(plan, started, results.path, journals, cpu, failures=failures)


def _traced(settings: TurnSettings, out: Path) -> contextlib.AbstractContextManager[TurnSettings]:
    """The batch's span around its turns when it exports spans (OpenTelemetry imported only then)."""
    if settings.trace is None:
        return contextlib.nullcontext(settings)
    from ._trace import batch_trace

    return batch_trace(settings, out)


async def _with_retries(run: Run, item: Item, attempt: int) -> TurnRecord:
    """The item's turn, run again while it is not ok and retries are left: each attempt a new epoch of its
    journal; the last attempt's record."""
    path = journal_path(run.journals, item.id)
    last = attempt + run.retries
    while True:
        record = await turn(item, path, run.settings, attempt)
        if record.ok or attempt == last:
            return record
        attempt += 1


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
