"""Batches of agent turns: many prompts, each its own agent process and journal, one record per turn.

``run_batch(items, out_dir)`` runs the items (dicts, or a JSON Lines file of them) with at most ``concurrency``
turns in flight and appends one :class:`TurnRecord` per finished turn to ``out_dir/results.jsonl``; run it
again with the same ``out_dir`` to finish what is left. ``engine="ray"`` spreads the turns over a Ray cluster
(``pip install "tinyacp[ray]"``). :func:`run_turn` and :func:`arun_turn` run one turn, for callers that bring
their own loop (dask, Celery, a queue worker).

This package is not imported by ``import tinyacp``; Ray is imported only when the Ray engine runs.
"""

from __future__ import annotations

from ._engine import run_batch
from ._items import Item, parse_item, read_items
from ._plan import AgentSummary, BatchProgress, BatchSummary
from ._preflight import AgentNoteWarning, ItemFieldWarning
from ._results import FailedItem, read_results
from ._turn import PermissionCounts, TurnError, TurnOptions, TurnRecord, arun_turn, run_turn

__all__ = [
    "AgentNoteWarning",
    "AgentSummary",
    "BatchProgress",
    "BatchSummary",
    "FailedItem",
    "Item",
    "ItemFieldWarning",
    "PermissionCounts",
    "TurnError",
    "TurnOptions",
    "TurnRecord",
    "arun_turn",
    "parse_item",
    "read_items",
    "read_results",
    "run_batch",
    "run_turn",
]
