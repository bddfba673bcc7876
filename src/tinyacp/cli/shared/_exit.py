"""The exit status of the ``tinyacp`` command: one value per outcome, documented in one table; and the errors
the command itself raises for what it was asked (both exit 2)."""

from __future__ import annotations

import enum

__all__ = [
    "BATCH_EXIT_STATUS",
    "CHECK_EXIT_STATUS",
    "EXIT_STATUS",
    "OUTCOME_WORDS",
    "Exit",
    "SettingUnavailable",
    "UsageProblem",
]


class UsageProblem(Exception):
    """A usage error found after parsing (a missing file, a bad limit, a bad config file): exit 2 with this message."""


class SettingUnavailable(Exception):
    """A setting asked for (a mode, a model, a config option or value, an MCP transport, a session to continue)
    that the agent does not offer; the message names what it does offer. Exit status 2, before the prompt."""


class Exit(enum.IntEnum):
    """The exit status of ``tinyacp prompt``, ``chat`` and ``probe``, one per outcome."""

    OK = 0
    """The agent ended its turn (``end_turn``)."""
    AGENT_ERROR = 1
    """The agent exited, broke the protocol or answered with an error; or the journal could not be written."""
    USAGE = 2
    """Bad arguments, an unreadable file, config or journal path."""
    REFUSAL = 3
    """The agent refused (``refusal``)."""
    INCOMPLETE = 4
    """The turn stopped early: ``max_tokens``, ``max_turn_requests``, or a stop reason outside ACP v1."""
    TIMEOUT = 5
    """``--timeout`` passed (the turn was cancelled, or the agent did not even answer the cancel)."""
    LIMIT = 6
    """A transfer limit was reached (a line, an update, the update count, the reply, the prompt's size)."""
    NOT_INSTALLED = 7
    """The agent's program could not be started (not installed, not executable), or ``npx``/``uvx`` could not fetch
    it (no network, not in the registry) or found no Python for it."""
    NOT_LOGGED_IN = 8
    """The agent needs a login (``AuthRequired``): the run lists the auth methods it offers and what each needs."""
    REJECTED = 9
    """``--fail-on-reject``: the turn ended, but a permission request in it was rejected or cancelled."""
    CANCELLED = 130
    """Ctrl-C (128 + SIGINT), or the agent ended the turn as ``cancelled``."""


OUTCOME_WORDS: dict[int, str] = {
    Exit.OK: "end_turn",
    Exit.AGENT_ERROR: "agent_error",
    Exit.USAGE: "usage_error",
    Exit.REFUSAL: "refusal",
    Exit.INCOMPLETE: "incomplete",
    Exit.TIMEOUT: "timeout",
    Exit.LIMIT: "limit",
    Exit.NOT_INSTALLED: "not_installed",
    Exit.NOT_LOGGED_IN: "not_logged_in",
    Exit.REJECTED: "rejected",
    Exit.CANCELLED: "cancelled",
}


EXIT_STATUS = """exit status:
  0    the agent ended its turn (end_turn)
  1    agent error: it exited, broke the protocol, does not speak ACP, or answered with an error; or the
       journal failed
  2    usage error: bad arguments, an unknown agent name, an empty prompt or one larger than a message,
       text that is not UTF-8, an unreadable file, config or journal path, or a setting the agent does
       not offer
  3    the agent refused (refusal)
  4    the turn stopped early: max_tokens, max_turn_requests, or a stop reason outside ACP v1
  5    --timeout passed
  6    a transfer limit was reached
  7    the agent's program could not be started (not installed), or npx/uvx could not fetch it (no
       network, not in the registry) or found no Python for it
  8    not logged in: the agent needs a login; the methods it offers are listed (use --auth METHOD)
  9    --fail-on-reject: the turn ended but a permission request was rejected or cancelled
  130  Ctrl-C (or the agent ended the turn as cancelled); 128+N when signal N stopped the run"""

BATCH_EXIT_STATUS = """exit status:
  0    every item has a record, and every latest record is ok
  1    some turn failed (or was not run); the records say why
  2    usage error: bad arguments, a malformed item or repeated id, an output directory in use or not shared
  3    the engine failed (Ray missing, unreachable, or no node left); run again to resume
  130  Ctrl-C: turns in flight were stopped and left without a record; run again to resume"""

CHECK_EXIT_STATUS = """exit status of --check:
  0    every agent checked answered initialize (one that needs a login did answer)
  1    an agent started but did not answer: it exited, does not speak ACP, timed out or answered with an error
  2    usage error: bad arguments, an unknown agent name, a bad config file
  7    no agent failed so, but one could not be started (not installed, or npx/uvx could not fetch it)
  130  Ctrl-C; 128+N when signal N (SIGTERM, SIGHUP) stopped the check"""
