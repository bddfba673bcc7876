"""What both engines share: the plan of the items still to run, the run an engine is handed, the tally of the
records written, and the summary and progress that come of it.

The engines themselves live in :mod:`tinyacp.batch._engine` (``run_batch`` and the local engine) and
:mod:`tinyacp.batch._ray`; both import from here, never from each other.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import BatchItemError
from ._items import Item, ItemSource, item_key, parse_item, read_items
from ._preflight import Preflight
from ._results import FailedItem
from ._turn import TurnRecord, TurnSettings, check_item

__all__ = ["FAILURES_KEPT", "AgentSummary", "BatchProgress", "BatchSummary", "Plan", "Run", "Tally", "cpu_seconds"]

FAILURES_KEPT = 20
"""How many failed items a summary names: enough to see a pattern, few enough to read (the rest are counted)."""


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
    failures: tuple[FailedItem, ...] = ()
    """The failed items (by their latest record, this call's or an earlier one's), the first
    ``FAILURES_KEPT`` (20) in the order they failed: each one's id, why, and its journal."""
    failed_earlier: int = 0
    """Failed items whose record is from an earlier call and that this call did not run again
    (``retry_failed=True`` runs them)."""

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
        self,
        source: ItemSource,
        outcomes: dict[str, int],
        retry_failed: bool,
        settings: TurnSettings,
        preflight: Preflight | None = None,
        *,
        checked: bool = False,
    ) -> None:
        self._source = source
        self._raw = read_items(source)
        self._outcomes = outcomes
        self._retry_failed = retry_failed
        self._settings = settings
        self._preflight = preflight or Preflight(settings)
        self._checked = checked
        """The items' modes, models and options were checked whole (a file): none is noted again."""
        self.seen: set[str] = set()
        self.skipped = 0

    def next(self) -> tuple[Item, int] | None:
        """The next item to run and its attempt number; None at the end.

        Each item to run is noted for the preflight; an iterable's item is checked against its agent's offer at
        once (an agent is probed when the first item that asks it a mode, a model or an option is read), a file's
        are checked whole by the caller after a first pass (:meth:`Preflight.check`).

        Raises:
            BatchItemError: a malformed item or a repeated id; an iterable's item asks what its agent does not
                offer.
            OSError: the input file cannot be read.
        """
        for line, raw in self._raw:
            if isinstance(raw, Mapping):
                self._preflight.warn_misspelled(raw, line)
            item = parse_item(raw, line=line)
            key = item_key(item.id)
            if key in self.seen:
                raise BatchItemError(f"the id {item.id!r} appears more than once", line=line)
            try:
                check_item(item, self._settings)
            except BatchItemError as exc:  # a mistyped agent or a missing cwd names its line, as a malformed one does
                raise BatchItemError(str(exc), line=line) from None
            self.seen.add(key)
            outcome = self._outcomes.get(key)
            if outcome is not None and (outcome > 0 or not self._retry_failed):
                self.skipped += 1
                continue
            if not self._checked:
                self._preflight.note(item, line)
                if not isinstance(self._source, str | os.PathLike):
                    self._preflight.check()
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

    def failed_keys(self, plan: Plan) -> set[str]:
        """The ids the plan saw whose latest record is not ok."""
        return {key for key in plan.seen if self.outcomes.get(key, 0) < 0}

    def summary(
        self,
        plan: Plan,
        started: float,
        results: Path,
        journals: Path,
        cpu: float,
        *,
        failures: list[FailedItem] | None = None,
    ) -> BatchSummary:
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
            failures=tuple(failures or ()),
            failed_earlier=failed - self.progress.failed,
        )


def cpu_seconds() -> float:
    """CPU seconds this process used so far, every thread, its children not included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
