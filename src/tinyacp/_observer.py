"""The caller's observer: where every message is recorded before the client acts on it.

The client calls the observer in the order the agent's lines arrived, from the thread (or task) that runs the
call, and waits for each call to return before it acts. If a call raises, the client does not act on that message,
tears the agent down and raises :class:`~tinyacp.ObserverError`. The :class:`~tinyacp.AsyncClient` also awaits
observer methods that are coroutine functions.

The flush point: an observer may also have a ``flush()`` method (no arguments; a coroutine function for the
:class:`~tinyacp.AsyncClient`). The client calls it, when something was recorded since the last flush, before
every act: before it writes anything to the agent (so before a permission answer goes out, after
``on_send``), before a call returns or raises to the caller, before a streamed update is handed to its
consumer, and before it waits for the agent's next output. So a durable observer may buffer the records of
one read and make them durable in one write. If ``flush`` raises, the client does not act: it tears the agent
down and raises :class:`~tinyacp.ObserverError`, even when the call was failing with another error already (that
error is its context); only an interruption (``KeyboardInterrupt``, a cancelled task) stays what is raised.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

from ._elicitation import ElicitationReply, ElicitationRequest
from ._permissions import PermissionReply, PermissionRequest
from ._records import AgentMessage, OutgoingMessage, Update
from ._serve import ServeRequest

__all__ = ["BaseObserver", "Observer"]


@runtime_checkable
class Observer(Protocol):
    """What the client calls. Subclass :class:`BaseObserver` to implement only what you need.

    ``on_message`` and ``on_send`` are optional: an observer without them still works, and gets no record of
    responses, other requests and our own lines. ``on_elicitation`` is optional too: with
    ``ClientFeatures(elicitation=True)`` it answers the agent's questions to the user (``elicitation/create``);
    without it they are declined. ``on_serve`` and ``on_serve_decision`` are optional too: with
    ``Options(serve=...)`` the first decides a read, a write or a command the agent asks the client for, the
    second records the decision before the client acts on it. ``flush()`` is optional too: the flush point (see
    the module documentation); :class:`BaseObserver` has none, so an observer that writes each record at once costs
    nothing there.
    """

    def on_update(self, update: Update) -> Awaitable[None] | None:
        """Record one ``session/update`` (every kind, every session)."""

    def on_permission_request(
        self, request: PermissionRequest
    ) -> PermissionReply | Awaitable[PermissionReply | None] | None:
        """Record a permission request, and decide it by returning a reply, or leave it to the policy (None)."""

    def on_permission_decision(self, request: PermissionRequest) -> Awaitable[None] | None:
        """Record the decision (``request.decision``, ``request.decided_by``); the answer is written after."""


class BaseObserver:
    """An observer that records nothing and decides nothing: override what you need."""

    def on_update(self, update: Update) -> Awaitable[None] | None:
        """Called for every ``session/update``, before the client acts on it."""
        return None

    def on_permission_request(
        self, request: PermissionRequest
    ) -> PermissionReply | Awaitable[PermissionReply | None] | None:
        """Called for every permission request; return a reply to decide it, or None for the policy."""
        return None

    def on_permission_decision(self, request: PermissionRequest) -> Awaitable[None] | None:
        """Called with the decision filled in, before the answer is written to the agent."""
        return None

    def on_message(self, message: AgentMessage) -> Awaitable[None] | None:
        """Called for every other line the agent sends (responses, other requests, invalid lines, …)."""
        return None

    def on_send(self, message: OutgoingMessage) -> Awaitable[None] | None:
        """Called for every line the client is about to write, before the write."""
        return None

    def on_elicitation(
        self, request: ElicitationRequest
    ) -> ElicitationReply | Awaitable[ElicitationReply | None] | None:
        """Called for every ``elicitation/create`` (with ``ClientFeatures(elicitation=True)``), after its line
        went to ``on_message``; return a reply, or None to decline. A ``url`` elicitation asks the user to open
        a URL: tinyacp never opens it."""
        return None

    def on_serve(self, request: ServeRequest) -> bool | Awaitable[bool | None] | None:
        """Called for every read, write or command the agent asks the client for (with ``Options(serve=...)``),
        after its line went to ``on_message`` and once confinement accepted it: return True to allow it, False
        to refuse it, or None to leave it to the rules."""
        return None

    def on_serve_decision(self, request: ServeRequest) -> Awaitable[None] | None:
        """Called with the decision filled in (``allowed``, ``decided_by``, ``reason``; a write's ``prior``
        state), before the client reads, writes or starts anything, and before the answer is written."""
        return None
