"""The observer of a run: it records first (the journal), then shows (the display, or the JSON events on stdout),
then, for a permission request the policy does not allow, asks the person on the terminal, and the agent's own
questions too (:mod:`._questions`).

Its pieces stay separate: the journal is a :class:`~tinyacp.JsonlJournal` anyone can use alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..._elicitation import ElicitationReply, ElicitationRequest
from ..._journal import JsonlJournal
from ..._limits import TransferLimits
from ..._messages import AgentMessageChunk, PermissionToolCall, UsageUpdate
from ..._observer import BaseObserver
from ..._permissions import DecisionSource, PermissionPolicy, PermissionReply, PermissionRequest
from ..._records import AgentMessage, MessageKind, OutgoingMessage, Update
from ..._serve import Serve, ServeRequest
from ..._startup_watch import StartupWatch
from ..shared._display import one_line
from ._display import Display, Styled
from ._events import JsonEvents
from ._questions import Questions
from ._served import ServedActions
from ._terminal import Asker, Interrupts

__all__ = ["RunObserver"]


class RunObserver(BaseObserver):
    """Journal first, then the display or the JSON events, then (for permissions) the policy or the person."""

    def __init__(
        self,
        *,
        journal: JsonlJournal | None,
        display: Display,
        events: JsonEvents | None,
        policy: PermissionPolicy,
        asker: Asker | None,
        limits: TransferLimits,
        interrupts: Interrupts,
        no_ask_reason: str = "there is no terminal to ask",
        config_tools: tuple[Iterable[str], Iterable[str]] = ((), ()),
        questions: Questions | None = None,
        serve: Serve | None = None,
    ) -> None:
        self.journal = journal
        self.no_ask_reason = no_ask_reason
        self.display = display
        self.events = events
        self.policy = policy
        self.questions = questions or Questions(display, None, no_ask_reason, display.child_name)
        """Who answers the agent's questions (``elicitation/create``): the person on the terminal, or nobody."""
        self._config_tools = (frozenset(config_tools[0]), frozenset(config_tools[1]))
        """The tools the agent's entry in ``config.toml`` allows and denies: the policy's rule is worded so."""
        self.asker = asker
        self.interrupts = interrupts
        self.session_id: str | None = None
        self.in_turn = False
        self.last_seq = 0
        self.allowed = 0
        self.rejected = 0
        self.unasked = 0
        self.tool_names: list[str] = []
        """The names of the tool calls the agent asked permission for in this run, each once, in order."""
        self.permission_requests = 0
        """Permission requests in this run (all turns)."""
        self._remembered: set[tuple[str, str]] = set()
        self._why: dict[int, tuple[str, str, str]] = {}  # id(request) -> (decided_by, rule, words)
        self._max_bytes = limits.max_reply_bytes
        self._max_chunks = limits.max_reply_chunks
        self._kept_bytes = 0
        self._kept_chunks = 0
        self._overflowed = False
        self.watch = StartupWatch()
        self.initialize_answer = b""
        """The agent's answer to ``initialize`` as it sent it (auth methods carry fields the client does not keep)."""
        self.usage: UsageUpdate | None = None
        """The agent's last ``usage_update``: context used, and the session's cost when it reports one."""
        self.served = ServedActions(
            policy=policy,
            serve=serve or Serve(),
            display=display,
            events=events,
            asker=asker,
            no_ask_reason=no_ask_reason,
        )
        """The reads, writes and commands served to the agent: asked, shown."""

    def new_turn(self) -> None:
        """Count the next turn's permissions and reply afresh (a chat has many turns)."""
        self.allowed = self.rejected = self.unasked = 0
        self._kept_bytes = self._kept_chunks = 0
        self._overflowed = False

    def on_update(self, update: Update) -> None:
        if self.journal is not None:
            self.journal.on_update(update)
        self.watch.seen(update.raw)
        self.last_seq = update.seq
        payload = update.payload
        if isinstance(payload, UsageUpdate) and update.session_id == self.session_id:
            self.usage = payload
        if self.events is not None:
            self.events.update(update)
        # A child session's (a subagent's) reply is not ours: the display shows it under the child's name.
        if isinstance(payload, AgentMessageChunk) and self.display.child_name(update.session_id) is None:
            if self.in_turn and update.session_id == self.session_id and self.events is None:
                self._reply(payload)
            return
        self.display.update(update)

    def _reply(self, payload: AgentMessageChunk) -> None:
        text = payload.content.text
        if text is None:
            self.display.lines([f"(the agent sent a {one_line(payload.content.type, 40)} block)"], "2")
            return
        if self._overflowed:
            return
        # The client keeps the reply within the reply limits; stdout shows exactly what it keeps.
        size = len(text.encode("utf-8", "surrogatepass"))
        if self._kept_chunks >= self._max_chunks or self._kept_bytes + size > self._max_bytes:
            self._overflowed = True
            self.display.lines(["reply limit reached: the rest of the reply is left out (see --max-reply-*)"], "33")
            return
        self._kept_bytes += size
        self._kept_chunks += 1
        self.display.reply(text)

    def on_permission_request(self, request: PermissionRequest) -> PermissionReply | None:
        if self.journal is not None:
            self.journal.on_permission_request(request)
        decided_by, rule, words, reply = self._decide(request)
        self._why[id(request)] = (decided_by, rule, words)
        return reply

    def _decide(self, request: PermissionRequest) -> tuple[str, str, str, PermissionReply | None]:  # noqa: PLR0911  one return per rule, in the order the rules apply
        """Who decides, by which rule, in words for the display, and the reply (None: leave it to the policy)."""
        if self.interrupts.interrupted:
            return "cancelled", "turn cancelled", "Ctrl-C: the turn is being cancelled", PermissionReply.cancelled()
        tool = request.tool_call
        self.permission_requests += 1
        if tool.name is not None and tool.name not in self.tool_names:
            self.tool_names.append(tool.name)
        rule = _policy_rule(self.policy, tool, self._config_tools)
        if rule is not None:  # the policy decides (a denied tool is rejected: nobody is asked, nothing remembered)
            return "policy", rule, f"by the policy: {rule}", None
        key = _remember_key(tool.kind, tool.title)
        for_run = f"by you, for all {_describe(key)} in this run"
        if key in self._remembered:
            return "person", "earlier answer", for_run, PermissionReply.allow()
        if self.asker is None:
            self.unasked += 1
            return "default-reject", "not asked", f"no rule allows it and {self.no_ask_reason}", None
        answer = self.asker.ask(request, _describe(key))
        if answer == "interrupted":
            return "person", "interrupted", "Ctrl-C while asking", PermissionReply.cancelled()
        if answer == "reject":
            return "person", "asked", "by you", PermissionReply.reject()
        if answer == "run":
            self._remembered.add(key)
            return "person", "asked", for_run, PermissionReply.allow()
        return "person", "asked", "by you", PermissionReply.allow()

    def unmatched_tool_rules(self) -> list[str]:
        """A line for each tool rule (``--allow-tool``, ``--deny-tool``, the config's) that matched none of the
        run's permission requests, naming the tools the agent did ask for: names are matched exactly, and ``read``
        is not ``Read``. Nothing when the agent asked no permission (a rule not needed is no mistake)."""
        if not self.permission_requests:
            return []
        used = ", ".join(one_line(name, 40) for name in self.tool_names[:20]) if self.tool_names else ""
        named = f"the agent's tool calls were named {used}" if used else "the agent's tool calls carried no name"
        allowed_by_config, denied_by_config = self._config_tools
        lines = []
        for names, flag, config_key in (
            (self.policy.tools, "--allow-tool", "allow_tools"),
            (self.policy.deny_tools, "--deny-tool", "deny_tools"),
        ):
            in_config = allowed_by_config if flag == "--allow-tool" else denied_by_config
            for name in sorted(names - set(self.tool_names)):
                rule = f"{config_key} {name} (config.toml)" if name in in_config else f"{flag} {name}"
                lines.append(f"{one_line(rule, 80)} matched no tool call: {named} (names match exactly)")
        return lines

    def on_permission_decision(self, request: PermissionRequest) -> None:
        if self.journal is not None:
            self.journal.on_permission_decision(request)
        decided_by, rule, words = self._why.pop(id(request), ("", "", ""))
        if request.decided_by == DecisionSource.CANCELLED:
            decided_by, rule, words = "cancelled", "turn cancelled", "the turn was cancelled"
        elif request.decided_by == DecisionSource.DEFAULT_REJECT and decided_by != "default-reject":
            decided_by, rule, words = "default-reject", "no rule", "no rule allows it"
        elif not decided_by:
            decided_by = str(request.decided_by)
        if request.allowed:
            self.allowed += 1
        else:
            self.rejected += 1
        if self.events is not None:
            child = self.display.child_name(request.session_id) is not None
            self.events.permission(request, self.last_seq, decided_by, rule, self.session_id if child else None)
        self.display.permission(request, words or decided_by)

    def on_elicitation(self, request: ElicitationRequest) -> ElicitationReply:
        """The agent asks the person (its request line is already recorded): asked on the terminal, else
        declined; the answer is recorded (``on_send``) before the agent gets it."""
        if self.interrupts.interrupted:
            reply, words = ElicitationReply.cancel(), "cancelled: the turn is being cancelled"
        else:
            reply, words = self.questions.answer(request)
        child = self.display.child_name(request.session_id or "")
        prefix = f"[{child}] " if child is not None else ""
        code = {"accept": "32", "decline": "33"}.get(reply.action, "31")
        self.display.lines([(f"{prefix}question: {one_line(request.message, 200)}: ", Styled(words, code))])
        if self.events is not None:
            self.events.elicitation(request, reply, words, self.last_seq)
        return reply

    def on_serve(self, request: ServeRequest) -> bool | None:
        """A read, write or command the agent asks tinyacp for: the rules decide, else the person, else refused."""
        return self.served.decide(request, self.interrupts.interrupted)

    def on_serve_decision(self, request: ServeRequest) -> None:
        if self.journal is not None:
            self.journal.on_serve_decision(request)
        self.served.decided(request, self.last_seq)

    def on_message(self, message: AgentMessage) -> None:
        if self.journal is not None:
            self.journal.on_message(message)
        self.served.seen(message)
        self.watch.seen(message.raw, message)
        if message.kind == MessageKind.RESPONSE and message.method == "initialize":
            self.initialize_answer = message.raw

    def on_send(self, message: OutgoingMessage) -> None:
        if self.journal is not None:
            self.journal.on_send(message)
        self.served.answered(message)

    def flush(self) -> None:
        """The client's flush point: the journal writes what it recorded since the last one."""
        if self.journal is not None:
            self.journal.flush()


def _policy_rule(  # noqa: PLR0911  one return per rule, in the policy's order
    policy: PermissionPolicy, tool: PermissionToolCall, config_tools: tuple[frozenset[str], frozenset[str]]
) -> str | None:
    """Which rule of the policy decides a tool call, in the words of the command line or the config file
    (``--deny-tool`` rejects, every other allows); None if none does. The order is the policy's: a denied tool
    first, whatever allows it."""
    name, kind, title = tool.name, tool.kind, tool.title
    allowed_by_config, denied_by_config = config_tools
    if policy.denies(tool):
        return f"deny_tools {name} (config.toml)" if name in denied_by_config else f"--deny-tool {name}"
    if name is None and policy.deny_tools:  # it could be a denied tool: no rule allows it (the person may)
        return None
    if policy.allow_all:
        return "--yes"
    if name is not None and name in policy.tools:
        return f"allow_tools {name} (config.toml)" if name in allowed_by_config else f"--allow-tool {name}"
    if kind is not None and kind in policy.kinds:
        return f"--allow-kind {kind}"
    for prefix in policy.title_prefixes:
        if (title or "").startswith(prefix):
            return f"--allow-title {json.dumps(prefix, ensure_ascii=False)}"
    return None


def _remember_key(kind: str | None, title: str | None) -> tuple[str, str]:
    """ "Allow for this run" covers every later request of the same kind; a request with no kind, the same title."""
    return ("kind", kind) if kind else ("title", title or "")


def _describe(key: tuple[str, str]) -> str:
    what, value = key
    return f"{one_line(value, 20)!r} requests" if what == "kind" else f"requests titled {one_line(value, 60)!r}"
