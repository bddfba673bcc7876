"""The files and terminals a run serves, on the terminal: who decides what the rules leave open (the person, else
nobody: refused), and each served action shown as it is decided and done (the path and its size, the command line
and how it ended), or as a ``served`` event with ``--format json``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ..._permissions import PermissionPolicy
from ..._records import AgentMessage, MessageKind, OutgoingMessage
from ..._serve import Serve, ServeRequest, rules_say
from ..shared._display import one_line
from ..shared._serving import action_words
from ._display import Display, Styled
from ._events import JsonEvents
from ._terminal import Asker

__all__ = ["ServedActions"]

_WATCHED: Final = 256
"""Served requests whose answer the display waits for: an agent that never reads its answers cannot grow it."""


class ServedActions:
    """Decides what the rules leave open, and shows every served action.

    Args:
        policy: the run's permission policy (``--allow-kind``, ``--yes``).
        serve: what is served (``--serve``, ``--allow-command``, ``--deny-command``).
        display: where the actions are shown.
        events: the JSON events (``--format json``), or None.
        asker: the person on the terminal, or None (then what no rule allows is refused).
        no_ask_reason: why nobody is asked, in words.
    """

    def __init__(
        self,
        *,
        policy: PermissionPolicy,
        serve: Serve,
        display: Display,
        events: JsonEvents | None,
        asker: Asker | None,
        no_ask_reason: str,
    ) -> None:
        self.policy = policy
        self.serve = serve
        self.display = display
        self.events = events
        self.asker = asker
        self.no_ask_reason = no_ask_reason
        self.refused = 0
        self._remembered: set[str] = set()
        self._words: dict[int, str] = {}
        self._watched: dict[Any, tuple[str, str]] = {}
        """Request id -> (method, what to call it) of the served requests whose answer is shown."""

    def decide(self, request: ServeRequest, interrupted: bool) -> bool | None:
        """``on_serve``: None where the rules decide; else the person's answer, or None (refused) without one."""
        if interrupted:
            self._words[id(request)] = "Ctrl-C: the turn is being cancelled"
            return False
        if request.granted or rules_say(request, self.policy, self.serve) is not None:
            return None
        remember = f"{request.kind} actions"
        if request.kind in self._remembered:
            self._words[id(request)] = f"by you, for all {remember} in this run"
            return True
        if self.asker is None:
            self._words[id(request)] = f"no rule allows it and {self.no_ask_reason}"
            return None
        answer = self.asker.ask_serve(request, remember)
        if answer in ("interrupted", "reject"):
            self._words[id(request)] = "Ctrl-C while asking" if answer == "interrupted" else "by you"
            return False
        if answer == "run":
            self._remembered.add(request.kind)
        self._words[id(request)] = "by you" + (f", for all {remember} in this run" if answer == "run" else "")
        return True

    def decided(self, request: ServeRequest, seq: int) -> None:
        """``on_serve_decision``: the action and its decision, shown (and its answer watched for)."""
        words = self._words.pop(id(request), "") or self._rule(request)
        if not request.allowed:
            self.refused += 1
        elif len(self._watched) < _WATCHED:
            self._watched[request.request_id] = (request.method, request.path or request.line or "")
        verdict = Styled("allowed" if request.allowed else "refused", "32" if request.allowed else "31")
        self.display.lines([(f"{action_words(request, 200)}: ", verdict, f" ({one_line(words, 200)})")])
        if self.events is not None:
            self.events.emit(
                {
                    "type": "served",
                    "epoch": request.epoch,
                    "seq": seq,
                    "session_id": request.session_id,
                    "request_id": request.request_id,
                    **request.record(),
                    "rule": words,
                }
            )

    def _rule(self, request: ServeRequest) -> str:  # noqa: PLR0911  one return per rule
        """The rule that decided, in the words of the command line."""
        by, reason = request.decided_by, request.reason
        if by == "policy" and self.policy.allow_all and request.allowed:
            return "--yes"
        if by == "policy" and "deny pattern" in reason:
            return f"--deny-command {reason.split('pattern ', 1)[-1]}"
        if by == "policy" and "matches the pattern" in reason:
            return f"--allow-command {reason.split('pattern ', 1)[-1]}"
        if by == "policy":
            return f"--allow-kind {request.kind}"
        if by == "permission":
            return "its permission was allowed earlier in the turn"
        if by == "default-refuse":
            return f"no rule allows it and {self.no_ask_reason}"
        return reason

    def seen(self, message: AgentMessage) -> None:
        """``on_message``: a ``terminal/wait_for_exit`` of the agent's, whose answer is shown."""
        if message.kind != MessageKind.SERVED or message.method != "terminal/wait_for_exit":
            return
        if len(self._watched) < _WATCHED:
            try:
                terminal = json.loads(message.raw)["params"]["terminalId"]
            except (ValueError, KeyError, TypeError):
                terminal = "?"
            self._watched[message.id] = (message.method, str(terminal))

    def answered(self, message: OutgoingMessage) -> None:
        """``on_send``: the answer to a watched request, shown (the size read, the terminal started, the exit)."""
        if message.method is not None or message.id not in self._watched:
            return
        method, what = self._watched.pop(message.id)
        answer = json.loads(message.raw)
        result = answer.get("result")
        if not isinstance(result, dict):
            error = answer.get("error") or {}
            self.display.lines([f"  {one_line(what, 120)}: failed: {one_line(error.get('message'), 200)}"], "33")
            return
        if method == "fs/read_text_file":
            size = len(str(result.get("content", "")).encode("utf-8", "surrogatepass"))
            line = f"  read {size:,} bytes"
        elif method == "fs/write_text_file":
            line = "  written"
        elif method == "terminal/create":
            line = f"  started as {one_line(result.get('terminalId'), 40)}"
        else:
            signal, code = result.get("signal"), result.get("exitCode")
            ended = f"ended by {one_line(signal, 20)}" if signal else f"exited with {code}"
            line = f"  {one_line(what, 40)} {ended}"
        self.display.lines([line], "2")
