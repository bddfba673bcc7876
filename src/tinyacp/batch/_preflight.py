"""The preflight of a batch: the modes, models and config options its items ask of each agent, checked against
what that agent advertises, before the first turn starts.

An agent says which modes, models and options it offers only in its answer to ``session/new``, so each agent that
items ask one of is started once, ``initialize`` and ``session/new`` are sent, the answer is read and the agent is
torn down (the session closed first, when the agent offers ``session/close``). Agents are told apart by their
command line and environment; the probe runs in the working directory of the first item that asks. No agent is
started when no item asks a mode, a model or an option. The values are checked by the same functions that refuse
them in a turn (:mod:`tinyacp._requests`), so the preflight refuses exactly what a turn would.

Misspelled item fields are looked for here too: a field the item format does not know is the caller's own and is
kept, but one that is one edit away from a known field (``promt``, ``modle``) is warned about, once per name.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._errors import BatchItemError, SpawnError, TinyAcpError
from .._messages import SessionState
from .._permissions import has_rules
from .._requests import config_params, mode_params, model_params
from ._items import ConfigValue, Item
from ._turn import (
    ResolvedAgent,
    StartObserver,
    TurnSettings,
    agent_of_item,
    agent_options,
    initialize_watched,
    start_failure_of,
)

__all__ = ["AgentNoteWarning", "ItemFieldWarning", "Preflight"]


class AgentNoteWarning(UserWarning):
    """An item's agent does something the batch's permission rules do not decide, as its entry's ``notes`` say
    (fast-agent runs its shell tool without asking when the client offers no terminal): warned once per agent
    and call, when the batch has a permission rule, before its first turn."""


class ItemFieldWarning(UserWarning):
    """An item has a field tinyacp does not read that is one edit away from one it does (``promt``, ``modle``):
    the field is kept as the caller's own, and the batch runs; warned once per field name and call."""


PROBE_TIMEOUT = 120.0
"""Seconds for one probe (start, ``initialize``, ``session/new``) when the batch sets no turn timeout: the first
``npx -y`` of an adapter downloads it, as the command's own start-up deadline allows for."""

_ITEMS_NAMED = 5
"""Item ids named per refused value: enough to find them, the rest are counted."""
_PROBLEMS_SHOWN = 20
"""Refused values listed in one error, as a batch's summary lists failed items."""

_KNOWN_FIELDS = tuple(Item.__struct_fields__)

AgentKey = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
Asked = tuple[str, "str | tuple[str, ConfigValue]"]
"""What an item asks: ``("mode", id)``, ``("model", id)`` or ``("set", (config_id, value))``."""


@dataclass
class _Asked:
    """What the items ask of one agent: each (field, value) with the first item ids that ask it."""

    agent: ResolvedAgent
    cwd: str
    values: dict[Asked, tuple[list[str], list[int]]] = field(default_factory=dict)

    def add(self, asked: Asked, item: Item, line: int | None) -> None:
        ids, count = self.values.setdefault(asked, ([], [0]))
        count[0] += 1
        if len(ids) < _ITEMS_NAMED:
            ids.append(f"{item.id!r}" + (f" (line {line})" if line is not None else ""))


class Preflight:
    """What the items of one batch ask of each agent, and each agent's offer once probed.

    Shared by the plans of one call (the pass that checks a whole file, then the one that runs it), so an agent
    is probed, and a misspelled field warned about, once per call.
    """

    def __init__(self, settings: TurnSettings, *, elsewhere: bool = False) -> None:
        self.settings = settings
        self._elsewhere = elsewhere
        """The turns run on other machines (Ray): an agent this one cannot start is left to them."""
        self._asked: dict[AgentKey, _Asked] = {}
        self._offers: dict[AgentKey, SessionState | None] = {}
        self._warned: set[str] = set()
        self._noted: set[str] = set()

    def warn_misspelled(self, raw: Mapping[str, object], line: int | None) -> None:
        """Warn (:class:`ItemFieldWarning`, once per name) about a field one edit away from one the item format
        knows."""
        for name in raw:
            if not isinstance(name, str) or name in _KNOWN_FIELDS or name in self._warned:
                continue
            close = [known for known in _KNOWN_FIELDS if _one_edit(name, known)]
            if close:
                self._warned.add(name)
                where = f"line {line}: " if line is not None else ""
                warnings.warn(
                    f"{where}item field {name!r} is not one tinyacp reads (kept as yours); "
                    f"did you mean {' or '.join(map(repr, close))}?",
                    ItemFieldWarning,
                    stacklevel=2,
                )

    def _say_notes(self, item: Item) -> None:
        """Warn (:class:`AgentNoteWarning`) once per agent of what its entry's notes say, when there is a rule."""
        agent = item.agent if item.agent is not None else self.settings.agent
        name = (agent.split(maxsplit=1) or [""])[0] if isinstance(agent, str) else None
        if name is None or name in self._noted:
            return
        if not has_rules(self.settings.policy) and not any(self.settings.agent_tools.get(name, ())):
            return
        self._noted.add(name)
        for note in self.settings.agent_notes.get(name, ()):
            warnings.warn(f"note on {name}: {note}", AgentNoteWarning, stacklevel=3)

    def note(self, item: Item, line: int | None) -> None:
        """Remember the mode, model and config options ``item`` asks of its agent (nothing is started).

        Raises:
            BatchItemError: the item names no usable agent.
        """
        settings = self.settings
        self._say_notes(item)
        mode = item.mode if item.mode is not None else settings.mode
        model = item.model if item.model is not None else settings.model
        options: dict[str, ConfigValue] = {**(settings.set or {}), **(item.set or {})}
        if mode is None and model is None and not options:
            return
        base = settings.cwd or os.getcwd()
        if not os.path.isdir(base):  # a Ray driver that does not see the directory: the turns will tell
            return
        agent = agent_of_item(item, settings)
        key: AgentKey = (agent.command, tuple(sorted(agent.env.items())))
        asked = self._asked.get(key)
        if asked is None:
            cwd = os.path.join(base, item.cwd) if item.cwd else base
            asked = self._asked[key] = _Asked(agent, cwd)
        if mode is not None:
            asked.add(("mode", mode), item, line)
        if model is not None:
            asked.add(("model", model), item, line)
        for config_id, value in options.items():
            asked.add(("set", (config_id, value)), item, line)

    def check(self) -> None:
        """Probe every agent asked of and not probed yet, then refuse every value one does not offer.

        Raises:
            BatchItemError: an agent could not be probed, or items ask what their agent does not offer; the
                message names each such value, the items that ask it and "did you mean".
        """
        problems: list[str] = []
        for key, asked in self._asked.items():
            if key not in self._offers:
                self._offers[key] = self._probe(asked)
            offer = self._offers[key]
            if offer is not None:
                problems += (problem for value in asked.values.items() if (problem := _refusal(asked, offer, *value)))
        self._asked.clear()  # what was asked is checked: a later check probes and reports only what is new
        if problems:
            more = len(problems) - _PROBLEMS_SHOWN
            shown = problems[:_PROBLEMS_SHOWN] + ([f"… and {more} more"] if more > 0 else [])
            raise BatchItemError(
                "items ask what their agent does not offer (they were not run):\n" + "\n".join(f"  {p}" for p in shown)
            )

    def _probe(self, asked: _Asked) -> SessionState | None:
        """What the agent offers; None when it cannot be started here but its turns run elsewhere.

        Raises:
            BatchItemError: the agent could not be started, failed, or did not answer in time.
        """
        observer = StartObserver()  # the probe is no turn's: no journal, but a start failure is named as a turn's
        try:
            return _probe(asked.agent, asked.cwd, self.settings, observer)
        except (TinyAcpError, OSError) as exc:
            if self._elsewhere and isinstance(exc, SpawnError):
                return None  # not installed where the batch is driven: its turns will tell
            first = asked.values[next(iter(asked.values))][0][0]
            named = start_failure_of(exc, asked.agent, observer, _probe_timeout(self.settings))
            why = [named.message, *named.hint] if named is not None else [_first_line(exc)]
            raise BatchItemError(
                f"agent {asked.agent.name!r} could not be asked which modes, models and options it offers "
                f"(item {first} asks one): {type(exc).__name__}: " + "\n".join(why)
            ) from exc


def _refusal(asked: _Asked, offer: SessionState, what: Asked, seen: tuple[list[str], list[int]]) -> str:
    """The line that refuses one value, or "" when the agent offers it."""
    name, value = what
    offered: list[str] = []
    if isinstance(value, tuple):  # set
        config_id, setting = value
        refused = config_params(offer, config_id, setting, None)[1]
        option = offer.option(config_id)
        if option is None:
            offered, wrong = [known.id for known in offer.config_options], config_id  # the option's id is wrong
        else:
            offered = list(option.values) if option.type == "select" else []
            wrong = setting if isinstance(setting, str) else ""
    elif name == "mode":
        refused = mode_params(offer, value, None)[1]
        wrong = value
        offered = [mode.id for mode in offer.modes.available_modes] if offer.modes is not None else []
    else:
        wrong = value
        option = offer.model_option()
        if option is not None:
            refused = config_params(offer, option.id, value, None)[1]
            offered = list(option.values)
        else:
            refused = model_params(offer, value, None)[1]
            offered = [model.model_id for model in offer.models.available_models] if offer.models else []
    if refused is None:
        return ""
    ids, count = seen
    items = ", ".join(ids) + (f" and {count[0] - len(ids)} more" if count[0] > len(ids) else "")
    close = difflib.get_close_matches(wrong, offered, n=3, cutoff=0.6) if wrong else []
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    return f"item {items}: {name} of agent {asked.agent.name!r}: {refused}{hint}"


def _one_edit(word: str, known: str) -> bool:
    """Whether ``word`` is one insertion, deletion, substitution or swap of two neighbours from ``known``."""
    if abs(len(word) - len(known)) > 1 or word == known:
        return False
    if len(word) == len(known):
        diff = [i for i, (a, b) in enumerate(zip(word, known, strict=True)) if a != b]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and word[diff[0]] == known[diff[1]]
        return len(diff) == 1 or (swapped and word[diff[1]] == known[diff[0]])
    short, long = sorted((word, known), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _first_line(exc: BaseException) -> str:
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def _probe_timeout(settings: TurnSettings) -> float:
    return settings.timeout if settings.timeout is not None else PROBE_TIMEOUT


def _probe(agent: ResolvedAgent, cwd: str, settings: TurnSettings, observer: StartObserver) -> SessionState:
    """Start ``agent``, open a session in ``cwd``, and return what it offers; the agent is torn down after.

    In an event loop of its own; in a thread of its own when the plan is read from inside a running loop (an
    iterable's items are read as turns finish).

    Raises:
        TinyAcpError: the agent could not be started, failed, or did not answer in time.
        OSError: the directory cannot be used.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case, a file checked before the engine starts: Ctrl-C reaches the probe
        return asyncio.run(_aprobe(agent, cwd, settings, observer))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tinyacp-preflight") as pool:
        return pool.submit(asyncio.run, _aprobe(agent, cwd, settings, observer)).result()


async def _aprobe(agent: ResolvedAgent, cwd: str, settings: TurnSettings, observer: StartObserver) -> SessionState:
    from .._async_client import AsyncClient

    deadline = asyncio.get_running_loop().time() + _probe_timeout(settings)

    def left() -> float:
        return max(0.0, deadline - asyncio.get_running_loop().time())

    options = agent_options(agent, settings, cwd, observer)
    async with AsyncClient(options) as client:
        await initialize_watched(client, observer, left())
        session = await client.new_session(cwd, timeout=left())
        state = client.session_state(session.id)
        with contextlib.suppress(TinyAcpError, OSError):  # leave nothing behind in an agent that can say so
            await client.close_session(session.id, timeout=min(left(), 5.0))
        return state
