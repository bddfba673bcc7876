"""The caller's rules for tools: who decides a permission request, and how a decision becomes an answer.

The order is fixed and default-deny: the observer may decide; otherwise the :class:`PermissionPolicy` decides;
anything neither allows is rejected. After a ``session/cancel`` every request of that turn is answered with the
``cancelled`` outcome, as the protocol requires.

A decision is mapped onto the options the agent offered **by their kind, never by their id**: real agents name
their options ``allow``, ``approved``, ``proceed_once``, … and only the kind means the same everywhere. The tool
call's ``kind`` and ``title`` are claims made by the agent, not facts: a policy that allows ``read`` trusts the
agent to label its tools honestly.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ._messages import PermissionOption, PermissionOptionKind, PermissionToolCall, RequestId

__all__ = [
    "DecisionSource",
    "PermissionPolicy",
    "PermissionReply",
    "PermissionRequest",
]


class PermissionReply(msgspec.Struct, frozen=True):
    """A decision on a permission request. Build one with :meth:`allow`, :meth:`reject`, :meth:`select`
    or :meth:`cancelled`."""

    action: Literal["allow", "reject", "select", "cancelled"]
    option_id: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ("allow", "reject", "select", "cancelled"):
            raise ValueError(f"a PermissionReply action is allow, reject, select or cancelled, not {self.action!r}")
        if (self.action == "select") != isinstance(self.option_id, str):
            raise ValueError("select takes an option id (a str); the other actions take none")

    @classmethod
    def allow(cls) -> PermissionReply:
        """Allow: the first ``allow_once`` option, else the first ``allow_always``."""
        return cls("allow")

    @classmethod
    def reject(cls) -> PermissionReply:
        """Reject: the first ``reject_once`` option, else ``reject_always``, else the cancelled outcome."""
        return cls("reject")

    @classmethod
    def select(cls, option_id: str) -> PermissionReply:
        """Choose one offered option by its id. An id the agent did not offer is treated as a rejection."""
        return cls("select", option_id)

    @classmethod
    def cancelled(cls) -> PermissionReply:
        """Answer with the protocol's ``cancelled`` outcome (the turn is being cancelled)."""
        return cls("cancelled")


class DecisionSource(enum.StrEnum):
    """Who decided a permission request."""

    OBSERVER = "observer"
    POLICY = "policy"
    DEFAULT_REJECT = "default-reject"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class PermissionPolicy:
    """Which tool calls are allowed without asking the observer. The default allows nothing.

    A request is allowed when its tool's ``name`` is in ``tools``, its kind in ``kinds``, its title starts with
    one of ``title_prefixes``, or ``allow_all`` is set; but never when its ``name`` is in ``deny_tools``, which
    wins over everything else, ``allow_all`` included. A request without a ``name`` takes the name an earlier
    ``tool_call`` or ``tool_call_update`` of the same tool call gave (Codex names its tools there only). Deny
    rules cannot fail open: while ``deny_tools`` is in force, a request whose tool has no known name (older
    agents, OpenCode) is never allowed by the policy (not by ``allow_all``, ``kinds`` nor ``title_prefixes``),
    since it could be a denied tool; the observer can still allow it.

    Args:
        kinds: tool kinds to allow (``read``, ``edit``, ``execute``, …), as the agent claims them.
        title_prefixes: allow a tool call whose title starts with one of these.
        tools: tool names to allow, matched exactly (``Read``, ``Grep``).
        deny_tools: tool names never allowed by the policy, matched exactly (``Bash``).
        allow_all: allow every request but those of ``deny_tools`` (``tinyacp prompt --yes``).

    Raises:
        TypeError: one of the collections is a single string.
    """

    kinds: frozenset[str] = frozenset()
    title_prefixes: tuple[str, ...] = ()
    tools: frozenset[str] = frozenset()
    deny_tools: frozenset[str] = frozenset()
    allow_all: bool = False

    def __init__(
        self,
        kinds: Iterable[str] = (),
        title_prefixes: Iterable[str] = (),
        *,
        tools: Iterable[str] = (),
        deny_tools: Iterable[str] = (),
        allow_all: bool = False,
    ) -> None:
        for name, value in (
            ("kinds", kinds),
            ("title_prefixes", title_prefixes),
            ("tools", tools),
            ("deny_tools", deny_tools),
        ):
            if isinstance(value, str):
                raise TypeError(f"{name} takes a collection of strings, not a single string")
        object.__setattr__(self, "kinds", frozenset(str(kind) for kind in kinds))
        object.__setattr__(self, "title_prefixes", tuple(title_prefixes))
        object.__setattr__(self, "tools", frozenset(str(tool) for tool in tools))
        object.__setattr__(self, "deny_tools", frozenset(str(tool) for tool in deny_tools))
        object.__setattr__(self, "allow_all", bool(allow_all))

    def denies(self, tool_call: PermissionToolCall) -> bool:
        """Whether the tool call's name is one of ``deny_tools``."""
        return tool_call.name is not None and tool_call.name in self.deny_tools

    def allows(self, tool_call: PermissionToolCall) -> bool:
        """Whether this policy allows the tool call (by its name, its claimed kind or its title)."""
        if self.denies(tool_call):
            return False
        name = tool_call.name
        if name is None and self.deny_tools:  # it could be a denied tool: only the observer may allow it
            return False
        if self.allow_all:
            return True
        if name is not None and name in self.tools:
            return True
        if tool_call.kind is not None and tool_call.kind in self.kinds:
            return True
        title = tool_call.title or ""
        return any(title.startswith(prefix) for prefix in self.title_prefixes)


@dataclass(slots=True, eq=False)
class PermissionRequest:
    """A ``session/request_permission`` request from the agent, and, once decided, the decision.

    ``decision``, ``decided_by``, ``selected`` and ``reason`` are filled in before
    ``on_permission_decision`` is called, and that call returns before the answer is written. ``session_id`` is
    the session that asks: a child session's (a subagent's) during its parent's prompt, when ``parent_session_id``
    says whose child it is.
    """

    epoch: int
    raw: bytes
    """The exact line the agent sent, without its newline."""
    request_id: RequestId
    """The agent's own id for this request (a number or a string), echoed in our answer."""
    session_id: str
    tool_call: PermissionToolCall
    options: list[PermissionOption]
    decision: PermissionReply | None = None
    """The final decision, after mapping: what the agent is told."""
    decided_by: DecisionSource | None = None
    selected: PermissionOption | None = None
    """The option chosen, or None when the answer is the ``cancelled`` outcome."""
    reason: str = ""
    """Why the decision came out as it did, in words for a log."""
    parent_session_id: str | None = None
    """The session whose ``subagent_update`` announced the asking session, if it is a subagent's."""
    _outcome: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def allowed(self) -> bool:
        """Whether the answer lets the tool run."""
        return self.selected is not None and self.selected.kind.startswith("allow")

    @property
    def verdict(self) -> str:
        """What the agent was told, in one word: ``allowed_once``, ``allowed_always``, ``rejected``, or
        ``cancelled`` (the protocol's cancelled outcome); empty before the decision."""
        if self.decision is None:
            return ""
        if self.selected is None:
            return "cancelled"
        if self.allowed:
            return "allowed_always" if self.selected.kind == PermissionOptionKind.ALLOW_ALWAYS else "allowed_once"
        return "rejected"

    @property
    def outcome(self) -> dict[str, Any]:
        """The ``outcome`` object of the answer, as written to the agent."""
        return self._outcome


def _unambiguous(options: list[PermissionOption]) -> list[PermissionOption]:
    """The options whose id names one kind only.

    An agent that gives one id to an allow and a reject option (a bug, or a trick) would read an answer naming
    that id as either: such an option is never chosen, so a rejection can never be read as an allow.
    """
    kinds: dict[str, set[str]] = {}
    for option in options:
        kinds.setdefault(option.option_id, set()).add(option.kind)
    return [option for option in options if len(kinds[option.option_id]) == 1]


def _first(options: list[PermissionOption], *kinds: str) -> PermissionOption | None:
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option
    return None


def _who_decides(
    request: PermissionRequest, reply: PermissionReply | None, policy: PermissionPolicy, *, cancelled: bool
) -> tuple[DecisionSource, PermissionReply, str]:
    """Who decides, what they want, and why: cancelled turn, else observer, else policy, else reject."""
    if cancelled:
        return DecisionSource.CANCELLED, PermissionReply.cancelled(), "the turn was cancelled"
    if reply is not None:
        return DecisionSource.OBSERVER, reply, f"the observer chose {reply.action}"
    tool_call = request.tool_call
    if policy.denies(tool_call):
        return DecisionSource.POLICY, PermissionReply.reject(), f"the policy denies tool {tool_call.name!r}"
    if policy.allows(tool_call):
        return DecisionSource.POLICY, PermissionReply.allow(), "the policy allows it"
    if tool_call.name is None and policy.deny_tools and has_rules(policy):
        why = "the tool has no known name and deny_tools is in force, so no rule may allow it"
        return DecisionSource.DEFAULT_REJECT, PermissionReply.reject(), why
    return DecisionSource.DEFAULT_REJECT, PermissionReply.reject(), "neither the observer nor the policy allowed it"


def decide(
    request: PermissionRequest,
    reply: PermissionReply | None,
    policy: PermissionPolicy,
    *,
    cancelled: bool,
) -> None:
    """Fill in the request's decision: cancelled turn, else observer, else policy, else reject."""
    source, wanted, why = _who_decides(request, reply, policy, cancelled=cancelled)
    options = _unambiguous(request.options)
    unambiguous = " unambiguous" if len(options) < len(request.options) else ""
    decision = wanted
    selected: PermissionOption | None = None
    if wanted.action == "select":
        selected = next((option for option in options if option.option_id == wanted.option_id), None)
        if selected is None:
            offered = any(option.option_id == wanted.option_id for option in request.options)
            why = (
                f"option {wanted.option_id!r} is ambiguous (the agent gave that id to options of different kinds)"
                if offered
                else f"option {wanted.option_id!r} was not offered by the agent"
            ) + ", so it is rejected"
            decision = PermissionReply.reject()
    if decision.action == "allow":
        selected = _first(options, PermissionOptionKind.ALLOW_ONCE, PermissionOptionKind.ALLOW_ALWAYS)
        if selected is None:
            why += f"; the agent offered no{unambiguous} allow option, so it is rejected"
            decision = PermissionReply.reject()
    if decision.action == "reject":
        selected = _first(options, PermissionOptionKind.REJECT_ONCE, PermissionOptionKind.REJECT_ALWAYS)
        if selected is None:
            why += f"; the agent offered no{unambiguous} reject option, so the answer is the cancelled outcome"
    request.decision = decision
    request.decided_by = source
    request.selected = selected
    request.reason = why
    request._outcome = (
        {"outcome": "selected", "optionId": selected.option_id} if selected is not None else {"outcome": "cancelled"}
    )


def has_rules(policy: PermissionPolicy) -> bool:
    """Whether ``policy`` allows or denies anything by a rule (the default policy rejects every request)."""
    return bool(policy.allow_all or policy.kinds or policy.title_prefixes or policy.tools or policy.deny_tools)
