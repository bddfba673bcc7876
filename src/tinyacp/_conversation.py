"""The conversation core: the protocol's state machine, with no I/O.

It owns the JSON-RPC ids, the request in flight, the turn's reply within the transfer limits and the sessions'
state; it decodes the agent's plain updates (the hot path), decides what to record, answer and write for every
other line, has permission requests decided and knows when to send the one ``session/cancel``. The pure parts
are elsewhere: what each request carries is shaped by :mod:`tinyacp._requests`, what its answer decodes to by
:mod:`tinyacp._answers`; what a line other than a plain update is, is classified by :mod:`tinyacp._inbound`,
and a line the strict decoders refuse is read by :mod:`tinyacp._tolerant_json`. The call driver
(:mod:`tinyacp._driver`) runs the core for both shells: it moves the bytes and calls the observer in the order
the core says.

Our requests come out as a typed :class:`Call` (``Call[Session]`` for ``session/new``), so a shell's call
returns what the request's answer decodes to. ``receive(line)`` returns either an :class:`~tinyacp.Update` (the
hot path: the driver records it with ``on_update`` and then calls :meth:`Conversation.update_recorded`) or a
:data:`Reaction` generator for everything else. A reaction yields :class:`Record` (call this observer method
with this value, send me its result) and :class:`Write` (record this line with ``on_send``, then write it), in
exactly the order they must happen, and returns a :class:`Done` when the call in flight has its answer. So the
order "record, then act" lives here once.

The hottest path takes many lines at once: :meth:`Conversation.receive_updates` decodes the run of plain updates
at the front of a batch of lines, with the limits checked once for the run, and
:meth:`Conversation.updates_recorded` collects the run once the observer recorded all of it. It gives exactly
what the same lines give one at a time through :meth:`Conversation.receive`.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Final, Generic, TypeVar

import msgspec

from . import _answers as answers
from . import _inbound as inbound
from . import _requests as requests
from . import _serve as serving
from ._elicitation import ElicitationReply, elicitation_request
from ._errors import (
    MissingDurableObserver,
    NotAdvertised,
    ObserverError,
    ProtocolViolation,
    TransferLimitExceeded,
    UsageError,
)
from ._features import ClientFeatures
from ._inbound import UNREADABLE as _UNREADABLE
from ._inbound import Kind
from ._limits import Overflow, OverflowKind, TransferLimits
from ._messages import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    AgentMessageChunk,
    AnyMcpServer,
    AvailableCommandsUpdate,
    ClientInfo,
    ConfigOption,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Envelope,
    ErrorObject,
    Initialize,
    LoadedSession,
    Modes,
    Notice,
    OutError,
    OutNotification,
    OutRequest,
    OutResult,
    PromptContent,
    RequestId,
    Secret,
    Session,
    SessionPage,
    SessionState,
    SessionUpdate,
    Subagent,
    SubagentUpdate,
    SystemPrompt,
    ToolCall,
    ToolCallUpdate,
    UpdateLine,
    UsageUpdate,
    config_options,
    merged_subagent,
)
from ._permissions import DecisionSource, PermissionPolicy, PermissionReply, PermissionRequest, decide
from ._records import AgentMessage, MessageKind, OutgoingMessage, PromptResult, Update
from ._requests import Meta, Params
from ._serve import PENDING, Act, Failure, Serve, ServeRequest, TerminalRef, ToolCalls
from ._tolerant_json import parseable
from ._trace_context import merged_meta
from .reader import ReaderLimits

__all__ = ["Call", "Conversation", "Done", "Meta", "Reaction", "Record", "Write"]

T = TypeVar("T")

DEFAULT_FEATURES: Final = ClientFeatures()

ON_UPDATE: Final = "on_update"
ON_PERMISSION_REQUEST: Final = "on_permission_request"
ON_PERMISSION_DECISION: Final = "on_permission_decision"
ON_MESSAGE: Final = "on_message"
ON_SEND: Final = "on_send"
ON_ELICITATION: Final = "on_elicitation"
ON_SERVE: Final = "on_serve"
ON_SERVE_DECISION: Final = "on_serve_decision"

_RULES: Final = "refused by the client's rules: "

_MAX_WAITS: Final = 16
"""``terminal/wait_for_exit`` requests one terminal may have waiting at once: an agent waits once; a flood of them
is answered with an error past this, rather than kept."""

_JOIN_EVERY: Final = 1024
"""The kept reply text is joined into one string every time this many more parts were kept."""

_ENDS_A_RUN: Final = frozenset({CurrentModeUpdate, ConfigOptionUpdate, AvailableCommandsUpdate, UsageUpdate})
MAX_STRAY_SESSIONS: Final = 8
"""Sessions this client did not open whose state (mode, config options, commands) it keeps from updates: the
session a ``session/new`` or ``session/load`` in flight opens, whose updates may come before its answer, is one.
Past it the one updated longest ago is forgotten, however many session ids an agent names."""
"""Updates whose effect an observer may see (the session's state, the usage): a run of updates ends after one."""


class Record:
    """Call the observer method ``callback`` with ``value``; send its result back into the step."""

    __slots__ = ("callback", "value")

    def __init__(self, callback: str, value: object) -> None:
        self.callback = callback
        self.value = value


class Write:
    """Record ``message`` with ``on_send``, then write its line to the agent."""

    __slots__ = ("message",)

    def __init__(self, message: OutgoingMessage) -> None:
        self.message = message


class Done:
    """The call in flight has its answer."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


Reaction = Generator[Record | Write | Act, Any, Done | None]
"""What :meth:`Conversation.receive` returns for every line but an accepted update."""


class Call(Generic[T]):
    """One request of ours, encoded, whose answer decodes to ``T``: what a shell's ``_call`` sends and returns.

    Only the latest call is pending: building one forgets the one before it.
    """

    __slots__ = ("message",)

    def __init__(self, message: OutgoingMessage) -> None:
        self.message = message


class _Pending:
    __slots__ = ("finish", "id", "method")

    def __init__(self, id: int, method: str, finish: Callable[[msgspec.Raw], Any]) -> None:
        self.id = id
        self.method = method
        self.finish = finish


class _Turn:
    """One prompt turn's reply, bounded by the reply limits.

    Each of the turn's updates is counted once, in one of ``kept_chunks``, ``dropped_chunks`` (message chunks
    past a reply limit) and ``other_updates``: a kept chunk, the hot path, then writes two counters, not four.
    """

    __slots__ = (
        "cancel_sent",
        "dropped_chunks",
        "joined",
        "kept_bytes",
        "kept_chunks",
        "last_usage",
        "notice_bytes",
        "notices",
        "notices_dropped",
        "other_updates",
        "overflow",
        "parts",
        "session_id",
        "subagents",
        "subagents_dropped",
        "timed_out",
    )

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.parts: list[str] = []
        """The kept text: one string per kept chunk or run of chunks, the first ``joined`` of them blocks of
        ``_JOIN_EVERY`` parts joined into one (a str object costs 49 bytes more than its ASCII text, which more
        than doubles a reply of short chunks: a million 40-byte chunks are 89 MB as chunks, 40 MB joined)."""
        self.joined = 0
        self.kept_bytes = 0
        self.kept_chunks = 0
        self.dropped_chunks = 0
        self.other_updates = 0
        self.overflow: Overflow | None = None
        self.cancel_sent = False
        self.timed_out = False
        self.last_usage: UsageUpdate | None = None
        self.notices: list[Notice] = []
        self.notice_bytes = 0
        self.notices_dropped = 0
        self.subagents: dict[str, Subagent] = {}
        """The children announced in this turn, by session id, each with its merged latest state."""
        self.subagents_dropped = 0


class Conversation:
    """The state of one client's conversation with one agent, driven line by line.

    Args:
        epoch: the caller's transport epoch, stamped on every record.
        transfer_limits: the bounds to apply.
        reader_limits: the line limit (``max_update_bytes`` may not exceed it).
        policy: decides permission requests the observer leaves open.
        client_info: sent in ``initialize``.
        has_observer: whether updates and permission requests can be recorded at all.
        features: the newer parts of ACP advertised in ``initialize`` and acted on.
        sandbox_roots: the sandbox's writable roots (None: no sandbox); ``session/new``, ``load``, ``resume`` and
            ``fork`` asked in a directory outside them raise :class:`~tinyacp.OutsideSandbox` before anything is
            written.
        serve: the files and terminals served to the agent (None: none).

    Raises:
        ValueError: ``max_update_bytes`` is larger than the reader's line limit.
    """

    def __init__(  # noqa: PLR0915  one statement per piece of the conversation's state, each documented
        self,
        *,
        epoch: int,
        transfer_limits: TransferLimits,
        reader_limits: ReaderLimits,
        policy: PermissionPolicy,
        client_info: ClientInfo,
        has_observer: bool,
        features: ClientFeatures = DEFAULT_FEATURES,
        sandbox_roots: Sequence[str] | None = None,
        serve: Serve | None = None,
    ) -> None:
        if transfer_limits.max_update_bytes > reader_limits.max_line:
            raise ValueError(
                f"transfer_limits.max_update_bytes ({transfer_limits.max_update_bytes}) may not exceed "
                f"reader_limits.max_line ({reader_limits.max_line}): a longer update could never be read"
            )
        self.epoch = epoch
        self.limits = transfer_limits
        self.policy = policy
        self.client_info = client_info
        self.has_observer = has_observer
        self.features = features
        self.sandbox_roots = None if sandbox_roots is None else tuple(sandbox_roots)
        """Where the sandboxed agent may write (None: no sandbox): a session asked elsewhere is refused."""
        self.seq = 0
        """The seq of the last update received."""
        self.agent: Initialize | None = None
        """The agent's answer to ``initialize``, once it came."""
        self._next_id = 0
        self._first_line = True
        self._pending: _Pending | None = None
        self._turn: _Turn | None = None
        self._sessions: dict[str, SessionState] = {}
        self._strays: dict[str, None] = {}
        """The sessions of ``_sessions`` not opened here, the one updated longest ago first (see
        :data:`MAX_STRAY_SESSIONS`)."""
        self._children: dict[str, tuple[str, str, int]] = {}
        """Each child session announced by a ``subagent_update`` (since the last turn ended, within the subagent
        limits): the session that announced it, its root (the first session up its chain that is no known child,
        or the turn's session: set once, when it is announced, so no chain is ever walked) and what it costs
        against ``max_subagent_bytes``."""
        self._children_bytes = 0
        self._loading: str | None = None
        """The session a ``session/load`` in flight replays."""
        self._replayed = 0
        self._run_texts: list[str | None] = []
        self._run_others: list[Update] = []
        """The text of each kept chunk of the latest run from :meth:`receive_updates` (None: not text)."""
        self.serve = serve
        self._served_methods = serve.methods if serve is not None else frozenset()
        self._tools = ToolCalls()
        """The session's tool calls: names carried forward to permission requests, and the turn's grants."""
        self._roots: dict[str, tuple[str, ...]] = {}
        """Each open session's folders: its cwd, its additional directories, then ``Serve.roots``."""
        self._opening: tuple[str, ...] = ()
        self._waits: dict[tuple[str, str], list[RequestId]] = {}
        """``terminal/wait_for_exit`` requests waiting for their terminal's command to end."""
        self.ended_sessions: list[str] = []
        """Sessions closed or deleted since the driver last looked: their terminals are released."""
        self._encode = msgspec.json.Encoder().encode
        self._decode_update = msgspec.json.Decoder(UpdateLine).decode
        self._decode_envelope = msgspec.json.Decoder(Envelope).decode
        # Bound once: the hot path reads them on every update.
        self._max_update_bytes = transfer_limits.max_update_bytes
        self._max_updates = transfer_limits.max_updates
        self._max_reply_bytes = transfer_limits.max_reply_bytes
        self._max_reply_chunks = transfer_limits.max_reply_chunks
        self.trace: Callable[[str], Mapping[str, str] | None] | None = None
        """What gives each request's trace context (its method in): its keys go into the request's ``_meta``
        (:func:`tinyacp._trace_context.merged_meta`); None, the default, adds nothing."""
        self._kept = transfer_limits  # what a turn keeps of its notices and children (max_notices, ...)

    # ----------------------------------------------------------------------------------------------------------
    # What we write: each request's params are shaped by :mod:`tinyacp._requests`; here they are numbered,
    # encoded and remembered until their answer.

    def initialize(self, meta: Meta | None = None) -> Call[Initialize]:
        """The ``initialize`` request: protocol version 1, our info, and our client capabilities."""
        params = requests.initialize_params(self.client_info, self.features, meta)
        if self.serve is not None:
            self.serve.advertise(params["clientCapabilities"])
        return self._request("initialize", params, self._initialized)

    def new_session(
        self,
        cwd: str,
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str] = (),
    ) -> Call[Session]:
        """The ``session/new`` request. ``cwd`` must be absolute, as the protocol requires.

        Raises:
            NotAdvertised: a system prompt or additional directories the agent did not advertise.
        """
        params = requests.session_params(
            self.agent,
            None,
            cwd,
            mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
            roots=self.sandbox_roots,
        )
        self._opening = self._folders(params)
        return self._request("session/new", params, lambda raw: self._opened(raw, None))

    def load_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str] = (),
    ) -> Call[LoadedSession]:
        """The ``session/load`` request; the updates the agent replays before its answer are counted.

        Raises:
            NotAdvertised: the agent did not advertise ``loadSession`` (or the extras asked for).
        """
        requests.require_load(self.agent)
        params = requests.session_params(
            self.agent,
            session_id,
            cwd,
            mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
            roots=self.sandbox_roots,
        )
        self._opening = self._folders(params)
        message = self._request("session/load", params, lambda raw: self._loaded(raw, session_id))
        self._loading = session_id
        self._replayed = 0
        return message

    def resume_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str] = (),
    ) -> Call[Session]:
        """The ``session/resume`` request (no replay).

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.resume`` (or the extras asked for).
        """
        requests.session_capability(self.agent, "resume", "session/resume")
        params = requests.session_params(
            self.agent,
            session_id,
            cwd,
            mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
            roots=self.sandbox_roots,
        )
        self._opening = self._folders(params)
        return self._request("session/resume", params, lambda raw: self._opened(raw, session_id))

    def fork_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[AnyMcpServer] = (),
        *,
        meta: Meta | None = None,
        system_prompt: SystemPrompt | None = None,
        additional_directories: Sequence[str] | None = None,
        force: bool = False,
    ) -> Call[Session]:
        """The ``session/fork`` request: a new session from the context of ``session_id``, which stays as it was.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.fork`` (unless ``force``), or the
                extras asked for.
        """
        params, refusal = requests.fork_params(
            self.agent,
            session_id,
            cwd,
            mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=additional_directories,
            roots=self.sandbox_roots,
        )
        self._opening = self._folders(params)
        return self._request("session/fork", params, lambda raw: self._opened(raw, None), refusal=refusal, force=force)

    def close_session(self, session_id: str, meta: Meta | None = None) -> Call[None]:
        """The ``session/close`` request; the session's state is forgotten once the agent agrees.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.close``.
        """
        requests.session_capability(self.agent, "close", "session/close")
        params = requests.with_meta({"sessionId": session_id}, meta)
        return self._request("session/close", params, lambda raw: self._forget(session_id))

    def delete_session(self, session_id: str, meta: Meta | None = None) -> Call[None]:
        """The ``session/delete`` request.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.delete``.
        """
        requests.session_capability(self.agent, "delete", "session/delete")
        params = requests.with_meta({"sessionId": session_id}, meta)
        return self._request("session/delete", params, lambda raw: self._forget(session_id))

    def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, meta: Meta | None = None
    ) -> Call[SessionPage]:
        """The ``session/list`` request, filtered by ``cwd`` (absolute) and continued from ``cursor``.

        Raises:
            NotAdvertised: the agent did not advertise ``sessionCapabilities.list``.
        """
        requests.session_capability(self.agent, "list", "session/list")
        params = requests.list_params(cwd, cursor, meta)
        return self._request("session/list", params, answers.decode_session_page)

    def request(self, method: str, params: Params | None = None) -> Call[Any]:
        """A request of an extension method (``_`` first) or an unstable one; its answer is the decoded JSON.

        Raises:
            UsageError: ``method`` has a call of its own, or is neither an extension nor an unstable method.
        """
        body = requests.extension_params(method, params)
        return self._request(method, body, answers.decode_json)

    def notification(self, method: str, params: Params | None = None) -> OutgoingMessage:
        """A notification of an extension method (``_`` first) or an unstable one.

        Raises:
            UsageError: ``method`` has a call of its own, or is neither an extension nor an unstable method.
            TransferLimitExceeded: the line is longer than ``max_message_bytes``.
        """
        body = requests.extension_params(method, params)
        return self._message(None, method, OutNotification("2.0", method, body))

    def authenticate(self, method_id: str, meta: Meta | None = None) -> Call[None]:
        """The ``authenticate`` request with one of the methods the agent offered.

        Raises:
            NotAdvertised: the agent did not offer ``method_id``, or it is a ``terminal`` method (which the
                user runs themselves, outside the protocol).
        """
        params = requests.authenticate_params(self.agent, method_id, meta)
        return self._request("authenticate", params, answers.decode_nothing)

    def logout(self, meta: Meta | None = None) -> Call[None]:
        """The ``logout`` request.

        Raises:
            NotAdvertised: the agent did not advertise ``agentCapabilities.auth.logout``.
        """
        requests.require_logout(self.agent)
        return self._request("logout", requests.with_meta({}, meta), answers.decode_nothing)

    def set_mode(self, session_id: str, mode_id: str, *, meta: Meta | None = None, force: bool = False) -> Call[None]:
        """The ``session/set_mode`` request; the session's current mode is updated once the agent agrees.

        Raises:
            NotAdvertised: ``mode_id`` is not among the session's available modes (unless ``force``).
        """
        params, refusal = requests.mode_params(self._state(session_id), mode_id, meta)
        finish = lambda raw: self._mode_set(session_id, mode_id)  # noqa: E731
        return self._request("session/set_mode", params, finish, refusal=refusal, force=force)

    def set_config_option(
        self, session_id: str, config_id: str, value: str | bool, *, meta: Meta | None = None, force: bool = False
    ) -> Call[tuple[ConfigOption, ...]]:
        """The ``session/set_config_option`` request: a value id for a select option, a bool for a boolean one.

        Raises:
            NotAdvertised: an unknown ``config_id``, an option of an unknown type, or a value the option does
                not offer (unless ``force``).
            TypeError: ``value`` is neither a str nor a bool.
        """
        params, refusal = requests.config_params(self._state(session_id), config_id, value, meta)
        finish = lambda raw: self._options_set(session_id, raw)  # noqa: E731
        return self._request("session/set_config_option", params, finish, refusal=refusal, force=force)

    def set_model(self, session_id: str, model_id: str, *, meta: Meta | None = None, force: bool = False) -> Call[None]:
        """Choose the session's model: through its ``model`` config option, else the legacy ``session/set_model``.

        Raises:
            NotAdvertised: no model option, and ``model_id`` is not among the session's legacy ``models``
                (unless ``force``); or the model option does not offer ``model_id``.
        """
        state = self._state(session_id)
        option = state.model_option()
        if option is not None:
            params, refusal = requests.config_params(state, option.id, model_id, meta)

            def options_set(raw: msgspec.Raw) -> None:  # the answer is None: the options are left out
                self._options_set(session_id, raw)

            return self._request("session/set_config_option", params, options_set, refusal=refusal, force=force)
        params, refusal = requests.model_params(state, model_id, meta)
        finish = lambda raw: self._model_set(session_id, model_id)  # noqa: E731
        return self._request("session/set_model", params, finish, refusal=refusal, force=force)

    def session_state(self, session_id: str) -> SessionState:
        """The session's state as last reported.

        Raises:
            UsageError: the agent never opened or reported on this session in this client.
        """
        state = self._sessions.get(session_id)
        if state is None:
            raise UsageError(f"no session {session_id!r} is known to this client")
        return state

    def prompt(
        self, session_id: str, content: str | Sequence[PromptContent], meta: Meta | None = None
    ) -> Call[PromptResult]:
        """The ``session/prompt`` request; starts the turn whose reply the core collects.

        Raises:
            UnsupportedContent: a block needs a capability the agent did not advertise.
            TransferLimitExceeded: the line is longer than ``max_message_bytes``.
        """
        params = requests.prompt_params(self.agent, session_id, content, meta)
        call = self._request("session/prompt", params, self._finish_prompt)
        self._turn = _Turn(session_id)
        return call

    def cancel(self, session_id: str, meta: Meta | None = None) -> OutgoingMessage:
        """A ``session/cancel`` notification; from now on this turn's permission requests are cancelled.

        Raises:
            TransferLimitExceeded: the line is longer than ``max_message_bytes`` (the turn is left as it was).
        """
        message = self.check_cancel(session_id, meta)
        turn = self._turn
        if turn is not None and turn.session_id == session_id:
            turn.cancel_sent = True
        return message

    def check_cancel(self, session_id: str, meta: Meta | None = None) -> OutgoingMessage:
        """The ``session/cancel`` line, built without marking the turn: lets a shell refuse it when it is asked
        for, rather than when it is written in the middle of another call.

        Raises:
            TransferLimitExceeded: the line is longer than ``max_message_bytes``.
            TypeError: ``meta`` is not a dict.
        """
        params = requests.with_meta({"sessionId": session_id}, meta)
        return self._message(None, "session/cancel", OutNotification("2.0", "session/cancel", params))

    def cancel_turn_once(self) -> OutgoingMessage | None:
        """The one ``session/cancel`` a limit or a deadline sends; None if the turn was cancelled already."""
        turn = self._turn
        if turn is None or turn.cancel_sent:
            return None
        return self.cancel(turn.session_id)

    def deadline_passed(self) -> OutgoingMessage | None:
        """The prompt's deadline passed: mark the turn timed out and ask the agent to stop (once)."""
        if self._turn is not None:
            self._turn.timed_out = True
        return self.cancel_turn_once()

    def end_call(self) -> None:
        """Forget the call in flight (done, failed or timed out): a late answer is then a stray response."""
        self._pending = None
        if self._turn is not None:
            self._turn_ended()
        self._loading = None
        self._tools.end_turn()

    @property
    def in_turn(self) -> bool:
        """Whether a prompt turn is waiting for its response."""
        return self._turn is not None

    @property
    def turn_session(self) -> str | None:
        """The session of the prompt turn waiting for its response (None: no turn is)."""
        turn = self._turn
        return None if turn is None else turn.session_id

    def cancel_request(self) -> OutgoingMessage | None:
        """A ``$/cancel_request`` for the request in flight, whose deadline passed; None if none is in flight.

        The agent may ignore it (https://agentclientprotocol.com/protocol/cancellation); our late answer is then
        a stray response.
        """
        pending = self._pending
        if pending is None:
            return None
        body = OutNotification("2.0", "$/cancel_request", {"requestId": pending.id})
        return OutgoingMessage(self.epoch, self._encode(body), "$/cancel_request", None)

    def _request(
        self,
        method: str,
        params: Any,
        finish: Callable[[msgspec.Raw], T],
        *,
        refusal: str | None = None,
        force: bool = False,
    ) -> Call[T]:
        """Build a request; ``refusal`` (what the agent did not advertise) raises NotAdvertised unless ``force``."""
        if refusal is not None and not force:
            raise NotAdvertised(f"{refusal}; nothing was written (force=True sends it anyway)")
        request_id = self._next_id
        if self.trace is not None and isinstance(params, dict):
            params = {**params, "_meta": merged_meta(params.get("_meta"), self.trace(method))}
            if params["_meta"] is None:
                del params["_meta"]
        message = self._message(request_id, method, OutRequest("2.0", request_id, method, params), refusal is not None)
        self._next_id += 1
        self._pending = _Pending(request_id, method, finish)
        return Call(message)

    def _message(self, request_id: int | None, method: str, body: object, forced: bool = False) -> OutgoingMessage:
        # The secrets found are collected per line: a cancel may be built on another thread meanwhile.
        found: list[Secret] = []

        def plain(value: object) -> object:
            if isinstance(value, Secret):
                found.append(value)
                return value.value
            raise TypeError(f"a {type(value).__name__} cannot be sent as JSON (params and meta hold JSON values)")

        raw = msgspec.json.Encoder(enc_hook=plain).encode(body)
        if len(raw) > self.limits.max_message_bytes:
            raise TransferLimitExceeded("max_message_bytes", self.limits.max_message_bytes, len(raw))
        return OutgoingMessage(self.epoch, raw, method, request_id, tuple(dict.fromkeys(found)), forced)

    def _state(self, session_id: str) -> SessionState:
        return self._sessions.get(session_id) or SessionState(session_id)

    def _response(self, request_id: RequestId, result: Any) -> OutgoingMessage:
        return OutgoingMessage(self.epoch, self._encode(OutResult("2.0", request_id, result)), None, request_id)

    def _error(self, request_id: RequestId, code: int, message: str) -> OutgoingMessage:
        body = OutError("2.0", request_id, ErrorObject(code, message))
        return OutgoingMessage(self.epoch, self._encode(body), None, request_id)

    # ----------------------------------------------------------------------------------------------------------
    # Answers to our requests.

    def _initialized(self, result: msgspec.Raw) -> Initialize:
        self.agent = answers.decode_initialize(result)
        return self.agent

    def _opened(self, result: msgspec.Raw, session_id: str | None) -> Session:
        session = answers.decode_session(result, session_id)
        self._roots[session.id] = self._opening
        # Commands reported before the answer (during a load) are kept; the rest is the answer's word.
        commands = self._state(session.id).available_commands
        self._sessions[session.id] = SessionState(
            session.id, session.modes, session.config_options, session.models, commands
        )
        self._strays.pop(session.id, None)
        return session

    def _loaded(self, result: msgspec.Raw, session_id: str) -> LoadedSession:
        replayed = self._replayed
        self._loading = None
        return LoadedSession(self._opened(result, session_id), replayed)

    def _stray(self, session_id: str) -> None:
        """An update changed the state of a session not opened here: keep it among the last few such."""
        strays = self._strays
        strays.pop(session_id, None)
        strays[session_id] = None
        if len(strays) > MAX_STRAY_SESSIONS:
            oldest = next(iter(strays))
            del strays[oldest]
            self._sessions.pop(oldest, None)

    def _forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._strays.pop(session_id, None)
        if self._roots.pop(session_id, None) is not None:
            self.ended_sessions.append(session_id)

    def _mode_set(self, session_id: str, mode_id: str) -> None:
        state = self._state(session_id)
        available = state.modes.available_modes if state.modes is not None else []
        self._sessions[session_id] = msgspec.structs.replace(state, modes=Modes(mode_id, available))

    def _model_set(self, session_id: str, model_id: str) -> None:
        state = self._state(session_id)
        if state.models is not None:
            models = msgspec.structs.replace(state.models, current_model_id=model_id)
            self._sessions[session_id] = msgspec.structs.replace(state, models=models)

    def _options_set(self, session_id: str, result: msgspec.Raw) -> tuple[ConfigOption, ...]:
        options = answers.decode_options(result)
        self._sessions[session_id] = msgspec.structs.replace(self._state(session_id), config_options=options)
        return options

    def _finish_prompt(self, result: msgspec.Raw) -> PromptResult:
        turn = self._turn
        assert turn is not None, "a prompt response is only accepted while its turn is open"
        reason, usage, meta = answers.decode_prompt(result, turn.last_usage)
        self._turn_ended()
        chunks = turn.kept_chunks + turn.dropped_chunks
        return PromptResult(
            session_id=turn.session_id,
            text="".join(turn.parts),
            stop_reason=reason,
            overflow=turn.overflow,
            update_count=chunks + turn.other_updates,
            chunk_count=chunks,
            timed_out=turn.timed_out,
            cancelled=turn.cancel_sent,
            meta=meta,
            usage=usage,
            notices=tuple(turn.notices),
            subagents=tuple(turn.subagents.values()),
            notices_dropped=turn.notices_dropped,
            subagents_dropped=turn.subagents_dropped,
        )

    def _turn_ended(self) -> None:
        """The turn is over: its children are forgotten, so what the client keeps about them never outlives it."""
        self._turn = None
        self._children = {}
        self._children_bytes = 0

    # ----------------------------------------------------------------------------------------------------------
    # What the agent sends.

    def receive(self, raw: bytes) -> Update | Reaction:
        """Classify one line (without its newline): an update to record, or a step for everything else.

        Raises:
            MissingDurableObserver: an update arrived and there is no observer.
        """
        try:
            params = self._decode_update(raw).params
        except _UNREADABLE:
            return self._unusual(raw)
        # The hot path: _accept inlined for an update within the limits, with an observer to record it.
        seq = self.seq + 1
        if seq <= self._max_updates and len(raw) <= self._max_update_bytes and self.has_observer:
            self.seq = seq
            payload = params.update
            return Update(self.epoch, seq, raw, payload.kind, params.session_id, payload)
        return self._accept(raw, params.session_id, params.update)

    def receive_updates(self, lines: list[bytes], start: int) -> list[Update]:
        """The hot path, a run of lines at a time: the updates at the front of ``lines[start:]``, decoded and
        numbered in one pass, with the limits checked once for the run.

        The run takes lines as long as they are updates that no limit can refuse or overflow (it holds as many
        kept chunks, and as many bytes of kept text as there are bytes in its lines, as the reply limits leave
        room for). Updates that change nothing an observer can see (a chunk kept, dropped past the reply limit
        or of another session, a thought, a tool call: counted for the result) go on in the run; it ends after
        the first one that changes the session's state (mode, config options, commands) or the usage, so that
        what that one changes is in place before the next update is recorded. The line after the run, if any,
        is for :meth:`receive`, which decides it exactly. The caller records each update of the run in order,
        then calls :meth:`updates_recorded` with it.

        Returns:
            The run: empty when the line at ``start`` is for :meth:`receive`.
        """
        if not self.has_observer:
            return []
        seq = self.seq
        stop = min(len(lines), start + self._max_updates - seq)
        turn = self._turn
        turn_session: str | None = None  # the session whose chunks are kept
        room = sys.maxsize  # bytes of text the reply limit leaves room for
        if turn is not None and turn.overflow is None:
            turn_session = turn.session_id
            stop = min(stop, start + self._max_reply_chunks - turn.kept_chunks)
            room = self._max_reply_bytes - turn.kept_bytes
        # A chunk's text is shorter than its line: a run whose lines fit in the room left cannot overflow. Each
        # line is measured as the run reaches it (a run often ends after one update: measuring, or copying, the
        # rest of the batch for each would make a batch cost its length squared).
        longest = self._max_update_bytes
        texts: list[str | None] = []
        self._run_texts = texts
        keep = texts.append
        others: list[Update] = []  # the updates of the run that are not kept chunks: counted once recorded
        self._run_others = others
        other = others.append
        decode = self._decode_update
        epoch = self.epoch
        run: list[Update] = []
        append = run.append
        for raw in itertools.islice(lines, start, stop):
            size = len(raw)
            room -= size
            if size > longest or room < 0:
                break
            try:
                params = decode(raw).params
            except _UNREADABLE:
                break
            seq += 1
            payload = params.update
            session_id = params.session_id
            update = Update(epoch, seq, raw, payload.kind, session_id, payload)
            append(update)
            if payload.__class__ is AgentMessageChunk and session_id == turn_session:
                keep(payload.content.text)
                continue
            other(update)
            if payload.__class__ in _ENDS_A_RUN:
                break
        self.seq = seq
        return run

    def updates_recorded(self, run: list[Update]) -> None:
        """Act on a run from :meth:`receive_updates` once the observer recorded all of it: collect the reply.
        A run never reaches a reply limit, so it never asks for a cancel."""
        texts = self._run_texts
        if texts:
            turn = self._turn
            assert turn is not None, "a run keeps text only in a turn"
            try:
                text = "".join(texts)  # type: ignore[arg-type]  # a None is caught below
            except TypeError:  # a chunk that is not text (an image, say) keeps no text
                text = "".join([part for part in texts if part is not None])
            turn.kept_bytes += len(text) if text.isascii() else len(text.encode())
            turn.kept_chunks += len(texts)
            assert turn.kept_bytes <= self._max_reply_bytes and turn.kept_chunks <= self._max_reply_chunks
            self._keep(turn, text)
        for update in self._run_others:
            self.update_recorded(update)  # counted, or the state it changes (only the run's last one changes any)

    def update_recorded(self, update: Update) -> OutgoingMessage | None:
        """Act on an update the observer recorded: collect the reply; on overflow, the one cancel to send."""
        turn = self._turn
        payload = update.payload
        if payload.__class__ is not AgentMessageChunk:
            self._other_recorded(update, payload, turn)
            return None
        if turn is None or update.session_id != turn.session_id:
            if self._loading == update.session_id:
                self._replayed += 1
            return None
        if turn.overflow is not None:
            turn.dropped_chunks += 1
            return None
        text = payload.content.text
        if text is None:
            size = 0
            text = ""
        elif text.isascii():
            size = len(text)
        else:
            size = len(text.encode())
        kept_bytes = turn.kept_bytes + size
        kept_chunks = turn.kept_chunks
        if kept_chunks < self._max_reply_chunks and kept_bytes <= self._max_reply_bytes:
            turn.kept_bytes = kept_bytes
            turn.kept_chunks = kept_chunks + 1
            self._keep(turn, text)
            return None
        turn.dropped_chunks += 1
        kind = OverflowKind.REPLY_CHUNKS if kept_chunks >= self._max_reply_chunks else OverflowKind.REPLY_BYTES
        turn.overflow = Overflow(kind, turn.kept_bytes, kept_chunks, update.seq)
        return self.cancel_turn_once()

    @staticmethod
    def _keep(turn: _Turn, text: str) -> None:
        parts = turn.parts
        parts.append(text)
        joined = turn.joined
        if len(parts) - joined >= _JOIN_EVERY:
            parts[joined:] = ["".join(parts[joined:])]
            turn.joined = joined + 1

    def _other_recorded(self, update: Update, payload: SessionUpdate, turn: _Turn | None) -> None:
        """Any update but a message chunk, once recorded: count it, keep the session state and the usage."""
        session_id = update.session_id
        cls = payload.__class__
        if turn is not None and session_id == turn.session_id:
            turn.other_updates += 1
            if cls is UsageUpdate:
                turn.last_usage = payload  # type: ignore[assignment]  # checked by its class
            elif cls is Notice:
                self._notice(turn, payload)  # type: ignore[arg-type]  # checked by its class
        elif self._loading == session_id:
            self._replayed += 1
        if cls is CurrentModeUpdate or cls is ConfigOptionUpdate or cls is AvailableCommandsUpdate:
            self._sessions[session_id] = _applied(self._state(session_id), payload)
            if session_id not in self._roots:
                self._stray(session_id)
        elif cls is SubagentUpdate:
            self._announced(session_id, payload, turn)  # type: ignore[arg-type]  # checked by its class
        elif cls is ToolCall or cls is ToolCallUpdate:
            self._tools.seen(session_id, payload)  # type: ignore[arg-type]  # checked by its class

    def _notice(self, turn: _Turn, notice: Notice) -> None:
        """Keep the turn's notice within ``max_notices`` and ``max_notice_bytes``, else count it left out."""
        size = _utf8_size(notice.severity) + _utf8_size(notice.title) + _utf8_size(notice.description or "")
        if len(turn.notices) < self._kept.max_notices and turn.notice_bytes + size <= self._kept.max_notice_bytes:
            turn.notices.append(notice)
            turn.notice_bytes += size
        else:
            turn.notices_dropped += 1

    def _announced(self, parent: str, payload: SubagentUpdate, turn: _Turn | None) -> None:
        """A ``subagent_update``: remember whose child the session is and its root, and keep its state for the
        turn's result when the turn's session (or one of its children) announced it; all within the subagent
        limits (an announcement past them is left out, and counted when it is the turn's)."""
        child = payload.session_id
        if child == parent:  # a session cannot be its own child: recorded, and otherwise ignored
            return
        children = self._children
        turn_session = None if turn is None else turn.session_id
        above = children.get(parent)
        # The root is set here, once: the turn's session is a root whatever announced it (so a loop ends there).
        root = parent if above is None or parent == turn_session else above[1]
        known = children.get(child)
        old = 0 if known is None else known[2]
        state: Subagent | None = None
        if turn is not None and root == turn_session:
            state = merged_subagent(turn.subagents.get(child), payload)
            size = self._state_size(state) + _utf8_size(parent)
        else:
            size = _utf8_size(child) + _utf8_size(parent)
            if turn is not None and child in turn.subagents:
                size = max(size, old)  # its state stays in the result: still counted
        total = self._children_bytes - old + size
        if (known is None and len(children) >= self._kept.max_subagents) or total > self._kept.max_subagent_bytes:
            if state is not None:
                turn.subagents_dropped += 1  # type: ignore[union-attr]  # a state is only made in a turn
            return
        children[child] = (parent, root, size)
        self._children_bytes = total
        if state is not None:
            turn.subagents[child] = state  # type: ignore[union-attr]  # a state is only made in a turn

    def _state_size(self, state: Subagent) -> int:
        """What a child's state counts against ``max_subagent_bytes``: its texts in UTF-8, the rest as JSON."""
        size = _utf8_size(state.session_id)
        for text in (state.title, state.description, state.cwd):
            if text is not None:
                size += _utf8_size(text)
        for value in (state.capabilities, state.state, state.additional_directories):
            if value is not None:
                size += len(self._encode(value))
        return size

    def _parent(self, session_id: str) -> str | None:
        """The session that announced ``session_id`` as its child, if the client keeps it."""
        known = self._children.get(session_id)
        return None if known is None else known[0]

    def _descends(self, session_id: str, ancestor: str) -> bool:
        """Whether ``session_id`` is ``ancestor`` or a child (a subagent) of it whose root it is, at any depth:
        one look-up, as the root was set when the child was announced."""
        if session_id == ancestor:
            return True
        known = self._children.get(session_id)
        return known is not None and known[1] == ancestor

    def _accept(self, raw: bytes, session_id: str, payload: SessionUpdate) -> Update | Reaction:
        if not self.has_observer:
            raise MissingDurableObserver(
                "an update arrived and the client has no observer to record it; pass Options(observer=...)"
            )
        seq = self.seq = self.seq + 1
        if len(raw) > self._max_update_bytes:
            return self._refuse(raw, seq, "max_update_bytes", self._max_update_bytes, len(raw))
        if seq > self._max_updates:
            return self._refuse(raw, seq, "max_updates", self._max_updates, seq)
        return Update(self.epoch, seq, raw, payload.kind, session_id, payload)

    def _unusual(self, raw: bytes) -> Update | Reaction:
        """A line the update decoder refused. A byte-order mark before the agent's first line, and lone surrogate
        escapes, are set aside for parsing only: records keep ``raw`` exactly, a text gets U+FFFD in their place."""
        text = parseable(raw, first_line=self._first_line and self.seq == 0)
        self._first_line = False
        if text != raw:
            try:
                params = self._decode_update(text).params
            except _UNREADABLE:
                return self._other(raw, text)
            return self._accept(raw, params.session_id, params.update)
        return self._other(raw, raw)

    def _refuse(self, raw: bytes, seq: int, limit: str, value: int, size: int) -> Reaction:
        detail = f"update seq {seq} refused: {limit}={value} exceeded ({size})"
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.REFUSED_UPDATE, "session/update", None, detail))
        raise TransferLimitExceeded(limit, value, size, seq)

    def _note(
        self, raw: bytes, kind: MessageKind, method: str | None, request_id: RequestId, detail: str = ""
    ) -> AgentMessage:
        return AgentMessage(self.epoch, raw, kind, method, request_id, detail)

    def _invalid(self, raw: bytes, detail: str) -> Reaction:
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.INVALID, None, None, detail))
        return None

    def _other(self, raw: bytes, text: bytes) -> Reaction:  # noqa: PLR0911  one return per kind of message
        """Everything but an update: ``text`` is ``raw`` made parseable (see :meth:`_unusual`)."""
        envelope = inbound.read(self._decode_envelope, text)
        if isinstance(envelope, inbound.Malformed):
            if envelope.request_id is None:
                return self._invalid(raw, envelope.detail)
            return self._answer_invalid(raw, None, envelope.request_id, envelope.detail, envelope.code)
        elicitation = self.features.elicitation or self.features.elicitation_url
        kind = inbound.kind(envelope, elicitation=elicitation, served=self._served_methods)
        if kind is Kind.UPDATE:
            return self._loose_update(raw, envelope)
        if kind is Kind.NOTIFICATION:
            return self._notification(raw, envelope)
        if kind is Kind.PERMISSION:
            return self._permission(raw, envelope)
        if kind is Kind.ELICITATION:
            return self._elicitation(raw, envelope)
        if kind is Kind.SERVED:
            return self._served(raw, envelope)
        if kind is Kind.UNSERVED:
            return self._unserved(raw, envelope)
        if kind is Kind.RESPONSE:
            return self._response_to_us(raw, envelope)
        return self._invalid(raw, "neither a request, a response nor a notification")

    def _answer_invalid(
        self, raw: bytes, method: str | None, request_id: RequestId, detail: str, code: int
    ) -> Reaction:
        """A request we cannot use, answered with ``code``, so that the agent never waits for ever."""
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.INVALID_REQUEST, method, request_id, detail))
        title = "Invalid params" if code == INVALID_PARAMS else "Invalid Request"
        yield Write(self._error(request_id, code, f"{title}: {detail}"))
        return None

    def _notification(self, raw: bytes, envelope: Envelope) -> Reaction:
        method = envelope.method
        assert isinstance(method, str), "a notification has a method"
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.NOTIFICATION, method, None))
        return None

    def _unserved(self, raw: bytes, envelope: Envelope) -> Reaction:
        method, request_id = envelope.method, envelope.id
        assert isinstance(method, str) and request_id is not msgspec.UNSET, "a request has a method and an id"
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.REQUEST, method, request_id))
        yield Write(self._error(request_id, METHOD_NOT_FOUND, "Method not found"))
        return None

    def _loose_update(self, raw: bytes, envelope: Envelope) -> Reaction:
        loose = inbound.loose_update(envelope)
        if isinstance(loose, str):
            yield from self._invalid(raw, loose)
            return None
        update = self._accept(raw, *loose)
        if not isinstance(update, Update):
            return (yield from update)
        yield Record(ON_UPDATE, update)
        cancel = self.update_recorded(update)
        if cancel is not None:
            yield Write(cancel)
        return None

    def _permission(self, raw: bytes, envelope: Envelope) -> Reaction:
        request_id = envelope.id
        assert request_id is not msgspec.UNSET
        params = inbound.permission_params(envelope)
        if isinstance(params, str):
            return (
                yield from self._answer_invalid(raw, "session/request_permission", request_id, params, INVALID_PARAMS)
            )
        if not self.has_observer:
            raise MissingDurableObserver(
                "a permission request arrived and the client has no observer to record the decision"
            )
        tool_call = params.tool_call
        if tool_call.name is None:  # Codex names its tool in a tool_call_update only: carried forward, so that
            known = self._tools.name_of(params.session_id, tool_call.tool_call_id)  # deny_tools cannot miss it
            if known is not None:
                tool_call = msgspec.structs.replace(tool_call, name=known)
        request = PermissionRequest(self.epoch, raw, request_id, params.session_id, tool_call, params.options)
        request.parent_session_id = self._parent(params.session_id)
        reply = yield Record(ON_PERMISSION_REQUEST, request)
        if reply is not None and not isinstance(reply, PermissionReply):
            raise ObserverError(
                f"on_permission_request must return a PermissionReply or None, not {type(reply).__name__}"
            )
        decide(request, reply, self.policy, cancelled=self._cancelled(params.session_id))
        if request.allowed and request.decided_by == DecisionSource.OBSERVER:  # the policy's decides anew
            self._tools.grant(params.session_id, self._tools.completed(params.session_id, tool_call))
        yield Record(ON_PERMISSION_DECISION, request)
        yield Write(self._response(request_id, {"outcome": request.outcome}))
        return None

    def _cancelled(self, session_id: str | None) -> bool:
        """Whether the turn was cancelled and ``session_id`` is its session or a child of it: the agent cancels
        the children of a cancelled session itself, so their questions get the cancelled answer too."""
        turn = self._turn
        return (
            turn is not None
            and turn.cancel_sent
            and session_id is not None
            and self._descends(session_id, turn.session_id)
        )

    def _elicitation(self, raw: bytes, envelope: Envelope) -> Reaction:
        """``elicitation/create`` (with elicitation on): recorded as received, decided by the observer's
        ``on_elicitation`` (no reply: declined; a cancelled turn's: cancelled), then answered; the answer, which
        carries the decision, is recorded before it is written."""
        request_id = envelope.id
        assert request_id is not msgspec.UNSET
        params = inbound.elicitation_params(envelope)
        if isinstance(params, str):
            return (yield from self._answer_invalid(raw, "elicitation/create", request_id, params, INVALID_PARAMS))
        if not self.has_observer:
            raise MissingDurableObserver("an elicitation arrived and the client has no observer to record it")
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.ELICITATION, "elicitation/create", request_id))
        request = elicitation_request(self.epoch, raw, request_id, params)
        if self._cancelled(params.session_id):
            request.reply, request.decided_by = ElicitationReply.cancel(), "cancelled"
        else:
            reply = yield Record(ON_ELICITATION, request)
            if reply is not None and not isinstance(reply, ElicitationReply):
                raise ObserverError(
                    f"on_elicitation must return an ElicitationReply or None, not {type(reply).__name__}"
                )
            request.reply = reply or ElicitationReply.decline()
            request.decided_by = "observer" if reply is not None else "default-decline"
        answer = self._response(request_id, request.reply._wire())
        yield Write(msgspec.structs.replace(answer, decided_by=request.decided_by))
        return None

    def _response_to_us(self, raw: bytes, envelope: Envelope) -> Reaction:
        pending = self._pending
        request_id = envelope.id
        assert request_id is not msgspec.UNSET, "only a message with an id is a response"
        if pending is None or type(request_id) is not int or request_id != pending.id:
            detail = "a response to an id we did not send or that was already answered"
            yield Record(ON_MESSAGE, self._note(raw, MessageKind.STRAY_RESPONSE, None, request_id, detail))
            return None
        self._pending = None
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.RESPONSE, pending.method, request_id))
        result = answers.result_of(pending.method, envelope, self.agent)
        try:
            return Done(pending.finish(result))
        except _UNREADABLE as exc:
            raise ProtocolViolation(f"the answer to {pending.method} does not fit the schema: {exc}") from exc

    # ----------------------------------------------------------------------------------------------------------
    # Files and terminals served to the agent (``Options(serve=...)``): the rules are :mod:`tinyacp._serve`'s,
    # the I/O is done by the driver's services for each :class:`~tinyacp._serve.Act` yielded here.

    def _folders(self, params: Params) -> tuple[str, ...]:
        """A session's folders from its opening request: its cwd, its additional directories, ``Serve.roots``."""
        extra = self.serve.roots if self.serve is not None else ()
        return (params["cwd"], *params.get("additionalDirectories", ()), *extra)

    def _served(self, raw: bytes, envelope: Envelope) -> Reaction:
        """A served request: recorded as received; a read, a write or a command decided (the decision recorded
        with ``on_serve_decision`` before anything is done), done, and answered; the answer carries who decided."""
        method, request_id = envelope.method, envelope.id
        assert isinstance(method, str) and request_id is not msgspec.UNSET
        params = serving.parse_params(method, envelope.params or b"null")
        if isinstance(params, str):
            return (yield from self._answer_invalid(raw, method, request_id, params, INVALID_PARAMS))
        if not self.has_observer:
            raise MissingDurableObserver("a request for a file or a terminal arrived and the client has no observer")
        yield Record(ON_MESSAGE, self._note(raw, MessageKind.SERVED, method, request_id))
        if isinstance(params, serving.TerminalParams):
            return (yield from self._terminal_request(method, request_id, params))
        request = self._serve_request(raw, request_id, method, params)
        problem = yield from self._serve_decided(request)
        yield Record(ON_SERVE_DECISION, request)
        if not request.allowed:
            message = problem.message if problem is not None else f"{_RULES}{request.reason}"
            code = problem.code if problem is not None else serving.REFUSED
            yield Write(self._decided(self._error(request_id, code, message), request))
            return None
        op = {"fs/read_text_file": "read", "fs/write_text_file": "write"}.get(method, "create")
        content = params.content if isinstance(params, serving.WriteParams) else ""
        result = yield Act(op, request, self._roots.get(request.session_id, ()), content=content)
        if isinstance(result, Failure):
            answer = self._error(request_id, result.code, result.message)
        else:
            results = {"read": {"content": result}, "write": {}, "create": {"terminalId": result}}
            answer = self._response(request_id, results[op])
        yield Write(self._decided(answer, request))
        return None

    def _serve_decided(self, request: ServeRequest) -> Generator[Record | Act, Any, Failure | None]:
        """Decide ``request``: confinement (and the terminal limit), which no one overrides, then the observer's
        ``on_serve`` and the rules (:func:`~tinyacp._serve.decide_serve`); a refusal by confinement is returned."""
        roots = self._roots.get(request.session_id)
        problem: Failure | None
        if roots is None:
            problem = Failure(serving.REFUSED, f"{_RULES}no session {request.session_id!r} is open here", True)
        elif self._cancelled(request.session_id):
            request.decided_by, request.reason = "cancelled", "the turn was cancelled"
            return Failure(serving.REFUSED, f"{_RULES}the turn was cancelled")
        else:
            if request.kind == "execute" and request.cwd is None:
                request.cwd = roots[0]
            problem = yield Act("check", request, roots)
        if problem is not None:
            limit = problem.confinement and "terminals at once" in problem.message
            request.decided_by = "limit" if limit else "confinement"
            request.reason = problem.message.removeprefix(_RULES)
            return problem
        tools, session_id = self._tools, request.session_id
        request.granted = tools.granted(session_id, request.kind, request.path, use=False)
        answer = yield Record(ON_SERVE, request)
        if answer is not None and not isinstance(answer, bool):
            raise ObserverError(f"on_serve must return True, False or None, not {type(answer).__name__}")
        granted = answer is None and request.granted and tools.granted(session_id, request.kind, request.path)
        assert self.serve is not None
        serving.decide_serve(request, answer, self.policy, self.serve, granted=granted)
        return None

    def _serve_request(self, raw: bytes, request_id: RequestId, method: str, params: Any) -> ServeRequest:
        """The request as the observer sees it, with the tool call it most likely belongs to."""
        request = ServeRequest(self.epoch, raw, request_id, method, params.session_id, serving.kind_of(method))
        if isinstance(params, serving.ReadParams):
            request.path, request.line_number, request.limit = params.path, params.line, params.limit
        elif isinstance(params, serving.WriteParams):
            request.path = params.path
            request.size = len(params.content.encode("utf-8", "surrogatepass"))
        else:
            assert isinstance(params, serving.CreateParams)
            request.command, request.args, request.cwd = params.command, tuple(params.args), params.cwd
            request.env = {entry.name: entry.value for entry in params.env}
            request.line = serving.command_line(params.command, params.args)
            request.output_limit = params.output_byte_limit
        request.tool_call = self._tools.likely(request.session_id, method, request.path)
        return request

    def _decided(self, message: OutgoingMessage, request: ServeRequest) -> OutgoingMessage:
        return msgspec.structs.replace(message, decided_by=request.decided_by)

    def _terminal_request(self, method: str, request_id: RequestId, params: serving.TerminalParams) -> Reaction:
        """``terminal/output``, ``wait_for_exit``, ``kill`` or ``release`` of a terminal this client started."""
        op = {"terminal/wait_for_exit": "wait"}.get(method, method.removeprefix("terminal/"))
        ref = TerminalRef(params.session_id, params.terminal_id)
        result = yield Act(op, ref)
        if isinstance(result, Failure):
            yield Write(self._error(request_id, result.code, result.message))
        elif op == "output":
            answer: dict[str, Any] = {"output": result.output, "truncated": result.truncated}
            if result.exit is not None:
                answer["exitStatus"] = result.exit.wire()
            yield Write(self._response(request_id, answer))
        elif op == "wait" and result is PENDING:
            waits = self._waits.setdefault((ref.session_id, ref.terminal_id), [])
            if len(waits) >= _MAX_WAITS:
                yield Write(self._error(request_id, serving.FAILED, f"at most {_MAX_WAITS} waits per terminal"))
            else:
                waits.append(request_id)  # answered when the command ends (terminal_exited)
        elif op == "wait":
            yield Write(self._response(request_id, result.wire()))
        else:
            yield Write(self._response(request_id, {}))
        return None

    def terminal_exited(self, session_id: str, terminal_id: str, status: serving.ExitStatus) -> list[OutgoingMessage]:
        """A terminal's command ended: the answers to the ``terminal/wait_for_exit`` requests waiting for it."""
        waits = self._waits.pop((session_id, terminal_id), [])
        return [self._response(request_id, status.wire()) for request_id in waits]


def _utf8_size(text: str) -> int:
    """The length of ``text`` in UTF-8, without encoding an ASCII text."""
    return len(text) if text.isascii() else len(text.encode())


def _applied(state: SessionState, payload: SessionUpdate) -> SessionState:
    """The session state with a mode, config option or commands update applied."""
    if isinstance(payload, CurrentModeUpdate):
        available = state.modes.available_modes if state.modes is not None else []
        return msgspec.structs.replace(state, modes=Modes(payload.current_mode_id, available))
    if isinstance(payload, ConfigOptionUpdate):
        return msgspec.structs.replace(state, config_options=config_options(payload.config_options))
    assert isinstance(payload, AvailableCommandsUpdate)
    return msgspec.structs.replace(state, available_commands=tuple(payload.available_commands))
