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
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import sys
import time

from tinyacp._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing: 2.6 ms more per start, paid by every test and batch turn (benchmarks/RESULTS.md)
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO

    JsonObject = dict[str, Any]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
AUTH_REQUIRED = -32000
NOT_FOUND = -32002

API_KEY_ENV = "TINYACP_DEMO_API_KEY"
STATE_DIR_ENV = "TINYACP_DEMO_STATE_DIR"
REQUIRE_AUTH_ENV = "TINYACP_DEMO_REQUIRE_AUTH"
_PROG = "python -m tinyacp.demo"  # how --help names the agent unless told how it was started

AUTH_METHODS: list[JsonObject] = [
    {"id": "demo-login", "name": "Demo login", "description": "Always succeeds."},
    {
        "id": "demo-api-key",
        "name": "Demo API key",
        "description": f"Uses ${API_KEY_ENV} from the agent's environment, or a key sent as _meta.api-key.",
    },
]
MODES: list[JsonObject] = [
    {"id": "default", "name": "Default", "description": "Asks before reading files."},
    {"id": "auto", "name": "Auto", "description": "Reads files without asking."},
]
MODELS: list[JsonObject] = [
    {"value": "demo-small", "name": "Demo small"},
    {"value": "demo-large", "name": "Demo large"},
]
# US dollars per token: made-up prices, so that a cost shows and differs by model.
PRICES = {"demo-small": 0.000002, "demo-large": 0.00003}
CONTEXT_SIZE = 200000
PAGE_SIZE = 20

PERMISSION_OPTIONS: list[JsonObject] = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
_OPTION_KINDS = {option["optionId"]: option["kind"] for option in PERMISSION_OPTIONS}

ALL_KINDS_KEYWORD = "all-kinds"
# What a prompt can add to its turn: the word ``with-<name>`` anywhere in the prompt (or ``--with <name>``).
EXTRAS = ("notice", "compaction", "question", "login", "subagent", "bash")

QUESTION = "How should I summarise the files?"
QUESTION_FORM: JsonObject = {
    "type": "object",
    "title": "Summary",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 40},
        "style": {
            "type": "string",
            "title": "Style",
            "oneOf": [{"const": "short", "title": "Short"}, {"const": "long", "title": "Long"}],
            "default": "short",
        },
        "lines": {"type": "integer", "title": "Lines at most", "minimum": 1, "maximum": 100, "default": 10},
        "detail": {"type": "number", "title": "Detail, from 0 to 1", "minimum": 0, "maximum": 1, "default": 0.5},
        "sizes": {"type": "boolean", "title": "Show the sizes", "default": True},
    },
    "required": ["name", "style"],
}
LOGIN_URL = "https://example.com/tinyacp-demo/login"
FALLBACK_TITLE = "Model fallback"
FALLBACK_TEXT = "demo-large is overloaded; this turn uses demo-small."
CHILD_TITLE = "File reader"
PROVIDER_PROTOCOLS = ["openai", "anthropic"]
ECHO_METHOD = "_tinyacp/echo"

# os.read() size: one pipe buffer on Linux, so a burst of lines is picked up in one system call.
_READ_SIZE = 65536


class DemoSettings:
    """Command-line settings."""

    def __init__(
        self,
        *,
        delay: float = 0.0,
        chunks: int = 3,
        all_kinds: bool = False,
        verbose: bool = False,
        state_dir: str | None = None,
        require_auth: bool = False,
        extras: tuple[str, ...] = (),
    ) -> None:
        self.delay = delay
        self.chunks = chunks
        self.all_kinds = all_kinds
        self.verbose = verbose
        self.state_dir = state_dir
        self.require_auth = require_auth
        self.extras = extras


class _Session:
    """A session; its state file keeps every attribute but the system prompt (see `record`)."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        *,
        title: str | None = None,
        updated_at: str = "",
        mode: str = "default",
        model: str = "demo-small",
        used: int = 0,
        cost: float = 0.0,
        history: list[JsonObject] | None = None,
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.title = title
        self.updated_at = updated_at
        self.mode = mode
        self.model = model
        self.used = used
        self.cost = cost
        self.history = [] if history is None else history
        self.system_prompt = system_prompt
        self.system_prompt_mode = system_prompt_mode

    def record(self) -> JsonObject:
        """What the state file keeps, in this order; `_Session(**record)` makes the session again."""
        return {
            "session_id": self.session_id,
            "cwd": self.cwd,
            "title": self.title,
            "updated_at": self.updated_at,
            "mode": self.mode,
            "model": self.model,
            "used": self.used,
            "cost": self.cost,
            "history": self.history,
        }


class _Turn:
    """State of the one prompt turn in progress."""

    def __init__(self, session: _Session, extras: set[str]) -> None:
        self.session = session
        self.extras = extras
        self.cancelled = False
        self.updates_sent = 0
        self.open_tool_call: tuple[str, str] | None = None
        """(session id, tool call id) of the tool call started and not finished: a cancel marks it failed."""
        self.open_child: str | None = None
        """The child session at work: a cancel reports it idle."""
        self.plan_id: str | None = None
        self.reply: list[str] = []
        self.notes: list[str] = []
        """Lines the reply carries between its echo and its body (answers to questions, what was skipped)."""


class _FileRow:
    def __init__(self, name: str, size: int, lines: int) -> None:
        self.name = name
        self.size = size
        self.lines = lines


class _Listing:
    def __init__(self, *, refused: bool = False) -> None:
        self.rows: list[_FileRow] = []
        self.skipped = 0
        self.error: str | None = None
        self.refused = refused


class _RpcError(Exception):
    """Raised by a request handler; becomes a JSON-RPC error response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _EndOfInput(Exception):
    """The client closed our stdin."""


class DemoAgent:
    """The agent: reads messages from ``in_fd``, writes lines to ``out_fd``.

    Everything runs on one thread. Inside a turn the agent keeps reading its input whenever it pauses or waits
    for the permission answer, so a ``session/cancel`` is seen as soon as it arrives.
    """

    def __init__(self, options: DemoSettings, in_fd: int = 0, out_fd: int = 1, log: TextIO = sys.stderr) -> None:
        self._options = options
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._log_file = log
        self._buffer = bytearray()
        self._eof = False
        self._sessions: dict[str, _Session] = {}
        self._turn: _Turn | None = None
        self._deferred: collections.deque[JsonObject] = collections.deque()
        self._next_session = 1
        self._authenticated = False
        self._store = _Store(options.state_dir or default_state_dir())
        self._next_tool_call = 1
        self._next_request_id = 0
        self._counters: dict[str, int] = {}
        # What the client opted in to at `initialize` (see `_client_features`).
        self._features: set[str] = set()
        self._providers: dict[str, JsonObject | None] = {
            "demo": {"apiType": "openai", "baseUrl": "https://example.com/tinyacp-demo/v1"}
        }
        # Extension notifications received, newest last (the echo method reports them); bounded.
        self._extension_notes: collections.deque[str] = collections.deque(maxlen=100)
        # Ids of our requests still waiting for an answer, and the answers that came back.
        self._awaiting: set[int] = set()
        self._answers: dict[int, JsonObject] = {}
        self._requests: dict[str, Callable[[JsonObject], JsonObject]] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "logout": self._logout,
            "session/new": self._new_session,
            "session/load": self._load_session,
            "session/resume": self._resume_session,
            "session/list": self._list_sessions,
            "session/close": self._close_session,
            "session/delete": self._delete_session,
            "session/set_mode": self._set_mode,
            "session/set_config_option": self._set_config_option,
            "session/prompt": self._prompt,
            "session/fork": self._fork_session,
            "session/set_title": self._set_title,
            "providers/list": self._list_providers,
            "providers/set": self._set_provider,
            "providers/disable": self._disable_provider,
            ECHO_METHOD: self._echo,
        }
        self._notifications: dict[str, Callable[[JsonObject], None]] = {
            "session/cancel": self._cancel,
        }

    def run(self) -> int:
        """Serve until stdin closes (or stdout is gone); returns the exit status, 0."""
        try:
            while True:
                if self._deferred:
                    self._handle(self._deferred.popleft())
                    continue
                message = self._read_message(None)
                if message is not None:
                    self._handle(message)
        except (_EndOfInput, BrokenPipeError):
            return 0

    # -- dispatch ------------------------------------------------------------------------------------------

    def _handle(self, message: JsonObject) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" not in message:
                handler = self._notifications.get(method)
                if method.startswith("_"):
                    self._extension_notes.append(method)
                if handler is None:
                    self._debug(f"ignored notification {method}")
                else:
                    handler(_params(message))
                return
            if method == "session/prompt" and self._turn is not None:
                # One turn at a time: answer this prompt once the running one is over.
                self._deferred.append(message)
                return
            self._answer_request(message, method)
        elif "id" in message and ("result" in message or "error" in message):
            self._take_answer(message)
        else:
            self._debug(f"ignored message without a method: {message!r}")

    def _answer_request(self, message: JsonObject, method: str) -> None:
        request_id = message["id"]
        handler = self._requests.get(method)
        try:
            if handler is None:
                raise _RpcError(METHOD_NOT_FOUND, "Method not found")
            result = handler(_params(message))
        except _RpcError as error:
            error_object = {"code": error.code, "message": error.message}
            self._send({"jsonrpc": "2.0", "id": request_id, "error": error_object})
            return
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _take_answer(self, message: JsonObject) -> None:
        answer_id = message["id"]
        # `type(...) is int`: True == 1 in Python, and a JSON `true` id is not one we sent.
        if type(answer_id) is int and answer_id in self._awaiting:
            self._awaiting.discard(answer_id)
            self._answers[answer_id] = message
        else:
            self._debug(f"ignored answer to an id we did not send or no longer wait for: {answer_id!r}")

    # -- requests --------------------------------------------------------------------------------------

    def _initialize(self, params: JsonObject) -> JsonObject:
        version = params.get("protocolVersion")
        if type(version) is not int:
            raise _RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be an integer")
        self._features = _client_features(params.get("clientCapabilities"))
        # We speak version 1 only; the client disconnects if it cannot.
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {
                    "list": {},
                    "resume": {},
                    "close": {},
                    "delete": {},
                    "additionalDirectories": {},
                    "systemPrompt": {"mode": {"override": {}}},
                    "fork": {},
                    "title": {},
                },
                "auth": {"logout": {}},
                "providers": {},
            },
            "authMethods": AUTH_METHODS,
            "agentInfo": {"name": "tinyacp-demo", "title": "tinyacp demo agent", "version": __version__},
        }

    def _authenticate(self, params: JsonObject) -> JsonObject:
        method = params.get("methodId")
        if method == "demo-api-key":
            meta = params.get("_meta")
            sent = meta.get("api-key") if isinstance(meta, dict) else None
            known = os.environ.get(API_KEY_ENV) or None
            if not (sent or known):
                raise _RpcError(AUTH_REQUIRED, f"Authentication required: set {API_KEY_ENV} or send _meta.api-key")
            if sent and known and sent != known:
                raise _RpcError(AUTH_REQUIRED, "Authentication required: the key does not match")
        elif method != "demo-login":
            raise _RpcError(INVALID_PARAMS, "Invalid params: unknown methodId")
        self._authenticated = True
        return {}

    def _logout(self, params: JsonObject) -> JsonObject:
        self._authenticated = False
        return {}

    def _check_auth(self) -> None:
        if self._options.require_auth and not self._authenticated:
            raise _RpcError(AUTH_REQUIRED, "Authentication required")

    def _new_session(self, params: JsonObject) -> JsonObject:
        self._check_auth()
        cwd = _cwd(params)
        if not isinstance(params.get("mcpServers"), list):
            raise _RpcError(INVALID_PARAMS, "Invalid params: mcpServers must be a list")
        number = self._store.claim(self._next_session)
        self._next_session = number + 1
        session = _Session(f"demo-{number}", cwd, updated_at=_now())
        self._open(session, params)
        return {"sessionId": session.session_id, **_setup(session)}

    def _load_session(self, params: JsonObject) -> JsonObject:
        session = self._stored(params)
        self._open(session, params)
        for update in session.history:
            self._send(_notification(session.session_id, update))
        return _setup(session)

    def _resume_session(self, params: JsonObject) -> JsonObject:
        session = self._stored(params)
        self._open(session, params)
        return _setup(session)

    def _stored(self, params: JsonObject) -> _Session:
        """The session a load or resume names, from memory or the state directory; its cwd must match."""
        self._check_auth()
        cwd = _cwd(params)
        session = self._known(params)
        if session.cwd != cwd:
            raise _RpcError(INVALID_PARAMS, "Invalid params: cwd differs from the session's")
        return session

    def _open(self, session: _Session, params: JsonObject, *, inherit: bool = False) -> None:
        """Checks the directories and the system prompt, keeps the session in memory and saves it.

        Without a ``systemPrompt`` a load or resume gets the default instructions, a fork (``inherit``) the source's.
        """
        extra = params.get("additionalDirectories", [])
        if not isinstance(extra, list) or not all(isinstance(p, str) and os.path.isabs(p) for p in extra):
            raise _RpcError(INVALID_PARAMS, "Invalid params: additionalDirectories must be absolute paths")
        system = params.get("systemPrompt")
        if system is not None:
            session.system_prompt_mode, session.system_prompt = _system_prompt(system)
        elif not inherit:
            session.system_prompt = None
        self._sessions[session.session_id] = session
        self._save(session)

    def _fork_session(self, params: JsonObject) -> JsonObject:
        """A new session with the source's history, mode, model and context; the source is left as it was."""
        self._check_auth()
        source = self._known(params)
        cwd = _cwd(params)
        if not isinstance(params.get("mcpServers", []), list):
            raise _RpcError(INVALID_PARAMS, "Invalid params: mcpServers must be a list")
        number = self._store.claim(self._next_session)
        self._next_session = number + 1
        session = _Session(
            f"demo-{number}",
            cwd,
            title=source.title,
            updated_at=_now(),
            mode=source.mode,
            model=source.model,
            used=source.used,
            history=list(source.history),
            system_prompt=source.system_prompt,
            system_prompt_mode=source.system_prompt_mode,
        )
        self._open(session, params, inherit=True)
        return {"sessionId": session.session_id, **_setup(session)}

    def _set_title(self, params: JsonObject) -> JsonObject:
        """``session/set_title`` (unstable): any stored session; reported as ``session_info_update`` to an open one."""
        self._check_auth()
        session = self._known(params)
        title = params.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _RpcError(INVALID_PARAMS, "Invalid params: title must be a non-empty string")
        session.title = title.strip()[:200]
        session.updated_at = _now()
        if session.session_id in self._sessions:
            update = {"sessionUpdate": "session_info_update", "title": session.title, "updatedAt": session.updated_at}
            self._send(_notification(session.session_id, update))
        self._save(session)
        return {"title": session.title}

    def _list_providers(self, params: JsonObject) -> JsonObject:
        providers = [
            {"providerId": name, "supported": PROVIDER_PROTOCOLS, "required": False, "current": current}
            for name, current in self._providers.items()
        ]
        return {"providers": providers}

    def _set_provider(self, params: JsonObject) -> JsonObject:
        """``providers/set`` (unstable): points a provider at a base URL; its headers are taken and never shown."""
        name = self._provider(params)
        api_type, base_url = params.get("apiType"), params.get("baseUrl")
        if api_type not in PROVIDER_PROTOCOLS or not isinstance(base_url, str) or not base_url:
            raise _RpcError(INVALID_PARAMS, "Invalid params: apiType must be openai or anthropic, with a baseUrl")
        self._providers[name] = {"apiType": api_type, "baseUrl": base_url}
        return {}

    def _disable_provider(self, params: JsonObject) -> JsonObject:
        self._providers[self._provider(params)] = None
        return {}

    def _provider(self, params: JsonObject) -> str:
        name = params.get("providerId")
        if not isinstance(name, str) or name not in self._providers:
            raise _RpcError(INVALID_PARAMS, "Invalid params: unknown providerId")
        return name

    def _echo(self, params: JsonObject) -> JsonObject:
        """The extension method: the params back, and the extension notifications received so far."""
        return {"params": params, "notifications": list(self._extension_notes)}

    def _list_sessions(self, params: JsonObject) -> JsonObject:
        self._check_auth()
        cwd = params.get("cwd")
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isdigit():
                raise _RpcError(INVALID_PARAMS, "Invalid params: unknown cursor")
            start = int(cursor)
        sessions = sorted(self._store.all(), key=lambda s: (s.updated_at, s.session_id), reverse=True)
        matching = [s for s in sessions if cwd is None or s.cwd == cwd]
        page = matching[start : start + PAGE_SIZE]
        result: JsonObject = {"sessions": [_info(session) for session in page]}
        if start + PAGE_SIZE < len(matching):
            result["nextCursor"] = str(start + PAGE_SIZE)
        return result

    def _close_session(self, params: JsonObject) -> JsonObject:
        session = self._known(params)
        self._sessions.pop(session.session_id, None)
        return {}

    def _delete_session(self, params: JsonObject) -> JsonObject:
        session = self._known(params)
        self._sessions.pop(session.session_id, None)
        self._store.delete(session.session_id)
        return {}

    def _known(self, params: JsonObject) -> _Session:
        """The session named, from memory or the state directory."""
        session_id = params.get("sessionId")
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None and isinstance(session_id, str):
            session = self._store.load(session_id)
        if session is None:
            raise _RpcError(NOT_FOUND, "Resource not found: unknown session")
        return session

    def _active(self, params: JsonObject) -> _Session:
        """A session opened, loaded or resumed in this process."""
        session_id = params.get("sessionId")
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise _RpcError(NOT_FOUND, "Resource not found: unknown session (load or resume it first)")
        return session

    def _set_mode(self, params: JsonObject) -> JsonObject:
        session = self._active(params)
        self._switch(session, "mode", params.get("modeId"))
        return {}

    def _set_config_option(self, params: JsonObject) -> JsonObject:
        session = self._active(params)
        config_id = params.get("configId")
        if config_id not in ("mode", "model") or params.get("type", "select") != "select":
            raise _RpcError(INVALID_PARAMS, "Invalid params: unknown configId")
        self._switch(session, config_id, params.get("value"), report_options=False)
        return {"configOptions": _config_options(session)}

    def _switch(self, session: _Session, what: str, value: Any, *, report_options: bool = True) -> None:
        """Set the mode or the model, and report it before the answer."""
        allowed = [mode["id"] for mode in MODES] if what == "mode" else [model["value"] for model in MODELS]
        if value not in allowed:
            raise _RpcError(INVALID_PARAMS, f"Invalid params: unknown {what}")
        if what == "mode":
            session.mode = value
            self._send(
                _notification(session.session_id, {"sessionUpdate": "current_mode_update", "currentModeId": value})
            )
        else:
            session.model = value
        if report_options:
            update = {"sessionUpdate": "config_option_update", "configOptions": _config_options(session)}
            self._send(_notification(session.session_id, update))
        self._save(session)

    def _save(self, session: _Session) -> None:
        try:
            self._store.save(session)
        except OSError as error:  # a read-only home must not stop the demo: the session just won't outlive us
            self._debug(f"could not save {session.session_id}: {error}")

    def _prompt(self, params: JsonObject) -> JsonObject:
        self._check_auth()
        session = self._active(params)
        blocks = params.get("prompt")
        if not isinstance(blocks, list):
            raise _RpcError(INVALID_PARAMS, "Invalid params: prompt must be a list of content blocks")
        text = "".join(
            block["text"]
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
        extras = {name for name in EXTRAS if f"with-{name}" in text}.union(self._options.extras)
        self._turn = _Turn(session, extras)
        try:
            if self._options.all_kinds or ALL_KINDS_KEYWORD in text:
                return {"stopReason": self._all_kinds_turn(self._turn, text)}  # its own usage_update, no account
            stop_reason = self._read_files_turn(self._turn, text)
            if stop_reason != "end_turn":
                return {"stopReason": stop_reason}
            return {"stopReason": stop_reason, "usage": self._account(self._turn, text)}
        finally:
            self._turn = None

    def _account(self, turn: _Turn, text: str) -> JsonObject:
        """Keep the turn in the session's history and report what it used (before the answer)."""
        session = turn.session
        reply = "".join(turn.reply)
        session.history += [_chunk("user_message_chunk", text), _chunk("agent_message_chunk", reply)]
        session.title = session.title or (text[:40] or None)
        session.updated_at = _now()
        tokens_in, tokens_out = len(text) // 4 + 1, len(reply) // 4 + 1
        session.used = min(CONTEXT_SIZE, session.used + tokens_in + tokens_out)
        session.cost += (tokens_in + tokens_out) * PRICES[session.model]
        self._update(
            turn,
            {
                "sessionUpdate": "usage_update",
                "used": session.used,
                "size": CONTEXT_SIZE,
                "cost": {"amount": round(session.cost, 6), "currency": "USD"},
            },
        )
        self._save(session)
        return {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out}

    # -- notifications ---------------------------------------------------------------------------------

    def _cancel(self, params: JsonObject) -> None:
        turn = self._turn
        if turn is not None and params.get("sessionId") == turn.session.session_id:
            turn.cancelled = True
        else:
            self._debug("ignored session/cancel: no turn running for that session")

    # -- the turns -------------------------------------------------------------------------------------

    def _read_files_turn(self, turn: _Turn, text: str) -> str:
        """The prompt's extras, plan, think, read the cwd (or have a child read it), reply. Returns the stop reason."""
        cwd = turn.session.cwd
        opening = [
            *self._preface(turn),
            self._plan(turn, "pending", "pending"),
            _chunk("agent_thought_chunk", f"I will list the files in {cwd}."),
        ]
        if not (self._emit_all(turn, opening) and self._question(turn) and self._login(turn)):
            return self._end_cancelled(turn)
        if "subagent" in turn.extras and "subagents" in self._features:
            listing = self._delegate(turn)
        else:
            listing = self._use_tool(turn, turn.session.session_id, "Bash" if "bash" in turn.extras else "Read")
        if listing is None:
            return self._end_cancelled(turn)
        if listing.refused:
            rest = self._reply(turn, text, f"I was not allowed to read the files in {cwd}.\n")
        else:
            rest = [
                self._plan(turn, "completed", "in_progress"),
                *self._reply(turn, text, _summary(cwd, listing)),
                self._plan(turn, "completed", "completed"),
            ]
        if turn.plan_id is not None:  # a finished turn takes its plan away
            rest.append({"sessionUpdate": "plan_removed", "planId": turn.plan_id})
        return "end_turn" if self._emit_all(turn, rest) else self._end_cancelled(turn)

    def _all_kinds_turn(self, turn: _Turn, text: str) -> str:
        """One update of each of the eleven v1 kinds, in schema order. Returns the stop reason."""
        updates = _all_kinds_updates(turn.session.cwd, self._new_tool_call_id(), text)
        return "end_turn" if self._emit_all(turn, updates) else self._end_cancelled(turn)

    def _preface(self, turn: _Turn) -> list[JsonObject]:
        """The notice and the compaction the prompt asked for, each in the shape the client opted in to."""
        updates: list[JsonObject] = []
        if "notice" in turn.extras:
            if "notices" in self._features:
                notice = {"severity": "warning", "title": FALLBACK_TITLE, "description": FALLBACK_TEXT}
                updates.append({"sessionUpdate": "notice", **notice})
            else:  # as Claude's adapter does: the warning becomes part of the reply
                updates.append(_chunk("agent_message_chunk", f"**{FALLBACK_TITLE}:** {FALLBACK_TEXT}\n\n"))
        if "compaction" in turn.extras:
            updates += self._compaction(turn.session)
        return updates

    def _compaction(self, session: _Session) -> list[JsonObject]:
        """The context is summed up and its usage drops; without the opt-in, an ordinary tool call says so."""
        prompts = [update["content"]["text"] for update in session.history[::2]]
        summary = f"{_count(len(prompts), 'earlier turn')} in {session.cwd}."
        if prompts:
            summary += f" The last prompt was: {prompts[-1][:80]}"
        session.used = len(summary) // 4 + 1
        if "compaction" not in self._features:
            tool_call_id = self._new_tool_call_id()
            done = _tool_status(tool_call_id, "completed")
            done["content"] = [{"type": "content", "content": {"type": "text", "text": summary}}]
            call = {"toolCallId": tool_call_id, "title": "Compact the conversation", "name": "Compact"}
            return [{"sessionUpdate": "tool_call", **call, "kind": "other", "status": "in_progress"}, done]
        compaction_id = f"compaction-{self._count('compaction')}"
        half = len(summary) // 2
        return [
            {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "in_progress"},
            *(
                {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id, "content": _text(piece)}
                for piece in (summary[:half], summary[half:])
            ),
            {
                "sessionUpdate": "compaction_update",
                "compactionId": compaction_id,
                "status": "completed",
                "summary": [_text(summary)],
            },
        ]

    def _question(self, turn: _Turn) -> bool:
        """``with-question``: a form elicitation, if the client takes forms. False if the turn got cancelled."""
        if "question" not in turn.extras:
            return True
        if "elicitation.form" not in self._features:
            turn.notes.append("I would ask how to summarise the files, but this client takes no forms.\n")
            return True
        params = {
            "sessionId": turn.session.session_id,
            "mode": "form",
            "message": QUESTION,
            "requestedSchema": QUESTION_FORM,
        }
        answer = self._ask(turn, "elicitation/create", params)
        if answer is None:
            return False
        turn.notes.append(_answer_note(answer))
        return True

    def _login(self, turn: _Turn) -> bool:
        """``with-login``: a URL elicitation, if the client takes URLs. False if the turn got cancelled."""
        if "login" not in turn.extras:
            return True
        url = f"{LOGIN_URL}?session={turn.session.session_id}"
        if "elicitation.url" not in self._features:
            turn.notes.append(f"Sign in at {url} (this client opens no links).\n")
            return True
        elicitation_id = f"login-{self._count('login')}"
        params = {
            "sessionId": turn.session.session_id,
            "mode": "url",
            "message": "Sign in to the demo service.",
            "elicitationId": elicitation_id,
            "url": url,
        }
        answer = self._ask(turn, "elicitation/create", params)
        if answer is None:
            return False
        if _action(answer) == "accept":
            self._send(
                {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": elicitation_id}}
            )
            turn.notes.append("You signed in.\n")
        else:
            turn.notes.append("You did not sign in.\n")
        return True

    def _delegate(self, turn: _Turn) -> _Listing | None:
        """``with-subagent``: a child session reads the files, asking its own permission, and reports back.

        Returns the child's listing (refused if it was not allowed), or None if the turn got cancelled.
        """
        parent, cwd = turn.session.session_id, turn.session.cwd
        child = f"{parent}.sub-{self._count('child')}"
        task, report = f"msg-{self._count('message')}", f"msg-{self._count('message')}"
        announce = {
            "sessionUpdate": "subagent_update",
            "sessionId": child,
            "title": CHILD_TITLE,
            "description": f"Lists the files in {cwd}",
            "state": {"state": "running"},
        }
        ask = {
            "sessionUpdate": "session_message",
            "messageId": task,
            "senderSessionId": parent,
            "recipientSessionId": child,
            "content": [_text(f"List the files in {cwd}.")],
        }
        if not self._emit_all(turn, [announce, ask]):
            return None
        if not self._emit(turn, _chunk("agent_thought_chunk", f"I will list the files in {cwd}."), child):
            return None
        listing = self._use_tool(turn, child, "Read")
        if listing is None:
            return None
        answer = f"I was not allowed to read the files in {cwd}.\n" if listing.refused else _summary(cwd, listing)
        if not self._emit(turn, _chunk("agent_message_chunk", answer), child):
            return None
        back: list[JsonObject] = [
            {
                "sessionUpdate": "session_message",
                "messageId": report,
                "senderSessionId": child,
                "recipientSessionId": parent,
            },
            {"sessionUpdate": "session_message_chunk", "messageId": report, "content": _text(answer)},
            _child_state(child, "end_turn"),
        ]
        turn.notes.append(f'My helper "{CHILD_TITLE}" did the reading.\n')
        return listing if self._emit_all(turn, back) else None

    def _use_tool(self, turn: _Turn, session_id: str, name: str) -> _Listing | None:
        """A ``Read`` or ``Bash`` tool call on the cwd, in ``session_id``: announced, asked for (but a read in mode
        ``auto``), run. Bash runs nothing: the agent lists the files itself, as Read does.

        Returns the listing (refused if rejected), or None if the turn got cancelled.
        """
        cwd = turn.session.cwd
        tool_call_id = self._new_tool_call_id()
        if name == "Bash":
            call = {"toolCallId": tool_call_id, "title": f"ls -l {cwd}", "name": name, "kind": "execute"}
        else:
            call = {"toolCallId": tool_call_id, "title": f"Read files in {cwd}", "name": name, "kind": "read"}
        announce = {"sessionUpdate": "tool_call", **call, "status": "pending", "locations": [{"path": cwd}]}
        if not self._emit(turn, announce, session_id):
            return None
        asks = name != "Read" or turn.session.mode != "auto"
        decision = self._ask_permission(turn, session_id, {**call, "status": "pending"}) if asks else "allow"
        if decision is None:
            return None
        if decision == "reject":
            return (
                _Listing(refused=True) if self._emit(turn, _tool_status(tool_call_id, "failed"), session_id) else None
            )
        if not self._emit(turn, _tool_status(tool_call_id, "in_progress"), session_id):
            return None
        listing = _list_files(cwd)
        result = _tool_status(tool_call_id, "failed" if listing.error else "completed")
        result["content"] = [{"type": "content", "content": _text(_table(listing))}]
        return listing if self._emit(turn, result, session_id) else None

    def _ask_permission(self, turn: _Turn, session_id: str, tool_call: JsonObject) -> str | None:
        """Asks ``session/request_permission`` for ``tool_call`` in ``session_id`` (the turn's, or a child's).

        Returns:
            "allow" or "reject", or None when the turn was cancelled (by session/cancel or the outcome).
        """
        params = {"sessionId": session_id, "toolCall": tool_call, "options": PERMISSION_OPTIONS}
        answer = self._ask(turn, "session/request_permission", params)
        return None if answer is None else _permission_decision(answer)

    def _ask(self, turn: _Turn, method: str, params: JsonObject) -> JsonObject | None:
        """Sends a request to the client and waits for the answer, handling input meanwhile.

        Returns:
            The answer (a result or an error), or None when the turn was cancelled first.
        """
        if self._paused_and_cancelled(turn):
            return None
        request_id = self._next_request_id
        self._next_request_id += 1
        self._awaiting.add(request_id)
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while request_id not in self._answers:
            if turn.cancelled:
                # Do not wait for the client's answer: the turn is over; a late answer is ignored.
                self._awaiting.discard(request_id)
                return None
            message = self._read_message(None)
            if message is not None:
                self._handle(message)
        return self._answers.pop(request_id)

    def _plan(self, turn: _Turn, read_status: str, summarise_status: str) -> JsonObject:
        """The turn's plan: a ``plan_update`` of items under one id if the client opted in, else the legacy ``plan``."""
        entries = [
            {"content": "Read the files in the working directory", "priority": "high", "status": read_status},
            {"content": "Summarise them", "priority": "medium", "status": summarise_status},
        ]
        if "plan" not in self._features:
            return {"sessionUpdate": "plan", "entries": entries}
        if turn.plan_id is None:
            turn.plan_id = f"plan-{self._count('plan')}"
        return {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": turn.plan_id, "entries": entries}}

    def _reply(self, turn: _Turn, prompt_text: str, body: str) -> list[JsonObject]:
        """The reply as ``--chunks`` agent_message_chunk updates, the first one echoing the prompt."""
        echo = f"You said: {prompt_text}\n"
        session = turn.session
        if session.system_prompt:
            how = " (override)" if session.system_prompt_mode == "override" else ""
            echo = f"System prompt{how}: {session.system_prompt}\n" + echo
        pieces = _split_reply(echo + "".join(turn.notes), body, self._options.chunks)
        return [_chunk("agent_message_chunk", piece) for piece in pieces]

    def _new_tool_call_id(self) -> str:
        tool_call_id = f"call_{self._next_tool_call}"
        self._next_tool_call += 1
        return tool_call_id

    def _count(self, what: str) -> int:
        """The next number of a kind of thing the agent names (plans, compactions, children, messages)."""
        self._counters[what] = number = self._counters.get(what, 0) + 1
        return number

    def _end_cancelled(self, turn: _Turn) -> str:
        """Marks the unfinished tool call failed and the working child idle; returns the "cancelled" stop reason."""
        if turn.open_tool_call is not None:
            session_id, tool_call_id = turn.open_tool_call
            self._update(turn, _tool_status(tool_call_id, "failed"), session_id)
        if turn.open_child is not None:
            self._update(turn, _child_state(turn.open_child, "cancelled"))
        return "cancelled"

    def _emit_all(self, turn: _Turn, updates: list[JsonObject]) -> bool:
        """Emits the updates one by one; False, with the rest left unsent, once the turn is cancelled."""
        return all(self._emit(turn, update) for update in updates)

    def _emit(self, turn: _Turn, update: JsonObject, session_id: str | None = None) -> bool:
        """Pauses (see `_paused_and_cancelled`), then sends the update; False if the turn got cancelled."""
        if self._paused_and_cancelled(turn):
            return False
        self._update(turn, update, session_id)
        return True

    def _paused_and_cancelled(self, turn: _Turn) -> bool:
        """Waits ``--delay`` seconds handling input (polls it if 0); True if the turn is cancelled.

        The first update of a turn goes out at once: the delay is *between* updates.
        """
        if not turn.cancelled:
            delay = self._options.delay if turn.updates_sent else 0.0
            deadline = time.monotonic() + delay
            while not turn.cancelled:
                message = self._read_message(deadline)
                if message is None:
                    break
                self._handle(message)
        return turn.cancelled

    def _update(self, turn: _Turn, update: JsonObject, session_id: str | None = None) -> None:
        """Sends one update for the turn's session, or for ``session_id`` (a child's), and keeps track of it."""
        session_id = session_id or turn.session.session_id
        kind = update["sessionUpdate"]
        if kind == "tool_call":
            turn.open_tool_call = (session_id, update["toolCallId"])
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            turn.open_tool_call = None
        elif kind == "agent_message_chunk" and session_id == turn.session.session_id:
            turn.reply.append(update["content"]["text"])
        elif kind == "subagent_update":
            turn.open_child = update["sessionId"] if update["state"]["state"] == "running" else None
        turn.updates_sent += 1
        self._send(_notification(session_id, update))

    # -- I/O -------------------------------------------------------------------------------------------

    def _read_message(self, deadline: float | None) -> JsonObject | None:
        """Next JSON object from stdin; None once ``deadline`` passes (None = wait for ever).

        Raises:
            _EndOfInput: waiting with no deadline, and stdin is closed with every line handled.
        """
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0 or (self._eof and self._buffer):
                end = newline if newline >= 0 else len(self._buffer)
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                message = self._parse(line)
                if message is not None:
                    return message
                continue
            if self._eof:
                if deadline is None:
                    raise _EndOfInput
                # Nothing more can arrive, but a turn that needs no answer still runs to its end.
                time.sleep(max(0.0, deadline - time.monotonic()))
                return None
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._in_fd], [], [], timeout)
            if not readable:
                return None
            data = os.read(self._in_fd, _READ_SIZE)
            if data:
                self._buffer += data
            else:
                self._eof = True

    def _parse(self, line: bytes) -> JsonObject | None:
        if not line.strip():
            return None
        self._debug(f"<- {line.decode('utf-8', 'replace')}")
        try:
            message = json.loads(line)
        except ValueError:
            self._debug("ignored a line that is not JSON")
            return None
        if not isinstance(message, dict):
            self._debug("ignored a JSON value that is not an object")
            return None
        return message

    def _send(self, message: JsonObject) -> None:
        # "replace": a lone surrogate (legal in JSON text, not in UTF-8) must not crash the agent.
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        self._debug(f"-> {text}")
        data = (text + "\n").encode("utf-8", "replace")
        while data:
            written = os.write(self._out_fd, data)
            data = data[written:]

    def _debug(self, text: str) -> None:
        if self._options.verbose:
            print(f"tinyacp-demo: {text}", file=self._log_file, flush=True)


# -- pure helpers ---------------------------------------------------------------------------------------


def default_state_dir() -> str:
    """Where sessions are kept without ``--state-dir``: ``$TINYACP_DEMO_STATE_DIR``, else the XDG state home."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return configured
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "tinyacp-demo")


class _Store:
    """Sessions as ``<id>.json`` files in one directory (created 0700 on the first save).

    A session's first record is written into the file that claimed its number, and the ``next-number`` hint is
    overwritten in place: only a session's later saves replace its file. Each file made and replaced costs the
    filesystem an inode, and on ext4 without a journal every file made later in the directory's group skips, one
    by one, the inodes freed in the last minutes: a batch runs many agents, and the client makes a journal file
    per turn.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._claimed: set[str] = set()
        """Paths this store claimed and has not written yet: their first save writes into them."""

    def _path(self, session_id: str) -> str | None:
        if _session_number(session_id) is None:
            return None
        return os.path.join(self.directory, session_id + ".json")

    def save(self, session: _Session) -> None:
        path = self._path(session.session_id)
        assert path is not None, "the demo names its own sessions"
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        text = json.dumps(session.record())
        if path not in self._claimed:
            _replace(path, text)
            return
        self._claimed.discard(path)
        # Claimed by us and empty: a reader meanwhile finds no session, as it would find an empty file.
        with open(path, "r+", encoding="utf-8") as file:
            file.write(text)

    def load(self, session_id: str) -> _Session | None:
        path = self._path(session_id)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as file:
                record = json.load(file)
            return _Session(**record)
        except (OSError, ValueError, TypeError):
            return None

    def delete(self, session_id: str) -> None:
        path = self._path(session_id)
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def all(self) -> list[_Session]:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        found = (self.load(name[:-5]) for name in names if name.endswith(".json"))
        return [session for session in found if session is not None]

    def claim(self, at_least: int) -> int:
        """A session number N >= ``at_least`` that no other session in the directory has, held by creating
        ``demo-N.json`` exclusively: agents that share the directory (a batch runs many at once) never get the same
        one. The search starts from the number the directory's ``next-number`` file suggests, so a new session
        costs a few system calls however many are stored; the file names are read only when that file is missing
        or damaged. A directory that cannot be written to gives ``at_least``: the session just won't be saved."""
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            number = max(at_least, self._suggested())
            while True:
                try:
                    os.close(os.open(self._path_of(number), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                    break
                except FileExistsError:
                    number += 1
        except OSError:
            return at_least
        self._claimed.add(self._path_of(number))
        with contextlib.suppress(OSError):  # a stale suggestion (an older one, another agent's) costs a few tries
            self._suggest(number + 1)
        return number

    def _suggest(self, number: int) -> None:
        """Overwrite the hint in place, at a fixed width: a reader that meets a write halfway gets a wrong number
        or none, which costs a few more tries or one listing, never a shared one (the claim decides)."""
        fd = os.open(self._hint, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.pwrite(fd, b"%-15d\n" % number, 0)
        finally:
            os.close(fd)

    @property
    def _hint(self) -> str:
        return os.path.join(self.directory, "next-number")

    def _suggested(self) -> int:
        try:
            with open(self._hint, "rb") as file:
                return int(file.read(16))
        except (OSError, ValueError):
            return self.next_number()

    def _path_of(self, number: int) -> str:
        return os.path.join(self.directory, f"demo-{number}.json")

    def next_number(self) -> int:
        """One more than the highest N of the stored sessions, read from the file names (``demo-N.json``): reading
        every file would make each new session cost more than the one before."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return 1
        numbers = [_session_number(name[:-5]) for name in names if name.endswith(".json")]
        return max((number for number in numbers if number is not None), default=0) + 1


def _replace(path: str, text: str) -> None:
    """Write ``path`` whole or not at all: a reader (another agent) never sees it half written."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


def _session_number(session_id: str) -> int | None:
    """N of a session id the demo makes, ``demo-N`` with 1 to 9 digits (0-9); None for any other id."""
    digits = session_id.removeprefix("demo-")
    if digits != session_id and 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


def _now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def _cwd(params: JsonObject) -> str:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise _RpcError(INVALID_PARAMS, "Invalid params: cwd must be an absolute path")
    return cwd


def _system_prompt(value: Any) -> tuple[str, str]:
    """(mode, text) of a ``systemPrompt``: ``append`` or ``override`` (both advertised), with its text blocks."""
    blocks = value.get("content") if isinstance(value, dict) else None
    mode = value.get("mode") if isinstance(value, dict) else None
    if not isinstance(blocks, list) or mode not in ("append", "override"):
        raise _RpcError(INVALID_PARAMS, "Invalid params: systemPrompt must be an append or override of content blocks")
    return mode, "".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


def _client_features(capabilities: Any) -> set[str]:
    """What ``initialize``'s ``clientCapabilities`` opt in to, read as the adapters read it: an object (``{}``
    included) opts in; absent, null or anything else does not. Names: ``notices``, ``compaction``, ``plan``,
    ``subagents``, ``elicitation.form``, ``elicitation.url``."""
    if not isinstance(capabilities, dict):
        return set()
    session, elicitation = capabilities.get("session"), capabilities.get("elicitation")
    found = {name for name in ("plan", "subagents") if isinstance(capabilities.get(name), dict)}
    if isinstance(session, dict):
        found.update(name for name in ("notices", "compaction") if isinstance(session.get(name), dict))
    if isinstance(elicitation, dict):
        found.update(f"elicitation.{mode}" for mode in ("form", "url") if isinstance(elicitation.get(mode), dict))
    return found


def _action(answer: JsonObject) -> str | None:
    """The ``action`` of an elicitation answer; None for an error answer or a malformed one."""
    result = answer.get("result")
    action = result.get("action") if isinstance(result, dict) else None
    return action if isinstance(action, str) else None


def _answer_note(answer: JsonObject) -> str:
    """What the reply says of the answer to the form."""
    action = _action(answer)
    if action == "accept":
        content = answer["result"].get("content")
        problem = _form_problem(content)
        if problem is not None:
            return f"Your answer does not fit the form ({problem}): I use the defaults.\n"
        assert isinstance(content, dict)
        given = [f"{name}={json.dumps(content[name])}" for name in QUESTION_FORM["properties"] if name in content]
        return f"You answered: {', '.join(given)}.\n"
    if action in ("decline", "cancel"):
        return f"You {'declined' if action == 'decline' else 'dismissed'} the question: I use the defaults.\n"
    return "The question got no answer: I use the defaults.\n"


def _form_problem(content: Any) -> str | None:
    """Why ``content`` does not fit `QUESTION_FORM`, or None if it does."""
    if not isinstance(content, dict):
        return "no content"
    properties: JsonObject = QUESTION_FORM["properties"]
    missing = [name for name in QUESTION_FORM["required"] if name not in content]
    if missing:
        return f"{missing[0]} is missing"
    for name, value in content.items():
        spec = properties.get(name)
        if spec is None:
            return f"{name} was not asked"
        kind = spec["type"]
        if kind == "string":
            choices = [option["const"] for option in spec.get("oneOf", ())]
            fits = isinstance(value, str) and (value in choices if choices else 1 <= len(value) <= spec["maxLength"])
        elif kind == "boolean":
            fits = type(value) is bool
        else:  # `type(...)`: a JSON true is no number, though Python's True == 1
            fits = type(value) is int or (kind == "number" and type(value) is float)
            fits = fits and spec["minimum"] <= value <= spec["maximum"]
        if not fits:
            return f"{name} is not a valid {kind}"
    return None


def _child_state(child: str, stop_reason: str) -> JsonObject:
    """A child session's work is over: it is idle, with the stop reason of its work."""
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "state": {"state": "idle", "stopReason": stop_reason},
    }


def _text(text: str) -> JsonObject:
    return {"type": "text", "text": text}


def _config_options(session: _Session) -> list[JsonObject]:
    mode_values = [{"value": mode["id"], "name": mode["name"]} for mode in MODES]
    return [
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": session.mode,
            "options": mode_values,
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": session.model,
            "options": MODELS,
        },
    ]


def _setup(session: _Session) -> JsonObject:
    """The modes and config options of a session answer."""
    return {
        "modes": {"currentModeId": session.mode, "availableModes": MODES},
        "configOptions": _config_options(session),
    }


def _info(session: _Session) -> JsonObject:
    return {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "title": session.title,
        "updatedAt": session.updated_at,
    }


def _notification(session_id: str, update: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def _params(message: JsonObject) -> JsonObject:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def _permission_decision(answer: JsonObject) -> str | None:
    """Maps a permission answer to "allow", "reject" or None (cancelled)."""
    result = answer.get("result")
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict):
        return "reject"  # an error answer or a malformed one: the tool must not run
    if outcome.get("outcome") == "cancelled":
        return None
    kind = _OPTION_KINDS.get(outcome.get("optionId"))
    return "allow" if kind is not None and kind.startswith("allow") else "reject"


def _tool_status(tool_call_id: str, status: str) -> JsonObject:
    return {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": status}


def _chunk(kind: str, text: str) -> JsonObject:
    return {"sessionUpdate": kind, "content": _text(text)}


def _list_files(cwd: str) -> _Listing:
    """Regular files directly in ``cwd``, sorted by name, with size and line count; skips unreadable ones."""
    listing = _Listing()
    try:
        with os.scandir(cwd) as entries:
            names = sorted(entry.name for entry in entries if _is_regular_file(entry))
    except OSError as error:
        listing.error = f"cannot list {cwd}: {error.strerror}"
        return listing
    for name in names:
        try:
            size, lines = _measure(os.path.join(cwd, name))
        except OSError:
            listing.skipped += 1
            continue
        listing.rows.append(_FileRow(_printable(name), size, lines))
    return listing


def _is_regular_file(entry: os.DirEntry[str]) -> bool:
    """True for a regular file, or a symlink to one; False for anything we cannot even stat."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _measure(path: str) -> tuple[int, int]:
    """Size in bytes and line count: newlines, plus one for a last line without a newline."""
    size = newlines = 0
    last = b"\n"
    with open(path, "rb") as file:
        while block := file.read(_READ_SIZE):
            size += len(block)
            newlines += block.count(b"\n")
            last = block[-1:]
    return size, newlines + (last != b"\n")


def _printable(name: str) -> str:
    """A file name fit for one line of text: undecodable bytes and control characters become U+FFFD."""
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(char if char.isprintable() else "\ufffd" for char in name)


def _table(listing: _Listing) -> str:
    if listing.error is not None:
        return listing.error
    lines = ["bytes\tlines\tname"]
    lines += [f"{row.size}\t{row.lines}\t{row.name}" for row in listing.rows]
    return "\n".join(lines)


def _summary(cwd: str, listing: _Listing) -> str:
    if listing.error is not None:
        return f"I could not read the files: {listing.error}.\n"
    text = f"I read {_count(len(listing.rows), 'file')} in {cwd}:\n"
    text += "".join(f"- {row.name}: {_count(row.size, 'byte')}, {_count(row.lines, 'line')}\n" for row in listing.rows)
    if listing.skipped:
        text += f"I could not read {listing.skipped} more.\n"
    return text


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _split_reply(echo: str, body: str, chunks: int) -> list[str]:
    """``chunks`` pieces: the echo first, then ``body`` cut evenly (never an empty piece)."""
    if chunks <= 1:
        return [echo + body]
    count = min(chunks - 1, len(body))
    return [echo] + [body[len(body) * i // count : len(body) * (i + 1) // count] for i in range(count)]


def _all_kinds_updates(cwd: str, tool_call_id: str, text: str) -> list[JsonObject]:
    """One update of each v1 ``sessionUpdate`` kind, in the order the schema lists them."""
    return [
        _chunk("user_message_chunk", text),
        _chunk("agent_message_chunk", f"You said: {text}\nHere is one session update of every kind."),
        _chunk("agent_thought_chunk", "Showing all eleven kinds."),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": f"Read files in {cwd}",
            "kind": "read",
            "status": "pending",
            "locations": [{"path": cwd}],
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "done"}}],
        },
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "Show every session update kind", "priority": "high", "status": "in_progress"}],
        },
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": ALL_KINDS_KEYWORD, "description": "Show one session update of every kind"},
            ],
        },
        {"sessionUpdate": "current_mode_update", "currentModeId": "default"},
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "id": "mode",
                    "name": "Mode",
                    "category": "mode",
                    "type": "select",
                    "currentValue": "default",
                    "options": [{"value": "default", "name": "Default"}],
                }
            ],
        },
        {"sessionUpdate": "session_info_update", "title": "tinyacp demo"},
        {
            "sessionUpdate": "usage_update",
            "used": len(text),
            "size": 200000,
            "cost": {"amount": 0, "currency": "USD"},
        },
    ]


def _extras(value: str) -> tuple[str, ...]:
    """The names of ``--with NAME[,NAME...]``.

    Raises:
        ValueError: a name is not one of `EXTRAS`.
    """
    names = tuple(name.strip() for name in value.split(","))
    unknown = [name for name in names if name not in EXTRAS]
    if unknown:
        raise ValueError(f"unknown {unknown[0]!r}: choose among {', '.join(EXTRAS)}")
    return names


# What `_plain_settings` knows of each option: its DemoSettings attribute, and how its value is read (None: a flag).
_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    "--delay": ("delay", float),
    "--chunks": ("chunks", int),
    "--state-dir": ("state_dir", str),
    "--all-kinds": ("all_kinds", None),
    "--verbose": ("verbose", None),
    "--require-auth": ("require_auth", None),
    "--with": ("extras", _extras),
}


def _parse_args(argv: Sequence[str] | None, prog: str = _PROG) -> DemoSettings:
    args = sys.argv[1:] if argv is None else argv
    settings = _plain_settings(args)
    if settings is None:
        settings = _argparse_settings(args, prog)
    settings.require_auth = settings.require_auth or os.environ.get(REQUIRE_AUTH_ENV) == "1"
    return settings


def _plain_settings(args: Sequence[str]) -> DemoSettings | None:
    """The settings of a plain, valid command line, read without argparse: with what it imports (gettext, locale,
    shutil), argparse would cost a quarter of the agent's start.

    Plain: whole option names, values given as ``--name VALUE`` or ``--name=VALUE``, none starting with ``-``.
    Returns None for anything else (``--help``, an abbreviation, a mistake): argparse reads those, as it always did.
    """
    settings = DemoSettings()
    words = iter(args)
    for word in words:
        name, equals, value = word.partition("=")
        if name not in _OPTIONS:
            return None
        attribute, read = _OPTIONS[name]
        if read is None:
            if equals:
                return None
            setattr(settings, attribute, True)
            continue
        if not equals:
            value = next(words, "-")
        if value.startswith("-"):
            return None
        try:
            setattr(settings, attribute, read(value))
        except ValueError:
            return None
    return settings if settings.delay >= 0 and settings.chunks >= 1 else None


def _argparse_settings(args: Sequence[str], prog: str = _PROG) -> DemoSettings:
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog,
        description="A deterministic ACP v1 agent on stdio, with no model: it lists the session's files.",
    )
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="pause between updates")
    parser.add_argument("--chunks", type=int, default=3, metavar="N", help="message chunks per reply")
    parser.add_argument("--all-kinds", action="store_true", help="answer with all 11 update kinds")
    parser.add_argument("--verbose", action="store_true", help="log the traffic to stderr")
    parser.add_argument(
        "--state-dir", metavar="DIR", help=f"where sessions are kept (default: ${STATE_DIR_ENV}, else XDG)"
    )
    parser.add_argument(
        "--require-auth", action="store_true", help=f"answer -32000 until authenticate (also ${REQUIRE_AUTH_ENV}=1)"
    )

    def extras(value: str) -> tuple[str, ...]:
        try:
            return _extras(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parser.add_argument(
        "--with",
        dest="extras",
        type=extras,
        default=(),
        metavar="NAME[,NAME...]",
        help=f"add to every turn what the prompt word with-NAME adds: {', '.join(EXTRAS)}",
    )
    parsed = parser.parse_args(args)
    if parsed.delay < 0:
        parser.error("--delay must be >= 0")
    if parsed.chunks < 1:
        parser.error("--chunks must be >= 1")
    return DemoSettings(
        delay=parsed.delay,
        chunks=parsed.chunks,
        all_kinds=parsed.all_kinds,
        verbose=parsed.verbose,
        state_dir=parsed.state_dir,
        require_auth=parsed.require_auth,
        extras=parsed.extras,
    )


def main(argv: Sequence[str] | None = None, *, prog: str = _PROG) -> int:
    """Runs the demo agent on stdin/stdout; returns the exit status.

    Args:
        argv: the arguments (default: this process's).
        prog: how the agent was started, as its ``--help`` and usage errors name it.
    """
    options = _parse_args(argv, prog)
    try:
        return DemoAgent(options).run()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
