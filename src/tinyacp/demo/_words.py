"""The prompt words and the feature modules they turn on: the registry of the demo's features.

The word ``with-<name>`` anywhere in a prompt (or ``--with <name>`` for every turn) adds the feature ``<name>`` to
the turn. `FEATURES` maps each name to the module of this package that shows it; a module is imported the first
time a turn uses it, so a start pays for none of them. Its `Feature` says where in the turn it acts (see the
package's docstring for the order of a turn).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ._agent import DemoAgent
    from ._tools import Listing
    from ._turn import Turn
    from ._wire import JsonObject

ALL_KINDS_KEYWORD = "all-kinds"
"""The word that replaces the turn with one update of each kind (as ``--all-kinds`` does; see ``_kinds.py``)."""

# with-<name> -> the module that shows it. The order is the order the features act in within a step of the turn,
# and the order --help and a usage error list the names in.
FEATURES = {
    "notice": "_notice",
    "compaction": "_compaction",
    "question": "_question",
    "login": "_login",
    "subagent": "_subagent",
    "bash": "_bash",
    # The three words of the files and terminals a client serves share one module: the first does the work of all.
    "read": "_served",
    "write": "_served",
    "terminal": "_served",
}
EXTRAS = tuple(FEATURES)
"""The names of the features, as ``--with`` takes them."""


class Feature:
    """What one feature adds to a turn, read from its module's functions of these names. Each step is optional.

    Args:
        preface: the updates sent before the plan (a notice, a compaction).
        ask: after the thought, asks the client something (``elicitation/create``); returns False once the turn is
            cancelled.
        work: in place of the ``Read`` tool call, gets the listing of the files: a `Listing` (``refused`` if not
            allowed), or None once the turn is cancelled. The first feature of the turn that has one does the work.
        needs: (``NEEDS`` in the module) the client capability (as the agent names it, e.g. ``subagents``)
            without which the feature leaves the turn as it is.
    """

    def __init__(
        self,
        *,
        preface: Callable[[DemoAgent, Turn], list[JsonObject]] | None = None,
        ask: Callable[[DemoAgent, Turn], bool] | None = None,
        work: Callable[[DemoAgent, Turn], Listing | None] | None = None,
        needs: str | None = None,
    ) -> None:
        self.preface = preface
        self.ask = ask
        self.work = work
        self.needs = needs


def words_in(text: str) -> set[str]:
    """The features a prompt's text asks for."""
    return {name for name in EXTRAS if f"with-{name}" in text}


def load(name: str) -> Feature:
    """The `Feature` of the module that shows ``name`` (imported on first use)."""
    module = importlib.import_module(f"{__package__}.{FEATURES[name]}")
    return Feature(
        preface=getattr(module, "preface", None),
        ask=getattr(module, "ask", None),
        work=getattr(module, "work", None),
        needs=getattr(module, "NEEDS", None),
    )


def parse_extras(value: str) -> tuple[str, ...]:
    """The names of ``--with NAME[,NAME...]``.

    Raises:
        ValueError: a name is not one of `EXTRAS`.
    """
    names = tuple(name.strip() for name in value.split(","))
    unknown = [name for name in names if name not in EXTRAS]
    if unknown:
        raise ValueError(f"unknown {unknown[0]!r}: choose among {', '.join(EXTRAS)}")
    return names
