"""A deterministic ACP v1 agent with no model behind it: ``python -m tinyacp.demo``.

It is the *other side* of the wire, shipped so that a first run, the docs and the tests have a real agent
to talk to. It speaks JSON-RPC 2.0 over stdin/stdout, one compact JSON object per line, and writes nothing
else to stdout. It uses the standard library only and nothing of tinyacp except the version string, so it
stays an independent peer.

A prompt turn, in order (every step is a ``session/update`` unless marked otherwise)::

    plan                  [read: pending, summarise: pending]
    agent_thought_chunk
    tool_call             call_<n>, "Read files in <cwd>", name Read, kind read, status pending, locations [cwd]
    session/request_permission   (a request; options allow / allow_always / reject)
    -- allowed (allow_once or allow_always):
    tool_call_update      in_progress
    tool_call_update      completed, content = a table of the files in cwd
    plan                  [read: completed, summarise: in_progress]
    agent_message_chunk   x --chunks, the first one starting "You said: <prompt text>"
    plan                  [read: completed, summarise: completed]
    -> {"stopReason": "end_turn"}
    -- rejected (a reject_* option, an unknown option id, or an error answer):
    tool_call_update      failed
    agent_message_chunk   x --chunks, saying it was not allowed to read the files
    -> {"stopReason": "end_turn"}

When the prompt's ``_meta`` carries a W3C ``traceparent``, or the agent was started with ``TRACEPARENT`` in its
environment, the reply says which trace it joined, after the echo: ``Joined trace <trace id> (from _meta, parent
span <span id>)`` and ``Started in trace <trace id> (from TRACEPARENT, parent span <span id>)``.

A ``session/cancel`` for the session at any point of the turn, or a ``cancelled`` permission outcome, stops
the stream: the tool call, if started and not finished, is marked ``failed`` and the prompt gets
``{"stopReason": "cancelled"}``. The agent does not wait for the permission answer once the turn is
cancelled; a late answer is ignored.

``--all-kinds`` (or the word ``all-kinds`` in the prompt text) replaces the turn with one update of each of
the eleven v1 kinds, in schema order, and ``end_turn``, with no permission request.

**The newer parts of ACP** (https://agentclientprotocol.com/protocol/overview; schema 1.29, the TypeScript SDK
2.4.0). Each honours the client's opt-in in ``initialize``'s ``clientCapabilities`` as claude-agent-acp and
codex-acp do, and each is reached by a word in the prompt, or for every turn by ``--with NAME[,NAME...]``:

- ``with-notice``: a ``notice`` update, warning "Model fallback" (opt-in ``session.notices``); without it, the
  same text heads the reply, ``**Model fallback:** ...``, as Claude's adapter writes it.
- ``with-compaction``: ``compaction_update`` in_progress, two ``compaction_summary_chunk``, ``compaction_update``
  completed with the summary (``session.compaction``); without it, a ``tool_call`` named ``Compact``. Either way
  the context in use shrinks.
- ``with-question``: ``elicitation/create``, a form of five fields: a string, a choice (``oneOf``), an integer, a
  number, a boolean (``elicitation.form``); the reply repeats the answer, or says it was declined, dismissed or
  did not fit the form. Without the opt-in the reply says it would have asked.
- ``with-login``: ``elicitation/create`` in ``url`` mode, then ``elicitation/complete`` once accepted
  (``elicitation.url``); without it, the link is in the reply.
- ``with-subagent``: a child session ``<id>.sub-<n>`` does the reading (``subagents``): a ``subagent_update``
  announces it (running) before any of its traffic, a ``session_message`` gives it the task, the child's own
  updates and permission request come under its session id, its answer comes back as ``session_message`` and
  ``session_message_chunk``, and a ``subagent_update`` reports it idle. A cancel of the parent cancels the child.
  Without the opt-in, the ordinary turn.
- ``with-bash``: the tool call is ``Bash`` (kind execute, ``ls -l <cwd>``), asked for even in mode ``auto``.
  Nothing is run: the agent lists the files itself. Tool names need no opt-in.
- ``with-read``, ``with-write``, ``with-terminal`` (``_served.py``): the files of the cwd are read with
  ``fs/read_text_file``, a summary written to ``demo-notes.md`` with ``fs/write_text_file`` (a ``Write`` tool call,
  kind edit, asked for), ``ls -l <cwd>`` run in a client's terminal (a ``Bash`` tool call, kind execute, asked for;
  ``terminal/create`` embedded in the tool call, ``wait_for_exit``, ``output``, ``release``), each when the client
  offers it (``fs.readTextFile``, ``fs.writeTextFile``, ``terminal``), as kimi-cli and fast-agent do; without the
  offer the agent does it itself. The reply says which, and what the client refused.
- every turn: ``plan_update`` (items under one ``planId``) in place of ``plan``, and ``plan_removed`` once the
  turn is done (opt-in ``plan``); without it, the legacy ``plan``.

The steps run in this order: the notice and the compaction before the plan, the questions after
the thought, then the tool call (or the child).

Errors: an unknown request method gets ``-32601 Method not found``; bad params (a relative or missing ``cwd``,
missing ``mcpServers``, an unknown ``sessionId``) get ``-32602``. Unknown notifications, responses to ids the
agent never sent and lines that are not JSON objects are ignored (logged to stderr with ``--verbose``).
A ``session/prompt`` that arrives while another turn is running is answered after that turn.

Beyond one turn (https://agentclientprotocol.com/protocol/overview), so every call of the client can be tried
offline:

- **Authentication**: methods ``demo-login`` (always succeeds) and ``demo-api-key`` (needs a key: the agent's
  ``TINYACP_DEMO_API_KEY`` environment variable, or one sent as ``_meta["api-key"]``; when both are set they must
  match). With ``--require-auth`` (or ``TINYACP_DEMO_REQUIRE_AUTH=1``) every session call is answered ``-32000``
  until one succeeds; ``logout`` undoes it.
- **Sessions that outlive the process**: each session is kept as ``<id>.json`` in the state directory
  (``--state-dir``, else ``TINYACP_DEMO_STATE_DIR``, else ``$XDG_STATE_HOME/tinyacp-demo``, else
  ``~/.local/state/tinyacp-demo``), so a second agent process can ``session/load`` it (the history is replayed
  as ``user_message_chunk`` and ``agent_message_chunk`` updates, then the answer), ``session/resume`` it (no
  replay), ``session/list``, ``session/close`` and ``session/delete`` it. An unknown session gets ``-32002``.
  Agents may share the directory: each new session claims its number ``demo-N`` by creating its file, starting
  from the number the directory's ``next-number`` file suggests, so no two sessions get the same one.
- **Modes and config options**: modes ``default`` (asks before reading) and ``auto`` (reads without asking),
  and config options ``mode`` and ``model`` (``demo-small``, ``demo-large``); a change is reported as
  ``current_mode_update`` / ``config_option_update`` before the answer.
- **Usage and cost**: every finished turn ends with a ``usage_update`` (context used, size, cumulative cost in
  USD, dearer on ``demo-large``) and the answer carries ``usage`` (token counts).
- **System prompt**: ``systemPrompt`` on new/load/resume/fork, ``append`` or ``override`` (advertised as
  ``sessionCapabilities.systemPrompt.mode.override``), is echoed in the reply's first chunk (``System prompt
  (override): ...`` for an override); it is not stored, as the protocol says, but a fork without one keeps its
  source's.
- **Fork** (``session/fork``, advertised as ``sessionCapabilities.fork``): a new session with the source's
  history, mode, model and context; the source is left as it was.
- **Unstable methods**: ``session/set_title`` (``sessionCapabilities.title``; reported to an open session as
  ``session_info_update``), and ``providers/list``, ``providers/set`` (``openai`` or ``anthropic``, a base URL;
  headers are taken and never shown), ``providers/disable`` for the one provider ``demo`` (``providers``).
- **An extension method**: ``_tinyacp/echo`` answers ``{"params": <its params>, "notifications": [...]}``, the
  methods of the ``_``-extension notifications received so far (the last 100).

``--delay SECONDS`` pauses between the updates of a turn (not before the first), reading input meanwhile, so a
cancel can land mid-turn. The agent exits 0 when stdin closes: at once if it is idle or waiting for the
permission answer (no prompt response is written then), after the turn if the turn needs no more input.

**The package.** One module per part, each with a docstring that says what it shows:

- ``_agent.py``: the protocol loop, `DemoAgent`: reading lines, dispatching requests and notifications, and, in a
  turn, sending updates (``emit``), asking the client (``ask``) and pausing ``--delay`` while reading input.
- ``_sessions.py``: ``initialize``, authentication and the session requests; ``_store.py``: the session store.
- ``_turn.py``: ``session/prompt`` and ``session/cancel``: the turn's steps in order, its history and usage.
- ``_tools.py``: the ``Read`` tool call every ordinary turn makes, its permission request, the files it lists.
- ``_kinds.py``: ``--all-kinds``, one update of each kind.
- the features, one module each, named in ``_words.py``: ``_notice.py``, ``_compaction.py``, ``_question.py``,
  ``_login.py``, ``_subagent.py``, ``_bash.py``, ``_served.py`` (``with-read``, ``with-write``, ``with-terminal``).
- ``_unstable.py``: the provider methods and the extension method; ``_settings.py``: the command line;
  ``_wire.py``: JSON-RPC codes and the builders of messages.

**Adding a feature is adding a file.** Write ``_<name>.py`` with any of these functions of the agent and the turn:
``preface(agent, turn)`` returns updates to send before the plan; ``ask(agent, turn)`` asks the client (with
``agent.ask``) after the thought and returns False once the turn is cancelled; ``work(agent, turn)`` does the work
in place of the ``Read`` tool call and returns its `_tools.Listing`, or None once the turn is cancelled; and
``NEEDS``, the client capability without which the feature is left out of the turn. Lines for the reply go to
``turn.notes``. Then name it in ``_words.FEATURES``: the word ``with-<name>`` in a prompt and ``--with <name>``
turn it on, ``--help`` lists it, and the module is imported only when a turn uses it. Say what it does in the list
above and in ``docs/features.md``, and test it through the wire (``tests/test_demo_features.py``).
"""

from __future__ import annotations

from ._agent import DemoAgent
from ._sessions import API_KEY_ENV
from ._settings import PROG, REQUIRE_AUTH_ENV, DemoSettings, parse_args
from ._store import STATE_DIR_ENV, default_state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "API_KEY_ENV",
    "REQUIRE_AUTH_ENV",
    "STATE_DIR_ENV",
    "DemoAgent",
    "DemoSettings",
    "default_state_dir",
    "main",
]


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Runs the demo agent on stdin/stdout; returns the exit status.

    Args:
        argv: the arguments (default: this process's).
        prog: how the agent was started, as its ``--help`` and usage errors name it.
    """
    options = parse_args(argv, prog)
    try:
        return DemoAgent(options).run()
    except KeyboardInterrupt:
        return 130
